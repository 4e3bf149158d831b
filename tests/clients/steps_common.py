"""The step runner shared by the Python SDK drivers py1_client.py (`mcp` 1.x) and py2_client.py (`mcp` 2.x):
their command line, steps, output and error handling. Each driver supplies only what differs between the SDK
versions (see `Sdk`) and calls `main`.

    pyN_client.py URL API_KEY MODE STEPS_JSON

URL         the MCP endpoint, e.g. http://127.0.0.1:PORT/mcp, or `stdio:` + JSON {"command", "args", "env"} to
            start a stdio server (its environment: PATH, HOME and `env`, as the gateway gives its stdio
            upstreams), so that one client's answers can be compared directly and through the gateway
API_KEY     sent as `Authorization: Bearer API_KEY`; `-` sends no Authorization header
MODE        `auto` or `legacy`: the handshake, for SDKs that have a choice (see each driver)
STEPS_JSON  a JSON array of steps:
            {"op": "list"}                                   -> {"tools": [{name, title, description,
                                                                  inputSchema, outputSchema, annotations,
                                                                  _meta}]}
            {"op": "resources"}                              -> {"resources": [...]} (every page)
            {"op": "read", "uri": "..."}                     -> {"contents": [...]}
            {"op": "call", "name": "...", "arguments": {...}} -> {"is_error", "content": [text...],
                                                                  "content_blocks": [...], "structured_content",
                                                                  "meta"}
            {"op": "list_resources"} | {"op": "list_templates"} | {"op": "list_prompts"}
                                                             -> the SDK's list result (all pages' items
                                                                under "items", the first page as "page")
            {"op": "read_resource", "uri": "..."}            -> {"result": the SDK's ReadResourceResult}
            {"op": "get_prompt", "name": "...", "arguments": {...}} -> {"result": its GetPromptResult}
            {"op": "complete", "ref": {"type": "ref/prompt", "name": ...} | {"type": "ref/resource",
             "uri": ...}, "argument": {"name", "value"}}  -> {"result": its CompleteResult}
            Each result is the SDK's own parsed model (so what it refuses to parse is an exception), dumped
            with the wire's field names.
            A step whose request the SDK rejects with a JSON-RPC error records {"error": {"code", "message"[, "data"]}};
            any other exception (e.g. the SDK's own output-schema check) records {"exception": {"type", "message"}}.

Prints one JSON object on stdout and exits 0:
    {"protocol_version": "<negotiated>", "results": [...]}   results[i] always belongs to steps[i]; if the
        connection breaks down mid-run, "aborted" is added, the step in flight records that error and later
        steps record {"not_run": "connection aborted"}
    {"connect_error": "<message>", "connect_error_code": <JSON-RPC code or null>, "http_status": <last HTTP
        status or null>}   when connecting fails.
Exits 2 on bad arguments. Per-step timeout: $PY_CLIENT_TIMEOUT seconds (default 30).
"""

import inspect
import json
import logging
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, AsyncContextManager, Awaitable, Callable

import anyio

TIMEOUT = float(os.environ.get("PY_CLIENT_TIMEOUT", "30"))
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta")


@dataclass
class Sdk:
    """What differs between the SDK versions a driver runs on."""

    # connect(url, headers, mode, on_response): an async context manager yielding (session, protocol version)
    # once the handshake is done; `on_response(response)` must be awaited for every HTTP response.
    connect: Callable[..., AsyncContextManager]
    # list_page(session, cursor): one page of tools/list, as (tools, next cursor or None).
    list_page: Callable[[Any, Any], Awaitable[tuple]]
    # json_rpc_error(exc): (code, message, data) when `exc` is the SDK's JSON-RPC error, else None.
    json_rpc_error: Callable[[BaseException], Any]
    # resources_page(session, cursor): one page of resources/list, as (resources, next cursor or None).
    resources_page: Callable[[Any, Any], Awaitable[tuple]] = None
    # read_resource(session, uri): the resources/read result.
    read_resource: Callable[[Any, str], Awaitable[Any]] = None


