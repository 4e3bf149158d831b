//! `fixed:` arguments end to end (SPEC: the gateway sets them on every call): the published
//! `inputSchema` lacks them, a client that sends one is refused before the upstream sees the
//! call, the upstream receives the value the gateway set (constants and caller values), and the
//! receipt digests the arguments as they were sent upstream.

use crate::common;

use common::{
    Gateway, KEY, call_answered, client, demo_stdio_config, hash_key, receipts_json, text_of,
};
use narrowgate::harness::sha256_of;
use serde_json::json;

const CONTRACT: &str = r#"upstream: demo
tools:
  echo_caller:
    upstream_tool: echo
    description: Echo who is calling.
    privilege: read
    fixed:
      message: "from ${caller.name} (${caller.roles})"
  echo_note:
    upstream_tool: echo
    description: Echo a constant note; the client sends nothing.
    privilege: read
    fixed: { message: "the gateway's note" }
  echo_bounded:
    upstream_tool: echo
    description: The fixed value is checked against the contract's own schema for it.
    privilege: read
    input:
      type: object
      properties:
        message: { type: string, pattern: "^ok-" }
      additionalProperties: false
    fixed: { message: "${caller.name}" }
"#;

fn start() -> Gateway {
    let callers = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n    roles: [dev, ops]\n",
        hash_key(KEY)
    );
    Gateway::start(&demo_stdio_config(&callers, ""), &[("demo.yaml", CONTRACT)])
}

/// Proves: a fixed argument is not in the published schema; the upstream receives the value the
/// gateway set for this caller (name and roles, and a constant); a client sending it is refused
/// as outside the contract and nothing reaches the upstream; a resolved value the contract's
/// own schema for it rejects refuses the call; the receipt's digest is of the arguments as sent
/// upstream, not as the client sent them.
#[tokio::test]
async fn fixed_arguments_are_set_by_the_gateway_and_refused_from_clients() {
    let gw = start();
    gw.wait_tools_joined("demo", &["echo_caller", "echo_note", "echo_bounded"]);
    let c = client(&gw.url, KEY).await;
    let tools = c.list_all_tools().await.expect("tools/list");
    for tool in &tools {
        let schema = serde_json::to_value(tool.input_schema.as_ref()).expect("json");
        assert!(
            schema["properties"].get("message").is_none(),
            "{} publishes its fixed argument: {schema}",
            tool.name
        );
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        assert!(!required.contains(&json!("message")), "{schema}");
    }

    let r = call_answered(&c, "echo_caller", json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(text_of(&r), "Echo: from alice (dev,ops)");
    let r = call_answered(&c, "echo_note", json!({})).await;
    assert_eq!(text_of(&r), "Echo: the gateway's note");

    let refused = call_answered(&c, "echo_caller", json!({"message": "I am root"})).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let text = text_of(&refused);
    assert!(
        text.contains("arguments rejected by the contract") && text.contains("`message`"),
        "{text}"
    );
    assert!(
        !text.contains("I am root"),
        "the rejected value is echoed: {text}"
    );

    let bounded = call_answered(&c, "echo_bounded", json!({})).await;
    assert_eq!(
        bounded.is_error,
        Some(true),
        "alice does not match ^ok-: {bounded:?}"
    );
    assert!(text_of(&bounded).contains("pattern"), "{bounded:?}");

    let receipts = receipts_json(&gw.config_path(), &["--tool", "echo_caller"]);
    assert_eq!(receipts.len(), 2, "{receipts:?}");
    assert_eq!(receipts[0]["outcome"], "ok", "{receipts:?}");
    assert_eq!(
        receipts[0]["arguments_digest"],
        json!(sha256_of(&json!({"message": "from alice (dev,ops)"}))),
        "the receipt digests the arguments as sent upstream"
    );
    assert_eq!(receipts[1]["outcome"], "rejected_input", "{receipts:?}");
    let upstream_calls = receipts
        .iter()
        .filter(|r| r["attempts"].as_u64().unwrap_or(0) > 0)
        .count();
    assert_eq!(
        upstream_calls, 1,
        "the refused call reached the upstream: {receipts:?}"
    );
}
