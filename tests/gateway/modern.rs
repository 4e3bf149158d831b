//! The gateway speaks MCP 2026-07-28 to an HTTP upstream that offers it (rmcp's `Auto`
//! lifecycle: `server/discover`, then `initialize` at 2025-11-25 for a legacy upstream). The demo
//! upstream's `--modern-only-tool` offers `modern_only` to 2026-07-28 clients only; `--legacy`
//! makes it answer `server/discover` as a legacy server does.

use std::time::Duration;

use serde_json::{Value, json};

use super::common::{self, Gateway, HttpUpstream, KEY, call, call_ok, client, text_of};

const CONTRACT: &str = "upstream: demo\ntools:\n  whoami:\n    privilege: read\n  modern_only:\n    privilege: read\n  toggle_extra:\n    privilege: write\n  extra:\n    privilege: read\n";

fn gateway_for(upstream: &HttpUpstream) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}",
        upstream.url,
        common::callers(&[])
    );
    Gateway::start(&config, &[("demo.yaml", CONTRACT)])
}

/// What the upstream saw of one `whoami` call: its headers, and the JSON-RPC id under `:id`.
async fn seen_by_upstream(alice: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Value {
    let result = call_ok(alice, "whoami", json!({})).await;
    serde_json::from_str(&text_of(&result)).expect("whoami answers JSON")
}

fn field<'a>(seen: &'a Value, name: &str) -> &'a str {
    seen.get(name).and_then(Value::as_str).unwrap_or("")
}

/// Proves: an upstream that offers 2026-07-28 is spoken to in it (`/readyz` says so); the tool
/// it offers only there is published and callable, with a receipt; calls go out from the
/// forwarder as stateless 2026-07-28 requests (no session, `Mcp-Method` and `Mcp-Name`); and a
/// tool added at runtime reaches the gateway through the `subscriptions/listen` stream.
#[tokio::test]
async fn a_2026_upstream_is_spoken_to_in_2026() {
    let upstream = HttpUpstream::start(&["--modern-only-tool"]);
    let gw = gateway_for(&upstream);
    assert_eq!(
        gw.readyz()["upstreams"]["demo"]["protocol"],
        "2026-07-28",
        "{}",
        gw.readyz()
    );
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
    assert_eq!(
        gw.readyz()["upstreams"]["demo"]["protocol"],
        "2025-11-25",
        "{}",
        gw.readyz()
    );
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
