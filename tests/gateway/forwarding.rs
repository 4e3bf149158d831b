//! `tools/call` to a Streamable HTTP upstream goes out on the session rmcp opened, sent by the
//! gateway's forwarder (src/upstream/forward.rs) rather than through rmcp's client. The demo
//! upstream's `whoami` shows what arrived: the JSON-RPC id (`narrowgate-N` from the forwarder,
//! a number from rmcp), the session and the headers.

use std::time::Duration;

use serde_json::{Value, json};

use super::common::{
    self, Gateway, HttpUpstream, KEY, call_answered, call_ok, client, structured_u64, text_of,
    upstream_counts,
};

const CONTRACT: &str = "upstream: demo\ntools:\n  whoami:\n    privilege: read\n  counter:\n    privilege: write\n    input: { type: object, additionalProperties: false }\n  peek_counter:\n    privilege: read\n  slow:\n    privilege: write\n    timeout: 300ms\n    input: { type: object, properties: { ms: { type: integer } }, required: [ms] }\n";

/// Starts a gateway in front of `upstream`, sending `X-Upstream-Credential: gateway-own`.
fn gateway_for(upstream: &HttpUpstream) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n    headers: {{ X-Upstream-Credential: gateway-own }}\n{}",
        upstream.url,
        common::callers(&[])
    );
    Gateway::start(&config, &[("demo.yaml", CONTRACT)])
}

/// What the upstream saw of one `whoami` call: its headers, and the JSON-RPC id under `:id`.
pub(super) async fn seen_by_upstream(
    alice: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
) -> Value {
    let result = call_ok(alice, "whoami", json!({})).await;
    serde_json::from_str(&text_of(&result)).expect("whoami answers JSON")
}

pub(super) fn field<'a>(seen: &'a Value, name: &str) -> &'a str {
    seen.get(name).and_then(Value::as_str).unwrap_or("")
}

/// Proves: on a session-mode upstream every call is sent by the forwarder (string ids), on one
/// session (the one rmcp opened), with the negotiated protocol version and the configured
/// headers; on a stateless upstream the same, without a session id. (Legacy upstreams: a
/// 2026-07-28 one has no session, `modern.rs`.)
#[tokio::test]
async fn calls_go_out_from_the_forwarder_on_the_upstream_session() {
    for (mode, args) in [
        ("session", &["--legacy"][..]),
        ("stateless", &["--stateless", "--legacy"][..]),
    ] {
        let upstream = HttpUpstream::start(args);
        let gw = gateway_for(&upstream);
        let alice = client(&gw.url, KEY).await;
        let mut sessions = Vec::new();
        for _ in 0..3 {
            let seen = seen_by_upstream(&alice).await;
            assert!(
                field(&seen, ":id").starts_with("narrowgate-"),
                "{mode}: not sent by the forwarder: {seen}"
            );
            assert_eq!(field(&seen, "mcp-protocol-version"), "2025-11-25", "{seen}");
            assert_eq!(
                field(&seen, "x-upstream-credential"),
                "gateway-own",
                "{seen}"
            );
            assert!(
                field(&seen, "accept").contains("text/event-stream"),
                "{seen}"
            );
            sessions.push(field(&seen, "mcp-session-id").to_string());
        }
        match mode {
            "session" => {
                assert!(!sessions[0].is_empty(), "no session id sent");
                assert!(sessions.iter().all(|s| *s == sessions[0]), "{sessions:?}");
            }
            _ => assert!(sessions.iter().all(String::is_empty), "{sessions:?}"),
        }
    }
}

