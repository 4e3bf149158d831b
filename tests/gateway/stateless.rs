//! Plain 2026-07-28 `tools/call` requests are answered by the gateway's own stateless path
//! (src/gateway/stateless.rs), everything else by rmcp. The two must answer alike: each request
//! here is sent twice, once as is and once with an `Accept` that carries a parameter (which rmcp
//! accepts but the gateway's path leaves to rmcp), and the answers are compared.

use serde_json::{Value, json};

use super::common::{self, Gateway, HttpUpstream, KEY, hash_key};

const BOB: &str = "test-key-bob";

const CONTRACT: &str = r#"upstream: demo
tools:
  echo:
    privilege: read
    input:
      type: object
      properties: { message: { type: string, maxLength: 20 } }
      required: [message]
      additionalProperties: false
  fail:
    privilege: read
  whoami:
    privilege: read
"#;

/// One POST with exactly these headers (no defaults added).
async fn post(
    url: &str,
    key: &str,
    accept: &str,
    tool: &str,
    body: &Value,
) -> (u16, String, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .expect("the gateway answers");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = response.text().await.unwrap_or_default();
    let message = serde_json::from_str(&text).unwrap_or_else(|_| json!({"unparsed": text}));
    (status, content_type, message)
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": {
        "name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// Proves: results, tool errors (rejected arguments, an upstream failure), a tool the caller may
/// not use and an unknown tool get the same status, content type and JSON-RPC message from
/// the gateway's stateless path as from rmcp's; the log shows the gateway's path answered the
/// plain requests of tools it publishes, and rmcp the others.
#[tokio::test]
async fn the_stateless_path_answers_as_rmcp_does() {
    let upstream = HttpUpstream::start(&[]);
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}  - name: bob\n    api_key_sha256: {}\n    tools: [fail]\n",
        upstream.url,
        common::callers(&[]),
        hash_key(BOB)
    );
    let gw = Gateway::spawn(
        &config,
        &[("demo.yaml", CONTRACT)],
        &[(
            "NARROWGATE_LOG",
            "info,narrowgate::gateway::stateless=debug",
        )],
    );
    gw.wait_ready(std::time::Duration::from_secs(60));
    let cases = [
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
    ];
    for (key, tool, arguments, what) in &cases {
        let body = call(tool, arguments.clone());
        let plain = post(
            &gw.url,
            key,
            "application/json, text/event-stream",
            tool,
            &body,
        )
        .await;
        let by_rmcp = post(
            &gw.url,
            key,
            "application/json;q=1, text/event-stream",
            tool,
            &body,
        )
        .await;
        assert_eq!(plain, by_rmcp, "{what}: the two paths answer differently");
        assert_eq!(plain.0, 200, "{what}: {plain:?}");
        assert_eq!(plain.1, "application/json", "{what}");
        assert_eq!(plain.2["id"], "req-1", "{what}: {plain:?}");
    }
    let ok = post(
        &gw.url,
        KEY,
        "application/json, text/event-stream",
        "echo",
        &call("echo", json!({"message": "hi"})),
    )
    .await;
    assert_eq!(ok.2["result"]["resultType"], "complete", "{ok:?}");
    assert_eq!(ok.2["result"]["isError"], false, "{ok:?}");

    // Five plain requests for published tools (the unknown tool goes to rmcp), plus `ok`.
    let log = gw.log();
    let answered = log.matches("tools/call answered without rmcp").count();
    assert_eq!(answered, 6, "log:\n{log}");
    // Every call, on either path, went through the pipeline and left a receipt.
    let receipted = log.lines().filter(|l| l.contains("receipt=")).count();
    assert_eq!(receipted, cases.len() * 2 + 1, "log:\n{log}");
}
