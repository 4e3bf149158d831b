//! Which protocol the gateway speaks to the real stdio servers: the one each offers.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::peers::{mcp_server_time, node_bin};
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
