//! Which protocol the gateway speaks to the real stdio servers: the one each offers.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::peers::{PyClient, mcp_server_time, node_bin};
use crate::common::{self, Gateway, KEY, callers};

/// rmcp's client waits this long for an unanswered `server/discover` before it falls back to
/// `initialize`; a legacy server that answers it with an error costs none of it.
const DISCOVER_PROBE: Duration = Duration::from_secs(10);

/// Proves: over stdio the gateway speaks 2026-07-28 to `mcp-server-time` (Python SDK 2.x, which
/// offers it: `/readyz` says so, and `get_current_time` answers through the gateway, a call sent
/// through rmcp's client on that protocol) and 2025-11-25 to `server-everything` and
/// `server-filesystem` (Node SDK, -32601 to `server/discover`), all three up in less than
/// rmcp's 10 s discovery probe: the fallback on -32601 is immediate. Fails with stdio upstreams
/// opened by `initialize` only (time reported 2025-11-25).
#[tokio::test]
async fn stdio_servers_are_spoken_to_in_the_protocol_they_offer() {
    let root = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "upstreams:\n  time:\n    command: {}\n    args: [--local-timezone, UTC]\n  \
         everything:\n    command: {}\n    args: [stdio]\n  \
         files:\n    command: {}\n    args: [{}]\n{}",
        mcp_server_time().display(),
        node_bin("mcp-server-everything").display(),
        node_bin("mcp-server-filesystem").display(),
        json!(root.path().display().to_string()),
        callers(&[])
    );
    let contract = "upstream: time\ntools:\n  get_current_time:\n    privilege: read\n    input: \
         {type: object, properties: {timezone: {type: string, enum: [UTC]}}, required: [timezone], \
         additionalProperties: false}\n";
    let started = Instant::now();
    let gw = Gateway::start(&config, &[("time.yaml", contract)]);
    gw.wait_tools_joined("time", &["get_current_time"]);
    let ready = gw.readyz();
    let took = started.elapsed();
    for (upstream, protocol) in [
        ("time", "2026-07-28"),
        ("everything", "2025-11-25"),
        ("files", "2025-11-25"),
    ] {
        assert_eq!(
            ready["upstreams"][upstream]["state"], "up",
            "{upstream}: {ready}"
        );
        assert_eq!(
            ready["upstreams"][upstream]["protocol"], protocol,
            "{upstream}: {ready}"
        );
    }
    assert!(
        took < DISCOVER_PROBE,
        "the upstreams took {took:?} to come up: a fallback waited for the discovery probe\n{}",
        gw.log()
    );

    let client = common::client(&gw.url, KEY).await;
    let result = client
        .call_tool(common::tool_params(
            "get_current_time",
            json!({"timezone": "UTC"}),
        ))
        .await
        .expect("get_current_time answers");
    assert_eq!(result.is_error, Some(false), "{result:?}\n{}", gw.log());
    let answer = result.structured_content.unwrap_or_default();
    assert_eq!(answer["timezone"], "UTC", "{answer}");
    assert!(answer["datetime"].is_string(), "{answer}");
}

/// Proves the gateway is quiet in front of a server that is well: `mcp-server-time` (Python SDK
/// 2.x, on 2026-07-28) declares no list changes and no resource subscriptions, so the gateway
/// opens no `subscriptions/listen` stream to it and logs no warning about one, however long it
/// runs. Fails when the stream is asked for regardless: the server refuses it, and the gateway
/// warned at each retry (every 30 s once the back-off is at its longest; 4 times in the first
/// 5 s).
#[tokio::test]
async fn no_listen_stream_is_asked_of_a_server_that_declared_nothing_to_listen_to() {
    let config = format!(
        "upstreams:\n  time:\n    command: {}\n    args: [--local-timezone, UTC]\n{}",
        mcp_server_time().display(),
        callers(&[])
    );
    let contract = "upstream: time\ntools:\n  get_current_time:\n    privilege: read\n    input: \
         {type: object, properties: {timezone: {type: string, enum: [UTC]}}, required: [timezone], \
         additionalProperties: false}\n";
    let gw = Gateway::spawn(
        &config,
        &[("time.yaml", contract)],
        &[("NARROWGATE_LOG", "debug")],
    );
    gw.wait_ready(Duration::from_secs(60));
    gw.wait_tools_joined("time", &["get_current_time"]);
    // Long enough for four retries of a refused stream (250 ms, doubling).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = gw.log();
    assert_eq!(gw.readyz()["upstreams"]["time"]["protocol"], "2026-07-28");
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("subscriptions/listen"))
        .collect();
    assert!(
        warned.is_empty(),
        "warned about a stream:\n{}",
        warned.join("\n")
    );
    assert!(
        log.contains("declares no list changes: no subscriptions/listen stream"),
        "the gateway did not say (at debug) why it opened no stream:\n{log}"
    );
}