def leaf(exc):
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(sdk, exc):
    exc = leaf(exc)
    rpc = sdk.json_rpc_error(exc)
    if rpc is not None:
        code, message, data = rpc
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        return {"error": err}
    return {"exception": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def list_tools(sdk, session):
    tools, cursor = [], None
    while True:
        page, cursor = await sdk.list_page(session, cursor)
        tools += [{k: v for k, v in dump(t).items() if k in TOOL_FIELDS} for t in page]
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


async def fresh(method, **kwargs):
    """`method` called so that it reaches the wire: SDKs that cache list results (2.x) are told to refresh."""
    if "cache_mode" in inspect.signature(method).parameters:
        kwargs["cache_mode"] = "refresh"
    return await method(**kwargs)


LISTS = {
    "list_resources": ("list_resources", "resources"),
    "list_templates": ("list_resource_templates", "resourceTemplates"),
    "list_prompts": ("list_prompts", "prompts"),
}


async def list_all(session, op):
    name, key = LISTS[op]
    method = getattr(session, name)
    items, cursor, first = [], None, None
    while True:
        page = dump(await fresh(method, cursor=cursor))
        first = first or page
        items += page.get(key, [])
        cursor = page.get("nextCursor")
        if cursor is None:
            return {"items": items, "page": first}


async def other_step(session, step):
    import mcp.types as types

    op = step["op"]
    if op in LISTS:
        return await list_all(session, op)
    if op == "read_resource":
        return {"result": dump(await session.read_resource(step["uri"]))}
    if op == "get_prompt":
        return {"result": dump(await session.get_prompt(step["name"], step.get("arguments")))}
    ref = step["ref"]
    ref = types.PromptReference(**ref) if ref["type"] == "ref/prompt" else types.ResourceTemplateReference(**ref)
    return {"result": dump(await session.complete(ref=ref, argument=step["argument"]))}


async def list_resources(sdk, session):
    resources, cursor = [], None
    while True:
        page, cursor = await sdk.resources_page(session, cursor)
        resources += [dump(r) for r in page]
        if cursor is None:
            return {"resources": resources}


async def run_step(sdk, session, step):
    try:
        with anyio.fail_after(TIMEOUT):
            if step["op"] == "list":
                return await list_tools(sdk, session)
            if step["op"] == "resources":
                return await list_resources(sdk, session)
            if step["op"] == "read":
                return {"contents": [dump(c) for c in (await sdk.read_resource(session, step["uri"])).contents]}
            if step["op"] != "call":
                return await other_step(session, step)
            return await call_tool(session, step["name"], step.get("arguments"))
    except Exception as exc:  # recorded, the next step still runs
        return describe(sdk, exc)


async def run(sdk, url, api_key, mode, steps):
    headers = {} if api_key == "-" else {"Authorization": f"Bearer {api_key}"}
    out = {"protocol_version": None, "results": []}
    connected = False
    statuses = []

    async def on_response(response):
        statuses.append(response.status_code)

    try:
        async with sdk.connect(url, headers, mode, on_response) as (session, protocol_version):
            connected = True
            out["protocol_version"] = protocol_version
            for step in steps:
                out["results"].append(await run_step(sdk, session, step))
    except Exception as exc:
        if not connected:
            err = describe(sdk, exc)
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
            out["aborted"] = describe(sdk, exc)
            out["results"].append(out["aborted"])
            out["results"] += [{"not_run": "connection aborted"}] * (len(steps) - len(out["results"]))
        # An error while closing (e.g. the session DELETE) after all steps ran is not the test's concern.
    return out


def stdio_server(url):
    """The (command, args, env) of a `stdio:` URL, else None. The environment is PATH, HOME and `env`."""
    if not url.startswith("stdio:"):
        return None
    spec = json.loads(url[len("stdio:"):])
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    env.update(spec.get("env") or {})
    return spec["command"], spec.get("args") or [], env


def main(script, sdk):
    """Runs the driver `script` (its file name, for messages) on `sdk` with the command line's arguments."""

    def usage(msg):
        print(f"{script}: {msg}\nusage: {script} URL API_KEY auto|legacy STEPS_JSON", file=sys.stderr)
        sys.exit(2)

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
        ops = ("list", "resources", "list_resources", "list_templates", "list_prompts", "read_resource", "get_prompt", "complete")
        named = isinstance(s, dict) and s.get("op") == "call" and isinstance(s.get("name"), str)
        read = isinstance(s, dict) and s.get("op") == "read" and isinstance(s.get("uri"), str)
        if not (named or read or (isinstance(s, dict) and s.get("op") in ops)):
            usage(f"bad step {s!r}: want {{\"op\":\"list\"}}, {{\"op\":\"call\",\"name\":...}}, {{\"op\":\"read\",\"uri\":...}} or an op of {ops}")
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    # SDK deprecation notices (e.g. streamablehttp_client in mcp 1.30) would only clutter the test's stderr.
    warnings.simplefilter("ignore")
    print(json.dumps(anyio.run(run, sdk, url, api_key, mode, steps)), flush=True)
