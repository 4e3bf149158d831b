"""Mixed load on a fleet of gateways with the official Python SDK `mcp` 2.x (run with .peers/py2/bin/python):

    py2_fleet_client.py URL API_KEY PLAN_JSON

PLAN_JSON: {"sessions": N, "stateless": M, "seconds": S, "tool": "echo", "tag": "run1"}
  N workers each hold a legacy session (the `initialize` handshake) and call TOOL back to back; when a call
  fails (the replica holding the session died), the worker records the failure, opens a new session and goes on.
  M workers call TOOL over the stateless 2026-07-28 protocol (the SDK's `auto` mode), each call its own request;
  after a failed call they start a new client too.
  Every call's argument is a message unique in the run: "<tag>-<worker>-<generation>-<n>".

Prints JSON lines on stdout, flushed as they happen, so that the test can act mid-run:
  {"event": "session", "worker": "L3", "generation": 0, "session": "<Mcp-Session-Id>" or null, "protocol"}
      after each handshake (a stateless worker's "session" is null)
  {"event": "done", "calls": [{"worker", "generation", "message", "ok", "error"?, "t"}], "reconnects": {...}}
`ok` is true only when the answer is a result whose text is the message sent back. `t` is seconds since start.
"""

import json
import sys
import time

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def emit(obj):
    print(json.dumps(obj), flush=True)


def leaf(exc):
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


GRACE = 30.0  # seconds a failing worker may go on past the deadline


class Run:
    def __init__(self, url, key, plan):
        self.url = url
        self.headers = {"Authorization": f"Bearer {key}"}
        self.plan = plan
        self.start = time.monotonic()
        self.deadline = self.start + float(plan["seconds"])
        self.calls = []
        self.reconnects = {}

    def now(self):
        return round(time.monotonic() - self.start, 3)

    async def call(self, client, worker, generation, n):
        message = f"{self.plan['tag']}-{worker}-{generation}-{n}"
        record = {"worker": worker, "generation": generation, "message": message}
        try:
            result = await client.call_tool(self.plan["tool"], {"message": message})
            text = " ".join(getattr(block, "text", "") for block in result.content)
            record["ok"] = not result.is_error and message in text
            if not record["ok"]:
                record["error"] = f"unexpected result: {text[:200]}"
        except Exception as exc:  # the worker goes on; the record says what happened
            exc = leaf(exc)
            record["ok"] = False
            record["error"] = f"{type(exc).__name__}: {exc}"[:300]
        record["t"] = self.now()
        self.calls.append(record)
        return record["ok"]

    async def worker(self, worker, mode):
        """Calls back to back; after a failed call or handshake, a new client (and so, in `legacy` mode, a new
        session) and on."""
        generation = 0
        # A worker whose last call failed goes on past the deadline (for at most a grace period)
        # until one call in a new client works: on a busy machine the kill can come late in the run,
        # and "a failure, then calls that work" is what the test checks.
        failing = False
        while time.monotonic() < self.deadline or (failing and time.monotonic() < self.deadline + GRACE):
            session_id = {}

            async def on_response(response):
                sid = response.headers.get("mcp-session-id")
                if sid:
                    session_id.setdefault("id", sid)

            try:
                async with httpx2.AsyncClient(
                    headers=self.headers, timeout=httpx2.Timeout(20), event_hooks={"response": [on_response]}
                ) as http:
                    transport = streamable_http_client(self.url, http_client=http)
                    async with Client(transport, mode=mode, read_timeout_seconds=20) as client:
                        emit({"event": "session", "worker": worker, "generation": generation,
                              "session": session_id.get("id"), "protocol": client.protocol_version,
                              "t": self.now()})
                        n = 0
                        while time.monotonic() < self.deadline or (failing and n == 0):
                            if not await self.call(client, worker, generation, n):
                                failing = True
                                break
                            failing = False
                            n += 1
            except Exception as exc:  # a failed handshake or teardown: recorded, then a new client
                self.calls.append({"worker": worker, "generation": generation, "message": None, "ok": False,
                                   "error": f"client: {type(leaf(exc)).__name__}: {leaf(exc)}"[:300],
                                   "t": self.now()})
                failing = True
                await anyio.sleep(0.05)  # pacing: a fleet without this replica needs no reconnect storm
            generation += 1
            self.reconnects[worker] = generation - 1

    async def main(self):
        async with anyio.create_task_group() as tg:
            for i in range(int(self.plan["sessions"])):
                tg.start_soon(self.worker, f"L{i}", "legacy")
            for i in range(int(self.plan["stateless"])):
                tg.start_soon(self.worker, f"S{i}", "auto")
        emit({"event": "done", "calls": self.calls, "reconnects": self.reconnects})


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    run = Run(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
    anyio.run(run.main)