/// What `narrowgate init` scaffolds for `server-everything`'s resources and prompts, in part.
const EVERYTHING_OFFER: &str = r#"upstream: everything
resources:
  - uri: "demo://resource/static/document/architecture.md"
    mime_types: ["text/markdown"]
  - uri_template: "demo://resource/dynamic/text/{resourceId}"
    variables:
      resourceId: { pattern: "^[0-9]{1,3}$" }
    mime_types: ["text/plain"]
prompts:
  "args-prompt":
    arguments:
      "city": { required: true }
      "state": { required: false }
  "completable-prompt":
    arguments:
      "department": { required: true }
      "name": { required: true }
"#;

/// Proves: in front of a real server that speaks 2025-11-25 (`server-everything` over stdio,
/// whose answers carry no `resultType`), the Python SDK 2.x client on 2026-07-28 accepts every
/// answer the gateway gives to resources/list, resources/templates/list, resources/read,
/// prompts/list, prompts/get and completion/complete, each with `resultType: complete` (and the
/// caching hints on lists and reads), and with the server's contents. Fails without the gateway
/// completing its results (the SDK raised a ValidationError: `resultType` field required).
#[test]
fn every_result_is_complete_in_front_of_server_everything() {
    let config = format!(
        "upstreams:\n  everything:\n    command: {}\n    args: [stdio]\n{}",
        node_bin("mcp-server-everything").display(),
        callers(&[])
    )
    .replace(
        "tools: ['*']",
        "tools: ['*']\n    resources: ['*']\n    prompts: ['*']",
    );
    let gw = Gateway::start(&config, &[("everything.yaml", EVERYTHING_OFFER)]);
    let steps = json!([
        {"op": "list_resources"},
        {"op": "list_templates"},
        {"op": "read_resource", "uri": "demo://resource/static/document/architecture.md"},
        {"op": "read_resource", "uri": "demo://resource/dynamic/text/7"},
        {"op": "list_prompts"},
        {"op": "get_prompt", "name": "args-prompt", "arguments": {"city": "Paris"}},
        {"op": "complete", "ref": {"type": "ref/prompt", "name": "completable-prompt"},
         "argument": {"name": "department", "value": "E"}},
    ]);
    let out = PyClient::V2("auto").run(&gw.url, KEY, &steps);
    assert_eq!(out["protocol_version"], "2026-07-28", "{out}");
    let results = out["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 7, "{out}");
    for (step, result) in steps.as_array().into_iter().flatten().zip(&results) {
        let Some(answer) = result.get("page").or_else(|| result.get("result")) else {
            panic!(
                "{step}: the SDK did not accept the answer: {result}\n{}",
                gw.log()
            );
        };
        assert_eq!(answer["resultType"], "complete", "{step}: {answer}");
        if step["op"] != "get_prompt" && step["op"] != "complete" {
            assert!(answer["ttlMs"].is_u64(), "{step}: no ttlMs: {answer}");
            assert!(
                answer["cacheScope"].is_string(),
                "{step}: no cacheScope: {answer}"
            );
        }
    }
    let read = &results[2]["result"]["contents"][0];
    assert_eq!(read["mimeType"], "text/markdown", "{read}");
    assert!(
        read["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{read}"
    );
    assert_eq!(
        results[0]["items"][0]["uri"],
        "demo://resource/static/document/architecture.md"
    );
    let text = results[5]["result"]["messages"][0]["content"]["text"].as_str();
    assert!(text.is_some_and(|t| t.contains("Paris")), "{}", results[5]);
    let values = &results[6]["result"]["completion"]["values"];
    assert!(
        values.as_array().is_some_and(|v| !v.is_empty()),
        "{}",
        results[6]
    );
}
