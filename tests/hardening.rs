//! What a hostile or careless client can send, against the real binary: probing for tools the
//! caller may not use, names and identities built to forge log lines or flood receipts, request
//! ids reused while in flight.

use crate::common;

use std::time::Duration;

use common::{Gateway, KEY, Raw, Reply, demo_stdio_config, hash_key};
use serde_json::{Value, json};

const BOB: &str = "test-key-bob";

/// `echo` and `slow` of the demo upstream, and `whoami` (bob may use only `echo`).
const CONTRACT: &str = r#"upstream: demo
tools:
  echo:
    privilege: read
    input:
      type: object
      properties: { message: { type: string, maxLength: 20 } }
      required: [message]
      additionalProperties: false
  slow:
    privilege: read
    timeout: 5s
    input: { type: object, properties: { ms: { type: integer } }, required: [ms] }
  whoami:
    privilege: read
"#;

/// The demo upstream over stdio; alice may use every tool, bob only `echo`.
fn start() -> Gateway {
    let callers = format!(
        "{}  - name: bob\n    api_key_sha256: {}\n    tools: [echo]\n",
        common::callers(&[]),
        hash_key(BOB)
    );
    let gw = Gateway::spawn(
        &demo_stdio_config(&callers, ""),
        &[("demo.yaml", CONTRACT)],
        &[],
    );
    gw.wait_ready(Duration::from_secs(60));
    gw
}

/// The headers of a request in `session` at `version` as the caller with `key`.
fn in_session<'a>(key: &'a str, session: &'a str, version: &'a str) -> Vec<(&'a str, String)> {
    vec![
        ("authorization", format!("Bearer {key}")),
        ("mcp-session-id", session.to_string()),
        ("mcp-protocol-version", version.to_string()),
    ]
}

async fn post(raw: &Raw, headers: &[(&str, String)], body: &Value) -> Reply {
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    raw.post(&headers, &body.to_string()).await
}

/// A `tools/call` request of `name` with id `id`.
fn call_body(id: Value, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

/// An SSE body with its event ids (a per-session counter) blanked, so two streams compare by
/// what they carry.
fn without_event_ids(body: &str) -> String {
    body.lines()
        .map(|l| if l.starts_with("id:") { "id:" } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Proves: inside a session, at every session version, a tool that exists but is not the
/// caller's and a tool that does not exist get the same answer: same status, same content type,
/// same body byte for byte once the name is swapped (SSE event ids, a per-request counter,
/// blanked). Before the fix the first was answered as JSON by the gateway's direct path and the
/// second as an SSE stream by rmcp, which told them apart at a glance.
#[tokio::test]
async fn forbidden_and_unknown_tools_are_answered_alike_in_sessions() {
    let gw = start();
    let raw = Raw::new(&gw.url);
    for version in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let session = raw.open_session(Some(BOB), version).await;
        let headers = in_session(BOB, &session, version);
        let forbidden = post(&raw, &headers, &call_body(json!(4), "slow", json!({}))).await;
        let unknown = post(&raw, &headers, &call_body(json!(4), "nope", json!({}))).await;
        assert_eq!(forbidden.status, 200, "{version}: {forbidden:?}");
        assert_eq!(forbidden.status, unknown.status, "{version}");
        assert_eq!(
            forbidden.header("content-type"),
            unknown.header("content-type"),
            "{version}: content types differ"
        );
        assert_eq!(
            without_event_ids(&forbidden.body).replace("slow", "nope"),
            without_event_ids(&unknown.body),
            "{version}: bodies differ"
        );
        assert_eq!(
            forbidden.message()["error"]["code"],
            -32602,
            "{forbidden:?}"
        );
        assert_eq!(
            forbidden.message()["error"]["message"],
            "Unknown tool: slow",
            "{forbidden:?}"
        );
    }
}

/// Proves: a tool name that no tool can have (300 KB, with a newline) is answered `Unknown tool`
/// with the name escaped and cut to 64 characters plus its length; its receipt records that
/// short form and no digest of the call's (unredacted) arguments; the gateway's log gets neither
/// the forged line nor the 300 KB.
#[tokio::test]
async fn malformed_tool_names_are_bounded_everywhere() {
    let gw = start();
    let raw = Raw::new(&gw.url);
    let name = format!("{}\nFORGED level=INFO tools/call", "x".repeat(300_000));
    let reply = raw
        .call_in_new_session(KEY, "2025-11-25", &name, json!({"pin": "1234"}))
        .await;
    let shown = format!("{}…[{} bytes]", "x".repeat(64), name.len());
    assert_eq!(
        reply.message()["error"]["message"],
        format!("Unknown tool: {shown}"),
        "{:.300}",
        reply.body
    );
    assert!(
        reply.body.len() < 1024,
        "{} bytes answered",
        reply.body.len()
    );
    let receipts = common::receipts_json(&gw.config_path(), &[]);
    let receipt = receipts.last().expect("a receipt");
    assert_eq!(receipt["tool"], shown.as_str(), "{receipt:#}");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["arguments_digest"], Value::Null, "{receipt:#}");
    let log = gw.log();
    assert!(
        !log.lines().any(|l| l.starts_with("FORGED")),
        "a forged log line:\n{log:.2000}"
    );
    assert!(log.len() < 64 * 1024, "the log grew to {} bytes", log.len());
}

/// Proves: in a 2025-03-26 session, a request that reuses the id of a request still in flight
/// is refused (HTTP 400, JSON-RPC -32600, id null) and the first request gets its own answer;
/// once answered, the id may be used again. Before the fix rmcp routed the first request's
/// answer (`slept 400`) to the second request's sender, and the first request got none.
#[tokio::test]
async fn a_request_id_in_flight_is_not_reused() {
    let gw = start();
    let version = "2025-03-26";
    let session = Raw::new(&gw.url).open_session(Some(KEY), version).await;
    let client = reqwest::Client::new();
    let send = |ms: u64| {
        client
            .post(&gw.url)
            .header("authorization", format!("Bearer {KEY}"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", version)
            .body(call_body(json!(5), "slow", json!({"ms": ms})).to_string())
            .send()
    };
    // The first request's answer has begun (its headers are here): it is in flight.
    let first = send(400).await.expect("first request answered");
    let second = send(1500).await.expect("second request answered");
    let second_status = second.status().as_u16();
    let second_body = tokio::time::timeout(Duration::from_secs(10), second.text())
        .await
        .expect("the second answer ends")
        .unwrap_or_default();
    assert!(
        !second_body.contains("slept 400"),
        "the second request got the first one's answer: {second_body}"
    );
    let first_body = tokio::time::timeout(Duration::from_secs(10), first.text())
        .await
        .expect("the first request gets an answer")
        .unwrap_or_default();
    assert_eq!(second_status, 400, "{second_body}");
    let refusal: Value = serde_json::from_str(&second_body).expect("a JSON-RPC error");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert_eq!(refusal["id"], Value::Null, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("request id already in use")),
        "{refusal}"
    );
    assert!(first_body.contains("slept 400"), "{first_body}");
    // Answered: the id is free again.
    let again = send(1).await.expect("answered");
    assert_eq!(again.status(), 200);
    let text = again.text().await.unwrap_or_default();
    assert!(text.contains("slept 1"), "{text}");
}
