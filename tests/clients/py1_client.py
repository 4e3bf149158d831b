"""Drives an MCP server (the gateway) over Streamable HTTP with the official Python SDK `mcp` 1.x.

Run with .peers/py1/bin/python (mcp 1.30.0, installed by tests/setup-peers.sh):

    py1_client.py URL API_KEY MODE STEPS_JSON

Same interface and output as py2_client.py (see there), except MODE, which is accepted and ignored: mcp 1.x
always uses the `initialize` handshake (2025-11-25). Uses the 1.x API as 1.x-era clients do:
`streamablehttp_client(url, headers=...)` + `ClientSession` + `session.initialize()`.

1.x differences tests should expect: any HTTP 4xx on a request (even with a JSON-RPC error body) raises
httpx.HTTPStatusError inside the transport and ends the session: connect_error "HTTPStatusError: ..." with
connect_error_code null, or mid-run "aborted" with later steps {"not_run": ...}. Like 2.x, it lists tools on its
own before validating a call's structuredContent against the outputSchema.
"""

import json
import logging
import os
import sys
import warnings
from datetime import timedelta

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError

TIMEOUT = float(os.environ.get("PY_CLIENT_TIMEOUT", "30"))
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def usage(msg):
    print(f"py1_client.py: {msg}\nusage: py1_client.py URL API_KEY auto|legacy STEPS_JSON", file=sys.stderr)
    sys.exit(2)


def leaf(exc):
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc):
    exc = leaf(exc)
    if isinstance(exc, McpError):
        err = {"code": exc.error.code, "message": exc.error.message}
        if exc.error.data is not None:
            err["data"] = exc.error.data
        return {"error": err}
    return {"exception": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def list_tools(session):
    tools, cursor = [], None
    while True:
        page = await session.list_tools(cursor=cursor)
        tools += [{k: v for k, v in dump(t).items() if k in TOOL_FIELDS} for t in page.tools]
        cursor = page.nextCursor
        if cursor is None:
            return {"tools": tools}


async def call_tool(session, name, arguments):
    r = dump(await session.call_tool(name, arguments))
    blocks = r.get("content", [])
    return {
        "is_error": bool(r.get("isError")),
        "content": [b["text"] for b in blocks if b.get("type") == "text"],
        "content_blocks": blocks,
        "structured_content": r.get("structuredContent"),
        "meta": r.get("_meta"),
    }


async def run_step(session, step):
    try:
        with anyio.fail_after(TIMEOUT):
            if step["op"] == "list":
                return await list_tools(session)
            return await call_tool(session, step["name"], step.get("arguments"))
    except Exception as exc:  # recorded, the next step still runs
        return describe(exc)


async def main(url, api_key, steps):
    headers = {} if api_key == "-" else {"Authorization": f"Bearer {api_key}"}
    out = {"protocol_version": None, "results": []}
    connected = False
    statuses = []

    async def on_response(response):
        statuses.append(response.status_code)

    def client_factory(headers=None, timeout=None, auth=None):
        # The SDK's own factory, plus a hook that logs response statuses for connect errors.
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks["response"].append(on_response)
        return client

    try:
        async with streamablehttp_client(url, headers=headers, httpx_client_factory=client_factory) as (r, w, _):
            async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=TIMEOUT)) as session:
                with anyio.fail_after(TIMEOUT):
                    init = await session.initialize()
                connected = True
                out["protocol_version"] = init.protocolVersion
                for step in steps:
                    out["results"].append(await run_step(session, step))
    except Exception as exc:
        if not connected:
            err = describe(exc)
            detail = err.get("error") or err["exception"]
            msg = detail["message"] if "error" in err else f"{detail['type']}: {detail['message']}"
            return {
                "connect_error": msg,
                "connect_error_code": detail.get("code"),
                "http_status": statuses[-1] if statuses else None,
            }
        if len(out["results"]) < len(steps):
            # The connection broke down (e.g. mcp 1.x aborts the session on an HTTP 4xx to a request): the
            # step in flight gets the error, later steps are marked not run, so results[i] stays steps[i].
            out["aborted"] = describe(exc)
            out["results"].append(out["aborted"])
            out["results"] += [{"not_run": "connection aborted"}] * (len(steps) - len(out["results"]))
        # An error while closing (e.g. the session DELETE) after all steps ran is not the test's concern.
    return out


if __name__ == "__main__":
    if len(sys.argv) != 5:
        usage("expected 4 arguments")
    url, api_key, mode, steps_json = sys.argv[1:]
    if mode not in ("auto", "legacy"):
        usage(f"MODE must be auto or legacy, got {mode!r}")
    try:
        steps = json.loads(steps_json)
    except ValueError as e:
        usage(f"STEPS_JSON is not JSON: {e}")
    if not isinstance(steps, list):
        usage("STEPS_JSON must be a JSON array")
    for s in steps:
        if not (isinstance(s, dict) and (s.get("op") == "list" or (s.get("op") == "call" and isinstance(s.get("name"), str)))):
            usage(f"bad step {s!r}: want {{\"op\":\"list\"}} or {{\"op\":\"call\",\"name\":...,\"arguments\":{{...}}}}")
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    warnings.simplefilter("ignore")  # streamablehttp_client is deprecated in 1.30 in favour of streamable_http_client
    print(json.dumps(anyio.run(main, url, api_key, steps)), flush=True)
