//! The gateway speaks MCP 2026-07-28 to an HTTP upstream that offers it (rmcp's `Auto`
//! lifecycle: `server/discover`, then `initialize` at 2025-11-25 for a legacy upstream). The demo
//! upstream's `--modern-only-tool` offers `modern_only` to 2026-07-28 clients only; `--legacy`
//! makes it answer `server/discover` as a legacy server does. A 2026-07-28 upstream asks the
//! client for input with multi round-trip requests (an `InputRequiredResult`), which the gateway
//! answers by asking its own client (here the official Python SDK, in a 2025-11-25 session).

use std::time::Duration;

use serde_json::{Value, json};

use super::common::peers::{CLIENT_DEADLINE, py_client_script, py2_python};
use super::common::process::run;
use super::common::{self, Gateway, HttpUpstream, KEY, call, call_ok, client, text_of};

const CONTRACT: &str = "upstream: demo\ntools:\n  whoami:\n    privilege: read\n  modern_only:\n    privilege: read\n  toggle_extra:\n    privilege: write\n  extra:\n    privilege: read\n";

use super::forwarding::{field, seen_by_upstream};

/// `/readyz` says the gateway speaks `protocol` to the demo upstream.
fn assert_protocol(gw: &Gateway, protocol: &str) {
    let ready = gw.readyz();
    assert_eq!(ready["upstreams"]["demo"]["protocol"], protocol, "{ready}");
}

fn gateway_for(upstream: &HttpUpstream) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}",
        upstream.url,
        common::callers(&[])
    );
    Gateway::start(&config, &[("demo.yaml", CONTRACT)])
}

/// Proves: an upstream that offers 2026-07-28 is spoken to in it (`/readyz` says so); the tool
/// it offers only there is published and callable, with a receipt; calls go out from the
/// forwarder as stateless 2026-07-28 requests (no session, `Mcp-Method` and `Mcp-Name`); and a
/// tool added at runtime reaches the gateway through the `subscriptions/listen` stream.
#[tokio::test]
async fn a_2026_upstream_is_spoken_to_in_2026() {
    let upstream = HttpUpstream::start(&["--modern-only-tool"]);
    let gw = gateway_for(&upstream);
    assert_protocol(&gw, "2026-07-28");
    assert_eq!(gw.readyz()["tools"]["modern_only"]["state"], "enabled");
    let alice = client(&gw.url, KEY).await;
    let answer = call_ok(&alice, "modern_only", json!({})).await;
    assert_eq!(text_of(&answer), "spoken in 2026-07-28");
    let receipts = common::receipts_json(&gw.config_path(), &["--tool", "modern_only"]);
    assert_eq!(receipts.len(), 1, "{receipts:?}");

    let seen = seen_by_upstream(&alice).await;
    assert!(
        field(&seen, ":id").starts_with("narrowgate-"),
        "not sent by the forwarder: {seen}"
    );
    assert_eq!(field(&seen, "mcp-protocol-version"), "2026-07-28", "{seen}");
    assert_eq!(field(&seen, "mcp-method"), "tools/call", "{seen}");
    assert_eq!(field(&seen, "mcp-name"), "whoami", "{seen}");
    assert_eq!(field(&seen, "mcp-session-id"), "", "{seen}");

    assert_eq!(gw.readyz()["tools"]["extra"]["state"], "disabled");
    call_ok(&alice, "toggle_extra", json!({})).await;
    gw.wait_for(Duration::from_secs(10), "extra enabled", |r| {
        r["tools"]["extra"]["state"] == "enabled"
    });
    call_ok(&alice, "extra", json!({})).await;
}

/// Proves: an upstream that answers `server/discover` as a legacy server does is still served,
/// on a 2025-11-25 session (`/readyz` says so), and its list changes still arrive; the tool it
/// would offer only to 2026-07-28 clients is not there.
#[tokio::test]
async fn a_legacy_upstream_is_spoken_to_in_2025() {
    let upstream = HttpUpstream::start(&["--modern-only-tool", "--legacy"]);
    let gw = gateway_for(&upstream);
    assert_protocol(&gw, "2025-11-25");
    assert_eq!(gw.readyz()["tools"]["modern_only"]["state"], "disabled");
    let alice = client(&gw.url, KEY).await;
    let seen = seen_by_upstream(&alice).await;
    assert_eq!(field(&seen, "mcp-protocol-version"), "2025-11-25", "{seen}");
    assert_ne!(field(&seen, "mcp-session-id"), "", "{seen}");
    call_ok(&alice, "toggle_extra", json!({})).await;
    gw.wait_for(Duration::from_secs(10), "extra enabled", |r| {
        r["tools"]["extra"]["state"] == "enabled"
    });
    assert!(call(&alice, "extra", json!({})).await.is_ok());
}

const ASKING_CONTRACT: &str = "upstream: demo
tools:
  test_elicitation:
    input: { type: object, properties: { message: { type: string } }, required: [message] }
  elicitation_refused:
    upstream_tool: test_elicitation
    relay: { elicitation: false }
    input: { type: object, properties: { message: { type: string } }, required: [message] }
  asks_rounds:
    input: { type: object, properties: { rounds: { type: integer } }, required: [rounds] }
";

/// Runs the Python SDK client of `tests/clients/py2_asks_client.py` (every callback, a
/// 2025-11-25 session) with `calls` through `gw`; what it printed.
fn python_client(gw: &Gateway, calls: Value) -> Value {
    let ran = run(
        std::process::Command::new(py2_python())
            .arg(py_client_script("py2_asks_client.py"))
            .args([&gw.url, KEY, "all", &calls.to_string()])
            .env("PY_CLIENT_TIMEOUT", "20"),
        CLIENT_DEADLINE,
    );
    assert_eq!(ran.code, Some(0), "client failed: {}", ran.stderr);
    ran.json()
}

