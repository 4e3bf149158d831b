//! Plain `tools/call` requests are answered by the gateway's own direct path
//! (src/mcp/direct.rs), everything else by rmcp. The two must answer alike: each request
//! here is sent twice, once as is and once with an `Accept` that carries a parameter (which rmcp
//! accepts but the direct path leaves to rmcp), and the JSON-RPC answers are compared.

use serde_json::{Value, json};

use super::common::{
    self, BOB, Gateway, HttpUpstream, KEY, Raw, Reply, contract_file, echo_tool, hash_key,
    stateless_call_body, stateless_call_headers,
};
const PLAIN: &str = "application/json, text/event-stream";
const TO_RMCP: &str = "application/json;q=1, text/event-stream";

/// echo (a message of at most 20 characters), fail and whoami.
fn contract() -> String {
    contract_file(
        "demo",
        &[
            &echo_tool("echo", 20, ""),
            "  fail:\n    privilege: read\n  whoami:\n    privilege: read\n",
        ],
    )
}

/// alice may call every tool, bob only `fail`; the log shows which path answered.
fn start() -> (HttpUpstream, Gateway) {
    let upstream = HttpUpstream::start(&[]);
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}  - name: bob\n    api_key_sha256: {}\n    tools: [fail]\n",
        upstream.url,
        common::callers(&[]),
        hash_key(BOB)
    );
    let gw = Gateway::spawn(
        &config,
        &[("demo.yaml", contract().as_str())],
        &[("NARROWGATE_LOG", "info,narrowgate::mcp::direct=debug")],
    );
    gw.wait_ready(std::time::Duration::from_secs(60));
    (upstream, gw)
}

/// One POST with exactly these headers (and a JSON content type).
async fn post(url: &str, headers: &[(&str, String)], body: &Value) -> Reply {
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Raw::new(url)
        .post_exactly(&headers, &body.to_string())
        .await
}

