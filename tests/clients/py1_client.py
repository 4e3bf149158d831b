"""Drives an MCP server (the gateway) over Streamable HTTP with the official Python SDK `mcp` 1.x.

Run with .peers/py1/bin/python (mcp 1.30.0, installed by tests/setup-peers.sh):

    py1_client.py URL API_KEY MODE STEPS_JSON

Same interface and output as py2_client.py (both run steps_common.py, which describes them), except MODE,
which is accepted and ignored: mcp 1.x always uses the `initialize` handshake (2025-11-25). Uses the 1.x API
as 1.x-era clients do: `streamablehttp_client(url, headers=...)` + `ClientSession` + `session.initialize()`.

1.x differences tests should expect: any HTTP 4xx on a request (even with a JSON-RPC error body) raises
httpx.HTTPStatusError inside the transport and ends the session: connect_error "HTTPStatusError: ..." with
connect_error_code null, or mid-run "aborted" with later steps {"not_run": ...}. Like 2.x, it lists tools on its
own before validating a call's structuredContent against the outputSchema.
"""

import os
import sys
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steps_common  # noqa: E402  (found next to this script)
from steps_common import TIMEOUT, Sdk  # noqa: E402


@asynccontextmanager
async def connect(url, headers, mode, on_response):
    stdio = steps_common.stdio_server(url)
    if stdio is not None:
        command, args, env = stdio
        async with stdio_client(StdioServerParameters(command=command, args=args, env=env)) as (r, w):
            async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=TIMEOUT)) as session:
                with anyio.fail_after(TIMEOUT):
                    init = await session.initialize()
                yield session, init.protocolVersion
        return

    def client_factory(headers=None, timeout=None, auth=None):
        # The SDK's own factory, plus a hook that logs response statuses for connect errors.
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks["response"].append(on_response)
        return client

    async with streamablehttp_client(url, headers=headers, httpx_client_factory=client_factory) as (r, w, _):
        async with ClientSession(r, w, read_timeout_seconds=timedelta(seconds=TIMEOUT)) as session:
            with anyio.fail_after(TIMEOUT):
                init = await session.initialize()
            yield session, init.protocolVersion


async def list_page(session, cursor):
    page = await session.list_tools(cursor=cursor)
    return page.tools, page.nextCursor


async def resources_page(session, cursor):
    page = await session.list_resources(cursor=cursor)
    return page.resources, page.nextCursor


async def read_resource(session, uri):
    return await session.read_resource(AnyUrl(uri))


def json_rpc_error(exc):
    if isinstance(exc, McpError):
        return exc.error.code, exc.error.message, exc.error.data
    return None


if __name__ == "__main__":
    steps_common.main(
        "py1_client.py",
        Sdk(
            connect=connect,
            list_page=list_page,
            json_rpc_error=json_rpc_error,
            resources_page=resources_page,
            read_resource=read_resource,
        ),
    )