/// Proves: when the upstream has closed the gateway's session (idle for longer than the
/// upstream keeps sessions), the next call is still answered, on a new session, and runs once
/// (the refused attempt did not run it); the forwarder then uses the new session.
#[tokio::test]
async fn an_expired_upstream_session_is_reopened_without_running_the_call_twice() {
    let upstream = HttpUpstream::start(&["--session-idle-ms", "300", "--legacy"]);
    let gw = gateway_for(&upstream);
    let alice = client(&gw.url, KEY).await;
    let first = seen_by_upstream(&alice).await;
    let old_session = field(&first, "mcp-session-id").to_string();
    assert!(!old_session.is_empty(), "{first}");

    // The behaviour under test is the upstream's idle timeout (300 ms) running out, and nothing
    // observable tells that the upstream dropped an idle session: the time must elapse.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let before = upstream_counts(&alice).await.count;
    // The same again: that peek reopened a session, which must expire before the counter call.
    tokio::time::sleep(Duration::from_millis(900)).await;
    call_ok(&alice, "counter", json!({})).await;
    let after = upstream_counts(&alice).await.count;
    assert_eq!(
        after,
        before + 1,
        "the counter call ran {} times",
        after - before
    );

    let seen = seen_by_upstream(&alice).await;
    let new_session = field(&seen, "mcp-session-id");
    assert!(
        !new_session.is_empty() && new_session != old_session,
        "still on the expired session {old_session}: {seen}"
    );
    assert!(
        field(&seen, ":id").starts_with("narrowgate-"),
        "the forwarder did not take up the new session: {seen}"
    );
}

/// Proves: a call the gateway gives up on (its contract's 300 ms timeout, against a tool that
/// would run 5 s) is cancelled upstream with `notifications/cancelled`, as rmcp's client does,
/// instead of running on for nobody: the demo upstream counts the cancellation well before the
/// tool would have finished.
#[tokio::test]
async fn a_call_that_times_out_is_cancelled_upstream() {
    let upstream = HttpUpstream::start(&[]);
    let gw = gateway_for(&upstream);
    let alice = client(&gw.url, KEY).await;
    let timed_out = call_answered(&alice, "slow", json!({"ms": 5000})).await;
    assert_eq!(timed_out.is_error, Some(true), "{timed_out:?}");
    let cancelled = |r: &rmcp::model::CallToolResult| structured_u64(r, "cancelled").unwrap_or(0);
    gw.retry_until(
        Duration::from_secs(3),
        "the upstream sees the call cancelled",
        async || {
            let seen = cancelled(&call_ok(&alice, "peek_counter", json!({})).await);
            if seen == 1 {
                Ok(())
            } else {
                Err(format!("{seen} cancelled"))
            }
        },
    )
    .await;
}

/// Proves: a call whose client hangs up before the answer still runs to its end: the upstream
/// is not told to cancel it, and its receipt is written with the upstream's outcome. (Served
/// in the connection's task, the call would be dropped with the connection: cancelled upstream
/// and no receipt.)
#[tokio::test]
async fn a_call_whose_client_hangs_up_still_completes() {
    let upstream = HttpUpstream::start(&[]);
    let gw = gateway_for(&upstream);
    let raw = common::Raw::new(&gw.url);
    let version = "2025-11-25";
    let session = raw.open_session(Some(KEY), version).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(50))
        .build()
        .expect("client");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"ms": 250}}});
    let hung_up = impatient
        .post(&gw.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {KEY}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", version)
        .body(body.to_string())
        .send()
        .await;
    assert!(
        hung_up.is_err(),
        "the client should have given up: {hung_up:?}"
    );

    gw.retry_until(
        Duration::from_secs(5),
        "the abandoned call's receipt",
        async || {
            let receipts = common::receipts_json(&gw.config_path(), &["--tool", "slow"]);
            match receipts.as_slice() {
                [one] if one["outcome"] == "ok" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let alice = client(&gw.url, KEY).await;
    let peek = call_ok(&alice, "peek_counter", json!({})).await;
    let cancelled = structured_u64(&peek, "cancelled");
    assert_eq!(
        cancelled,
        Some(0),
        "the upstream was told to cancel: {peek:?}"
    );
}
