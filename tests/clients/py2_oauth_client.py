"""Drives the gateway with the official Python SDK `mcp` 2.x acting as an OAuth client (its own
`OAuthClientProvider`, no token given): the first 401 makes the SDK read `resource_metadata` from the
challenge, fetch the protected-resource metadata, discover the authorization server it names, register,
authorize and retry; a later 403 `insufficient_scope` makes it step up (SEP-835, SEP-2350) and retry.

Run with .peers/py2/bin/python (mcp 2.3.0):

    py2_oauth_client.py URL

The user at the authorization endpoint is simulated: the redirect handler records what was asked, and
the callback answers with a code naming the scopes granted, only "profile" the first time and all that
was asked afterwards. The test's authorization server turns the code into a JWT with those scopes.

Prints one JSON object: {"authorizations": [{"scope": ...}, ...],
                         "tools": [names...], "call": {"is_error", "structured_content"} | {"exception"}}
"""

import json
import logging
import sys
import warnings
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata


class MemoryStorage:
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def main(url):
    asked = []

    async def redirect(authorization_url):
        query = parse_qs(urlparse(authorization_url).query)
        asked.append({"scope": query.get("scope", [None])[0], "state": query["state"][0]})

    async def callback():
        granted = "profile" if len(asked) == 1 else (asked[-1]["scope"] or "")
        return AuthorizationCodeResult(code=granted, state=asked[-1]["state"])

    async def any_resource(server_url, resource):
        # The gateway's resource is its public audience, not this loopback URL.
        return None

    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=["http://127.0.0.1:9/callback"],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            client_name="narrowgate-test",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect,
        callback_handler=callback,
        validate_resource_url=any_resource,
    )
    out = {}
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            page = await client.list_tools()
            out["tools"] = sorted(t.name for t in page.tools)
            try:
                result = await client.call_tool("get_weather", {"location": "Chicago"})
                out["call"] = {"is_error": bool(result.is_error), "structured_content": result.structured_content}
            except Exception as exc:  # recorded for the test to show
                out["call"] = {"exception": repr(exc)}
    out["authorizations"] = [{"scope": a["scope"]} for a in asked]
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: py2_oauth_client.py URL", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    warnings.simplefilter("ignore")
    print(json.dumps(anyio.run(main, sys.argv[1])), flush=True)