/// The `n`th result the client printed: whether it is a tool error, and its text.
fn nth(out: &Value, n: usize) -> (bool, String) {
    let r = &out["results"][n];
    (
        r["is_error"].as_bool().unwrap_or(true),
        r["text"].as_str().unwrap_or_default().to_string(),
    )
}

/// Proves: when a 2026-07-28 upstream answers `tools/call` with an `InputRequiredResult`
/// (an elicitation), the gateway asks its client (the Python SDK's elicitation callback runs
/// exactly once, with the upstream's message), sends the call again with the answer and the
/// upstream's `requestState` (the demo checks it is echoed), and the client gets the completed
/// result with the answer; the upstream's state is nowhere in what the client sees. With the
/// contract's `relay: {elicitation: false}` the callback is not called and the call ends in a
/// tool error saying why. Fails without MRTR in the forwarder (the input-required answer is no
/// tool result: the call failed as malformed).
#[tokio::test]
async fn an_upstreams_input_request_is_answered_by_the_client_once() {
    let upstream = HttpUpstream::start(&[]);
    let gw = asking_gateway(&upstream);
    gw.wait_tools_joined("demo", &["test_elicitation", "asks_rounds"]);
    assert_eq!(gw.readyz()["upstreams"]["demo"]["protocol"], "2026-07-28");
    let out = python_client(
        &gw,
        json!([["test_elicitation", {"message": "who are you?"}],
               ["elicitation_refused", {"message": "may I ask?"}]]),
    );
    assert_eq!(
        out["called"],
        json!({"sampling": 0, "elicitation": 1, "roots": 0}),
        "{out}"
    );
    assert_eq!(
        out["elicitation_messages"],
        json!(["who are you?"]),
        "{out}"
    );
    let (error, text) = nth(&out, 0);
    assert!(!error, "{out}");
    assert!(
        text.contains("action=accept") && text.contains("ada@example.com"),
        "{out}"
    );
    assert!(
        !out.to_string().contains("demo-upstream:"),
        "state leaked: {out}"
    );
    let (error, text) = nth(&out, 1);
    assert!(error, "{out}");
    assert!(
        text.contains("elicitation/create")
            && text.contains("the contract of tool `elicitation_refused` does not relay it"),
        "{out}"
    );
}

/// A gateway with the asking tools of `upstream`.
fn asking_gateway(upstream: &HttpUpstream) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}",
        upstream.url,
        common::callers(&[])
    );
    Gateway::start(&config, &[("demo.yaml", ASKING_CONTRACT)])
}

/// Proves: the gateway drives as many rounds as the upstream asks for, up to 8: a call that
/// asks three times in three rounds gets each answer (the client's callback runs three times)
/// and completes; one that would ask nine times ends after the eighth with a tool error.
#[tokio::test]
async fn input_rounds_are_driven_up_to_eight() {
    let upstream = HttpUpstream::start(&[]);
    let gw = asking_gateway(&upstream);
    gw.wait_tools_joined("demo", &["asks_rounds"]);
    let out = python_client(
        &gw,
        json!([["asks_rounds", {"rounds": 3}], ["asks_rounds", {"rounds": 9}]]),
    );
    assert_eq!(out["called"]["elicitation"], json!(3 + 8), "{out}");
    let (error, text) = nth(&out, 0);
    assert!(
        !error && text.matches("ada@example.com").count() == 3,
        "{out}"
    );
    let (error, text) = nth(&out, 1);
    assert!(error && text.contains("after 8 rounds"), "{out}");
}

/// Proves: a session's `resources/subscribe` of a resource on a 2026-07-28 upstream (which has
/// no such method) is relayed as a `subscriptions/listen` filter, and the upstream's update of
/// that URI reaches the session; a second URI joins the filter and is heard too. Fails without
/// `upstream::watch` (the subscribe was refused: the upstream answered -32601).
#[tokio::test]
#[allow(deprecated)] // `resources/subscribe` is how 2025-11-25 sessions subscribe
async fn resource_updates_of_a_2026_upstream_reach_the_subscribed_session() {
    use rmcp::model::SubscribeRequestParams;
    const CONTRACT: &str = "upstream: demo
tools:
  touch_resource:
    input: { type: object, properties: { uri: { type: string } }, required: [uri] }
resources:
  - uri: \"test://static-text\"
  - uri_template: \"test://template/{id}/data\"
    variables: { id: { pattern: \"^[0-9]{1,2}$\" } }
";
    let upstream = HttpUpstream::start(&[]);
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\ncallers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n    resources: ['test://*']\n",
        upstream.url,
        common::hash_key(KEY)
    );
    let gw = Gateway::start(&config, &[("demo.yaml", CONTRACT)]);
    gw.wait_tools_joined("demo", &["touch_resource"]);
    assert_eq!(gw.readyz()["upstreams"]["demo"]["protocol"], "2026-07-28");
    let (session, mut updates) = common::listening(&gw.url, KEY).await;
    let within = Duration::from_secs(20);
    for uri in ["test://static-text", "test://template/42/data"] {
        session
            .subscribe(SubscribeRequestParams::new(uri))
            .await
            .expect("subscribed");
        session
            .call_tool(common::tool_params("touch_resource", json!({"uri": uri})))
            .await
            .expect("touched");
        let heard = tokio::time::timeout(within, updates.recv()).await;
        assert_eq!(heard.ok().flatten().as_deref(), Some(uri));
    }
}