/// The headers of a request in `session`, at `version`, as the caller with `key`.
fn in_session(
    key: &str,
    accept: &str,
    session: &str,
    version: &str,
) -> [(&'static str, String); 4] {
    [
        ("authorization", format!("Bearer {key}")),
        ("accept", accept.to_string()),
        ("mcp-session-id", session.to_string()),
        ("mcp-protocol-version", version.to_string()),
    ]
}

/// The cases every lifecycle runs: (caller, tool, arguments, what it shows).
fn cases() -> [(&'static str, &'static str, Value, &'static str); 6] {
    [
        (KEY, "echo", json!({"message": "hi"}), "a result"),
        (
            KEY,
            "echo",
            json!({"message": "far too long for the contract"}),
            "a rejection",
        ),
        (KEY, "echo", json!({"message": 5}), "a rejection"),
        (KEY, "fail", json!({}), "an upstream tool error"),
        (
            BOB,
            "echo",
            json!({"message": "hi"}),
            "a tool bob may not use",
        ),
        (KEY, "no_such_tool", json!({}), "an unknown tool"),
    ]
}

/// Asserts that the log shows `expected` calls answered by the direct path.
fn assert_answered_directly(gw: &Gateway, expected: usize) {
    let log = gw.log();
    let direct = log.matches("tools/call answered without rmcp").count();
    assert_eq!(direct, expected, "log:\n{log}");
}

/// Proves: stateless (2026-07-28) results, tool errors (rejected arguments, an upstream
/// failure), a tool the caller may not use and an unknown tool get the same status, content
/// type and JSON-RPC message from the direct path as from rmcp's; the log shows the direct path
/// answered every plain request (unknown tools included), and every call left a receipt either way.
#[tokio::test]
async fn stateless_calls_are_answered_as_rmcp_answers_them() {
    let (_upstream, gw) = start();
    for (key, tool, arguments, what) in cases() {
        let body = stateless_call_body(json!("req-1"), tool, arguments);
        let headers = |accept: &str| {
            let mut headers = stateless_call_headers(key, tool);
            headers.push(("accept", accept.to_string()));
            headers
        };
        let direct = post(&gw.url, &headers(PLAIN), &body).await;
        let by_rmcp = post(&gw.url, &headers(TO_RMCP), &body).await;
        assert_eq!(direct.status, by_rmcp.status, "{what}");
        assert_eq!(direct.status, 200, "{what}: {direct:?}");
        assert_eq!(
            direct.header("content-type"),
            by_rmcp.header("content-type"),
            "{what}"
        );
        assert_eq!(
            direct.body, by_rmcp.body,
            "{what}: the two paths answer differently"
        );
        assert_eq!(direct.message()["id"], "req-1", "{what}: {direct:?}");
        if what == "a result" {
            assert_eq!(
                direct.message()["result"]["resultType"],
                "complete",
                "{direct:?}"
            );
        }
    }
    assert_answered_directly(&gw, 6);
    let receipts = common::receipts_json(&gw.config_path(), &[]);
    assert_eq!(receipts.len(), cases().len() * 2, "{receipts:?}");
}

/// Proves: in sessions of 2025-11-25 and 2025-06-18 the direct path answers with the same
/// JSON-RPC message rmcp sends (no `resultType`; before 2025-11-25 rejected arguments are a
/// -32602 error, not a tool error), in a JSON body where rmcp writes an SSE stream (clients
/// accept both), and only in a session the caller owns and rmcp still holds, at the version
/// the session was opened with.
#[tokio::test]
async fn session_calls_are_answered_as_rmcp_answers_them() {
    let (_upstream, gw) = start();
    let raw = Raw::new(&gw.url);
    let mut expected_direct = 0;
    for version in ["2025-11-25", "2025-06-18"] {
        for (key, tool, arguments, what) in cases() {
            let session = raw.open_session(Some(key), version).await;
            let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}});
            let headers = |accept| in_session(key, accept, &session, version);
            let direct = post(&gw.url, &headers(PLAIN), &body).await;
            let by_rmcp = post(&gw.url, &headers(TO_RMCP), &body).await;
            assert_eq!(direct.status, 200, "{version} {what}: {direct:?}");
            assert_eq!(by_rmcp.status, 200, "{version} {what}: {by_rmcp:?}");
            assert_eq!(
                direct.message(),
                by_rmcp.message(),
                "{version} {what}: the two paths answer differently"
            );
            assert_eq!(direct.message()["id"], 9);
            assert!(
                direct.message()["result"].get("resultType").is_none(),
                "{direct:?}"
            );
            // Unknown tools too: they are answered like forbidden ones, on the same path.
            expected_direct += 1;
            assert_eq!(
                direct.header("content-type").as_deref(),
                Some("application/json")
            );
            if version == "2025-06-18" && what == "a rejection" {
                assert_eq!(direct.message()["error"]["code"], -32602, "{direct:?}");
            }
        }
    }
    assert_answered_directly(&gw, expected_direct);

    // A session opened at 2025-06-18 whose request names 2025-11-25 (rmcp only checks that the
    // header names a known version): rmcp's handler answers as of 2025-06-18, and so must the
    // gateway, which leaves such requests to rmcp.
    let session = raw.open_session(Some(KEY), "2025-06-18").await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": 5}}});
    let headers = |accept| in_session(KEY, accept, &session, "2025-11-25");
    let plain = post(&gw.url, &headers(PLAIN), &body).await;
    let by_rmcp = post(&gw.url, &headers(TO_RMCP), &body).await;
    assert_eq!(plain.message(), by_rmcp.message());
    assert_eq!(plain.message()["error"]["code"], -32602, "{plain:?}");
    assert_answered_directly(&gw, expected_direct);

    // Another caller's session, a deleted one and an unknown one are rmcp's to refuse (404).
    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fail", "arguments": {}}});
    let with = |key, session| in_session(key, PLAIN, session, "2025-11-25");
    assert_eq!(
        post(&gw.url, &with(BOB, &session), &body).await.status,
        404,
        "bob used alice's session"
    );
    assert_eq!(
        post(&gw.url, &with(KEY, "no-such-session"), &body)
            .await
            .status,
        404
    );
    let deleted = reqwest::Client::new()
        .delete(&gw.url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("DELETE answered");
    // 200, as the SDKs' own servers answer (the Python SDK's client warns on rmcp's 202).
    assert_eq!(deleted.status(), 200, "{deleted:?}");
    assert_eq!(
        post(&gw.url, &with(KEY, &session), &body).await.status,
        404,
        "a deleted session answered"
    );
    assert_answered_directly(&gw, expected_direct);
}
