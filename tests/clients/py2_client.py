"""Drives an MCP server (the gateway) over Streamable HTTP with the official Python SDK `mcp` 2.x.

Run with .peers/py2/bin/python (mcp 2.3.0, installed by tests/setup-peers.sh):

    py2_client.py URL API_KEY MODE STEPS_JSON

Interface and output: see steps_common.py. MODE is the handshake:
            `auto`   = the SDK default: probe 2026-07-28 `server/discover`, fall back to `initialize`
            `legacy` = the `initialize` handshake (2025-11-25) only
When connecting fails, the SDK maps an HTTP 4xx without a JSON-RPC error body to connect_error_code -32603
"Server returned an error response" (-32601 "Not Found" for a 404 before a session exists).

SDK behaviour tests should expect: a successful call of a tool this session has not listed yet makes the SDK send
its own tools/list first (to learn the outputSchema), and structuredContent that fails that schema becomes
{"exception": {"type": "RuntimeError", ...}}.
"""

import os
import sys
from contextlib import asynccontextmanager

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steps_common  # noqa: E402  (found next to this script)
from steps_common import TIMEOUT, Sdk  # noqa: E402


@asynccontextmanager
async def connect(url, headers, mode, on_response):
    stdio = steps_common.stdio_server(url)
    if stdio is not None:
        command, args, env = stdio
        params = StdioServerParameters(command=command, args=args, env=env)
        async with Client(params, mode=mode, read_timeout_seconds=TIMEOUT) as client:
            yield client, client.protocol_version
        return
    # The SDK's own default timeouts (30 s, 300 s read for SSE streams), plus our headers and a status log.
    http = httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [on_response]}
    )
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=TIMEOUT) as client:
            yield client, client.protocol_version


async def list_page(client, cursor):
    # cache_mode="refresh": every list step reaches the wire (the SDK caches tools/list by default).
    page = await client.list_tools(cursor=cursor, cache_mode="refresh")
    return page.tools, page.next_cursor


async def resources_page(client, cursor):
    page = await client.list_resources(cursor=cursor, cache_mode="refresh")
    return page.resources, page.next_cursor


async def read_resource(client, uri):
    return await client.read_resource(uri)


def json_rpc_error(exc):
    if isinstance(exc, MCPError):
        return exc.code, exc.message, exc.data
    return None


if __name__ == "__main__":
    steps_common.main(
        "py2_client.py",
        Sdk(
            connect=connect,
            list_page=list_page,
            json_rpc_error=json_rpc_error,
            resources_page=resources_page,
            read_resource=read_resource,
        ),
    )
