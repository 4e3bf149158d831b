"""Calls tools through an MCP server (the gateway) with the official Python SDK `mcp` 2.x, as a client
that answers the upstream's requests (sampling, elicitation, roots) or declares none of them.

Run with .peers/py2/bin/python (mcp 2.3.0, installed by tests/setup-peers.sh):

    py2_asks_client.py URL API_KEY CAPABILITIES CALLS_JSON [MODE]

URL is the MCP endpoint, or `stdio:` + JSON {"command", "args", "env"} to launch a stdio server (a
`narrowgate stdio` gateway, as a desktop client does; API_KEY is then unused: pass the key in `env`).

CAPABILITIES is `all` (a sampling_callback, an elicitation_callback and a list_roots_callback, which the
SDK then declares) or `none`. CALLS_JSON is a list of [tool, arguments]. MODE is the SDK's: `legacy` (the
default: `initialize` at 2025-11-25, a session on which the gateway relays the upstream's requests as
requests) or `auto` (stateless 2026-07-28 against the gateway: the requests come back as
`InputRequiredResult`s, which the SDK answers through the same callbacks and sends the call again).

The elicitation callback approves the gateway's own approval question (a schema with `approve`) with
{"approve": true}; otherwise it accepts with {"username": "ada", "email": "ada@example.com"}, unless the request's
message is "answer outside the schema": then it accepts with {"username": 5} (no email, a number for a
string). Prints one JSON object: {"results": [{"tool", "is_error", "text"}...], "called": {"sampling": N,
"elicitation": N, "roots": N}, "sampling_prompts": [...], "elicitation_messages": [...]}.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steps_common  # noqa: E402  (found next to this script)

TIMEOUT = float(os.environ.get("PY_CLIENT_TIMEOUT", "20"))

called = {"sampling": 0, "elicitation": 0, "roots": 0}
sampling_prompts = []
elicitation_messages = []


async def sampling_callback(context, params):
    called["sampling"] += 1
    first = params.messages[0].content if params.messages else None
    sampling_prompts.append(getattr(first, "text", None))
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="a sampled answer"), model="test-model"
    )


async def elicitation_callback(context, params):
    called["elicitation"] += 1
    elicitation_messages.append(params.message)
    schema = getattr(params, "requested_schema", None) or {}
    if "approve" in (schema.get("properties") or {}):
        # The gateway's own question for an `approval: user` tool: the user approves.
        return types.ElicitResult(action="accept", content={"approve": True})
    if params.message == "answer outside the schema":
        return types.ElicitResult(action="accept", content={"username": 5})
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


async def list_roots_callback(context):
    called["roots"] += 1
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])


async def main(url, key, capabilities, calls, mode):
    headers = {} if key == "-" else {"Authorization": f"Bearer {key}"}
    callbacks = {}
    if capabilities == "all":
        callbacks = dict(
            sampling_callback=sampling_callback,
            elicitation_callback=elicitation_callback,
            list_roots_callback=list_roots_callback,
        )
    results = []

    async def run(client):
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            results.append({"tool": tool, "is_error": bool(result.is_error), "text": text})

    stdio = steps_common.stdio_server(url)
    if stdio is not None:
        command, args, env = stdio
        params = StdioServerParameters(command=command, args=args, env=env)
        async with Client(params, mode=mode, read_timeout_seconds=TIMEOUT, **callbacks) as client:
            await run(client)
    else:
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
        async with http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode, read_timeout_seconds=TIMEOUT, **callbacks) as client:
                await run(client)
    print(
        json.dumps(
            {
                "results": results,
                "called": called,
                "sampling_prompts": sampling_prompts,
                "elicitation_messages": elicitation_messages,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6) or sys.argv[3] not in ("all", "none"):
        sys.exit("usage: py2_asks_client.py URL API_KEY all|none CALLS_JSON [legacy|auto]")
    mode = sys.argv[5] if len(sys.argv) == 6 else "legacy"
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), mode))
