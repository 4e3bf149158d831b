"""Drives an MCP server (the gateway) over Streamable HTTP with the official Python SDK `mcp` 2.x.

Run with .peers/py2/bin/python (mcp 2.3.0, installed by tests/setup-peers.sh):

    py2_client.py URL API_KEY MODE STEPS_JSON

URL         the MCP endpoint, e.g. http://127.0.0.1:PORT/mcp
API_KEY     sent as `Authorization: Bearer API_KEY`; `-` sends no Authorization header
MODE        `auto`   = the SDK default: probe 2026-07-28 `server/discover`, fall back to `initialize`
            `legacy` = the `initialize` handshake (2025-11-25) only
STEPS_JSON  a JSON array of steps:
            {"op": "list"}                                   -> {"tools": [{name, title, description,
                                                                  inputSchema, outputSchema, annotations}]}
            {"op": "call", "name": "...", "arguments": {...}} -> {"is_error", "content": [text...],
                                                                  "content_blocks": [...], "structured_content",
                                                                  "meta"}
            A step whose request the SDK rejects with a JSON-RPC error records {"error": {"code", "message"[, "data"]}};
            any other exception (e.g. the SDK's own output-schema check) records {"exception": {"type", "message"}}.

Prints one JSON object on stdout and exits 0:
    {"protocol_version": "<negotiated>", "results": [...]}   results[i] always belongs to steps[i]; if the
        connection breaks down mid-run, "aborted" is added, the step in flight records that error and later
        steps record {"not_run": "connection aborted"}
    {"connect_error": "<message>", "connect_error_code": <JSON-RPC code or null>, "http_status": <last HTTP
        status or null>}   when connecting fails. The SDK maps an HTTP 4xx without a JSON-RPC error body to
        -32603 "Server returned an error response" (-32601 "Not Found" for a 404 before a session exists).
Exits 2 on bad arguments. Per-step timeout: $PY_CLIENT_TIMEOUT seconds (default 30).

SDK behaviour tests should expect: a successful call of a tool this session has not listed yet makes the SDK send
its own tools/list first (to learn the outputSchema), and structuredContent that fails that schema becomes
{"exception": {"type": "RuntimeError", ...}}.
"""

import json
import logging
import os
import sys
import warnings

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

TIMEOUT = float(os.environ.get("PY_CLIENT_TIMEOUT", "30"))
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def usage(msg):
    print(f"py2_client.py: {msg}\nusage: py2_client.py URL API_KEY auto|legacy STEPS_JSON", file=sys.stderr)
    sys.exit(2)


def leaf(exc):
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc):
    exc = leaf(exc)
    if isinstance(exc, MCPError):
        err = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return {"error": err}
    return {"exception": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def list_tools(client):
    tools, cursor = [], None
    while True:
        # cache_mode="refresh": every list step reaches the wire (the SDK caches tools/list by default).
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        tools += [{k: v for k, v in dump(t).items() if k in TOOL_FIELDS} for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return {"tools": tools}


async def call_tool(client, name, arguments):
    r = dump(await client.call_tool(name, arguments))
    blocks = r.get("content", [])
    return {
        "is_error": bool(r.get("isError")),
        "content": [b["text"] for b in blocks if b.get("type") == "text"],
        "content_blocks": blocks,
        "structured_content": r.get("structuredContent"),
        "meta": r.get("_meta"),
    }


async def run_step(client, step):
    try:
        with anyio.fail_after(TIMEOUT):
            if step["op"] == "list":
                return await list_tools(client)
            return await call_tool(client, step["name"], step.get("arguments"))
    except Exception as exc:  # recorded, the next step still runs
        return describe(exc)


async def main(url, api_key, mode, steps):
    headers = {} if api_key == "-" else {"Authorization": f"Bearer {api_key}"}
    out = {"protocol_version": None, "results": []}
    connected = False
    statuses = []

    async def on_response(response):
        statuses.append(response.status_code)

    # The SDK's own default timeouts (30 s, 300 s read for SSE streams), plus our headers and a status log.
    http = httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [on_response]}
    )
    try:
        async with http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode, read_timeout_seconds=TIMEOUT) as client:
                connected = True
                out["protocol_version"] = client.protocol_version
                for step in steps:
                    out["results"].append(await run_step(client, step))
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
    warnings.simplefilter("ignore")  # SDK deprecation notices would only clutter the test's stderr
    print(json.dumps(anyio.run(main, url, api_key, mode, steps)), flush=True)
