"""Calls one tool through the gateway with the official Python SDK `mcp` 2.x, answering the gateway's
elicitation request (an `approval: user` tool) with ANSWER.

Run with .peers/py2/bin/python (mcp 2.3.0, installed by tests/setup-peers.sh):

    py2_approval_client.py URL API_KEY ANSWER TOOL ARGUMENTS_JSON [MODE]

ANSWER   `accept` (action accept, content {"approve": true}), `decline`, `cancel`, or `none` (the client
         declares no elicitation capability)
MODE     `legacy` (the default: the `initialize` handshake, 2025-11-25; the elicitation request comes on the
         call's own stream) or `auto` (the SDK's default: 2026-07-28 where the server offers it; the question
         comes as an InputRequiredResult, which the SDK answers through the same callback and sends again)

Prints one JSON object: {"elicitations": [{"message", "requested_schema"}...], "is_error", "content": [text...],
"structured_content"}, or {"exception": {"type", "message"}}.
"""

import json
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url, key, answer, tool, arguments, mode):
    asked = []

    async def on_elicit(context, params):
        asked.append(
            {
                "message": params.message,
                "requested_schema": params.requested_schema.model_dump(mode="json", by_alias=True, exclude_none=True)
                if hasattr(params.requested_schema, "model_dump")
                else params.requested_schema,
            }
        )
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action=answer)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=60))
    out = {}
    async with http:
        transport = streamable_http_client(url, http_client=http)
        callback = None if answer == "none" else on_elicit
        try:
            async with Client(transport, mode=mode, read_timeout_seconds=30, elicitation_callback=callback) as c:
                result = await c.call_tool(tool, arguments)
                out = {
                    "protocol_version": c.protocol_version,
                    "is_error": bool(result.is_error),
                    "content": [b.text for b in result.content if getattr(b, "type", None) == "text"],
                    "structured_content": result.structured_content,
                }
        except BaseException as exc:  # noqa: BLE001  (reported, not hidden)
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                exc = exc.exceptions[0]
            out = {"exception": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}
    out["elicitations"] = asked
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode = sys.argv[6] if len(sys.argv) == 7 else "legacy"
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5]), mode)
