"""A Python SDK (mcp 2.x) MCP upstream for narrowgate's relay tests (tests/relays/).

    python py_upstream.py PORT

An MCPServer over Streamable HTTP with sessions and SSE answers on 127.0.0.1:PORT/mcp, whose
messages about a call travel on that call's own stream (the SDK relates them to the request).
Tools: `log_steps()` logs one message at debug, info and warning, then answers "done".
"""

import sys
import warnings

from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")  # logging is deprecated by SEP-2577; 2025 revisions still have it

server = MCPServer("py-upstream-relays")


@server.tool()
async def log_steps(ctx: Context) -> str:
    """Logs one message at debug, info and warning."""
    await ctx.debug("step at debug")
    await ctx.info("step at info")
    await ctx.warning("step at warning")
    return "done"


server.run(
    transport="streamable-http",
    host="127.0.0.1",
    port=int(sys.argv[1]),
    stateless_http=False,
    json_response=False,
)
