"""OTLP/HTTP trace sink for narrowgate's telemetry tests (tests/telemetry.rs).

The collector under test (rotel) forwards what it receives here; the tests read it back.

    python otlp_sink.py            # prints "listening on http://127.0.0.1:PORT", then serves

- POST /v1/traces: an ExportTraceServiceRequest as protobuf (or OTLP/JSON), optionally gzipped,
  decoded with the official opentelemetry-proto classes. Other signals are accepted and dropped.
- GET /spans: every span received so far, as a JSON array of flat records:
  {resource, scope, name, kind, trace_id, span_id, parent_span_id, attributes, status, links,
   events: [{name, attributes}]}
  with ids in lowercase hex and attribute values as plain JSON values.
- DELETE /spans: forget them.

Needs only the standard library and opentelemetry-proto (with protobuf).
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

SPANS = []
LOCK = threading.Lock()


def value_of(any_value):
    """An AnyValue as a plain JSON value."""
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(any_value.kvlist_value.values)
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind)


def attributes_of(key_values):
    return {kv.key: value_of(kv.value) for kv in key_values}


def hex_ids_to_base64(doc):
    """OTLP/JSON writes ids in hex; the protobuf JSON mapping expects base64."""
    import base64

    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for item in [span] + span.get("links", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if item.get(key):
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    return doc


def records_of(request):
    for rs in request.resource_spans:
        resource = attributes_of(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield {
                    "resource": resource,
                    "scope": ss.scope.name,
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind),
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "attributes": attributes_of(span.attributes),
                    "status": {
                        "code": Status.StatusCode.Name(span.status.code),
                        "message": span.status.message,
                    },
                    "links": [
                        {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                        for link in span.links
                    ],
                    "events": [
                        {"name": event.name, "attributes": attributes_of(event.attributes)}
                        for event in span.events
                    ],
                }


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", content_type="application/json"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        is_json = "json" in self.headers.get("content-type", "")
        if self.path != "/v1/traces":
            return self.reply(200, b"{}" if is_json else b"", self.headers.get("content-type", ""))
        request = ExportTraceServiceRequest()
        try:
            if is_json:
                Parse(json.dumps(hex_ids_to_base64(json.loads(body))), request)
            else:
                request.ParseFromString(body)
        except Exception as e:  # a malformed export is the sender's bug: say so
            return self.reply(400, str(e).encode(), "text/plain")
        with LOCK:
            SPANS.extend(records_of(request))
        if is_json:
            self.reply(200, b"{}")
        else:
            self.reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        if self.path != "/spans":
            return self.reply(404)
        with LOCK:
            data = json.dumps(SPANS).encode()
        self.reply(200, data)

    def do_DELETE(self):
        with LOCK:
            SPANS.clear()
        self.reply(204)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
