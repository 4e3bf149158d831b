//! Progress and cancellation through the gateway, over every kind of upstream connection: the
//! forwarder for Streamable HTTP, to an upstream spoken to in 2026-07-28 (stateless calls,
//! cancelled by closing the answer stream) and to one on a 2025-11-25 session (`--legacy`:
//! `notifications/cancelled`), and rmcp's client for stdio.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Gateway, KEY, POLL_EVERY, Raw, callers, retry_until};
use crate::relays::over::{Over, Upstreams};

const TOOLS: &str = "  test_tool_with_progress:\n    privilege: read\n    input: { type: object }\n  slow:\n    privilege: write\n    timeout: 60s\n    input: { type: object, properties: { ms: { type: integer } }, required: [ms] }\n  peek_counter:\n    privilege: read\n    input: { type: object }\n";

/// The gateway in front of the demo upstream reached `over` this way.
fn gateway(over: Over<'_>) -> Gateway {
    let config = over.config(&callers(&[]));
    let contract = format!("upstream: demo\ntools:\n{TOOLS}");
    let gateway = Gateway::start(&config, &[("demo.yaml", &contract)]);
    gateway.wait_tools_joined("demo", &["slow"]);
    over.assert_spoken(&gateway);
    gateway
}

/// Every JSON-RPC message of an SSE (or JSON) answer, in order.
fn messages(body: &str) -> Vec<Value> {
    if let Ok(one) = serde_json::from_str::<Value>(body) {
        return vec![one];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .collect()
}

/// Proves: a client's `progressToken` is carried upstream as a token of the gateway's own, and
/// the upstream's `notifications/progress` come back to the client with the client's token, all
/// three, before the answer; over HTTP (forwarder) and stdio (rmcp). Fails without the relay (no
/// progress notification reached the client).
#[tokio::test]
async fn progress_comes_back_with_the_clients_token() {
    let upstreams = Upstreams::start();
    for over in upstreams.every() {
        let gateway = gateway(over);
        let raw = Raw::new(&gateway.url);
        let session = raw.open_session(Some(KEY), "2025-11-25").await;
        let params = json!({"name": "test_tool_with_progress", "arguments": {},
            "_meta": {"progressToken": "client-token-1"}});
        let reply = raw
            .request(Some(KEY), &session, "2025-11-25", "tools/call", params)
            .await;
        let all = messages(&reply.body);
        let progress: Vec<&Value> = all
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        // Over HTTP the forwarder reads progress and answer from one stream, in order: all
        // three arrive. Over stdio rmcp's client hands each notification to a task of its own,
        // so the last one, sent just before the answer, may lose the race to it (and is then
        // dropped: no progress after the answer).
        let stdio = over.is_stdio();
        let over = over.name();
        if stdio {
            assert!(progress.len() >= 2, "{over}: {all:?}");
        } else {
            assert_eq!(progress.len(), 3, "{over}: {all:?}");
            assert_eq!(progress[2]["params"]["progress"].as_f64(), Some(100.0));
        }
        for p in &progress {
            assert_eq!(
                p["params"]["progressToken"],
                json!("client-token-1"),
                "{over}: {p}"
            );
        }
        let last = all.last().cloned().unwrap_or_default();
        assert!(
            last["result"]["content"].is_array(),
            "{over}: the answer comes last: {all:?}"
        );
    }
}

/// Proves: a client's `notifications/cancelled` for its call reaches the upstream, which counts
/// the `slow` call as cancelled; over HTTP and stdio. Fails without the relay's cancellation (the
/// upstream ran on, and counted no cancellation).
#[tokio::test]
async fn a_cancelled_call_is_cancelled_upstream() {
    let upstreams = Upstreams::start();
    for over in upstreams.every() {
        let gateway = gateway(over);
        let raw = Raw::new(&gateway.url);
        let session = raw.open_session(Some(KEY), "2025-11-25").await;
        let cancelled_before = peek(&raw, &session).await["cancelled"]
            .as_u64()
            .unwrap_or(0);
        let call = {
            let (raw, session) = (Raw::new(&gateway.url), session.clone());
            tokio::spawn(async move {
                let params = json!({"name": "slow", "arguments": {"ms": 30000},
                    "_meta": {"progressToken": 9}});
                raw.request(Some(KEY), &session, "2025-11-25", "tools/call", params)
                    .await
            })
        };
        retry_until(
            &gateway,
            Duration::from_secs(20),
            POLL_EVERY,
            "the slow call runs",
            async || {
                let seen = peek(&raw, &session).await;
                (seen["running"].as_u64() == Some(1))
                    .then_some(())
                    .ok_or(seen.to_string())
            },
        )
        .await;
        let auth = format!("Bearer {KEY}");
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "test"}});
        let ack = raw
            .post(
                &[
                    ("authorization", &auth),
                    ("mcp-session-id", &session),
                    ("mcp-protocol-version", "2025-11-25"),
                ],
                &cancel.to_string(),
            )
            .await;
        assert_eq!(ack.status, 202, "{ack:?}");
        retry_until(
            &gateway,
            Duration::from_secs(20),
            POLL_EVERY,
            "the upstream saw the cancellation",
            async || {
                let seen = peek(&raw, &session).await;
                (seen["cancelled"].as_u64() == Some(cancelled_before + 1))
                    .then_some(())
                    .ok_or(seen.to_string())
            },
        )
        .await;
        call.abort();
    }
}

/// The demo upstream's counters (`peek_counter`), through the gateway in `session`.
async fn peek(raw: &Raw, session: &str) -> Value {
    // Not `Raw::request`'s id 7: a slow call under way may hold it, and a session refuses a
    // request id already in flight.
    let auth = format!("Bearer {KEY}");
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "peek_counter", "arguments": {}}});
    let reply = raw
        .post(
            &[
                ("authorization", &auth),
                ("mcp-session-id", session),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            &body.to_string(),
        )
        .await;
    reply.message()["result"]["structuredContent"].clone()
}
