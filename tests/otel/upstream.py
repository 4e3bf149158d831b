"""An instrumented MCP upstream for narrowgate's telemetry tests (tests/telemetry.rs).

    python upstream.py PORT OTLP_TRACES_URL

A Python SDK (mcp 2.x) MCPServer over stateless Streamable HTTP on 127.0.0.1:PORT/mcp. The SDK
records a SERVER span per request (MCP semantic conventions), whose parent is the W3C context in
`params._meta.traceparent`; spans are exported at once over OTLP/HTTP protobuf to OTLP_TRACES_URL
with service.name "py-upstream". Tools: `add(a, b)` and `fail()` (a tool error).
"""

import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

# The provider must be global before the SDK's middleware asks for a tracer.
provider = TracerProvider(resource=Resource.create({"service.name": "py-upstream"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=sys.argv[2])))
trace.set_tracer_provider(provider)

from mcp.server.mcpserver import MCPServer  # noqa: E402  (after the provider, on purpose)

server = MCPServer("py-upstream-otel")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


server.run(
    transport="streamable-http",
    host="127.0.0.1",
    port=int(sys.argv[1]),
    stateless_http=True,
    json_response=True,
)
