//! `logging/setLevel` per client session, and the upstream's log messages relayed to the client
//! whose call they are about.

use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::peers::{py2_python, repo_root};
use crate::common::process::{spawn_logged, wait_listening};
use crate::common::{Gateway, KEY, Raw, callers, free_port};
use crate::relays::over::Over;

/// The Python SDK upstream of tests/relays/py_upstream.py, killed on drop.
struct PyUpstream {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl PyUpstream {
    fn start() -> PyUpstream {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("upstream.log");
        let port = free_port();
        let mut child = spawn_logged(
            Command::new(py2_python())
                .arg(repo_root().join("tests/relays/py_upstream.py"))
                .arg(port.to_string()),
            &log,
            "the Python upstream",
        );
        wait_listening(port, &mut child, "the Python upstream", &log);
        PyUpstream {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            _dir: dir,
        }
    }
}

impl Drop for PyUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|m| m["method"] == "notifications/message")
        .collect()
}

/// Proves: a session that set `info` gets the upstream's messages about its call at info and
/// above (not debug), on the call's stream, before the answer; a session that set no level gets
/// none. Fails without the relay (no message reached the client) and without the per-session
/// filter (the debug message came too).
#[tokio::test]
async fn log_messages_reach_the_caller_at_its_level() {
    let upstream = PyUpstream::start();
    let config = format!(
        "upstreams:\n  py:\n    url: {}\n{}",
        upstream.url,
        callers(&[])
    );
    let contract =
        "upstream: py\ntools:\n  log_steps:\n    privilege: read\n    input: { type: object }\n";
    let gateway = Gateway::start(&config, &[("py.yaml", contract)]);
    gateway.wait_tools_joined("py", &["log_steps"]);
    let raw = Raw::new(&gateway.url);
    let call = json!({"name": "log_steps", "arguments": {}});

    let quiet = raw.open_session(Some(KEY), "2025-11-25").await;
    let reply = raw
        .request(Some(KEY), &quiet, "2025-11-25", "tools/call", call.clone())
        .await;
    assert!(log_messages(&reply.body).is_empty(), "{reply:?}");
    assert_eq!(
        reply.message()["result"]["isError"],
        json!(false),
        "{reply:?}"
    );

    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    let set = raw
        .request(
            Some(KEY),
            &session,
            "2025-11-25",
            "logging/setLevel",
            json!({"level": "info"}),
        )
        .await;
    assert!(set.message()["result"].is_object(), "{set:?}");
    // rmcp sends a session's notifications other than progress on its standalone stream.
    let mut stream = reqwest::Client::new()
        .get(&gateway.url)
        .header("accept", "text/event-stream")
        .header("authorization", format!("Bearer {KEY}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("GET stream");
    assert_eq!(stream.status(), 200, "{stream:?}");
    let reply = raw
        .request(Some(KEY), &session, "2025-11-25", "tools/call", call)
        .await;
    assert_eq!(
        reply.message()["result"]["content"][0]["text"],
        json!("done"),
        "{reply:?}"
    );
    let mut seen = log_messages(&reply.body);
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.len() < 2 {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "log messages did not arrive; got {seen:?}\n{}",
                    gateway.log()
                )
            })
            .expect("stream readable")
            .expect("stream open");
        text.push_str(&String::from_utf8_lossy(&chunk));
        seen = log_messages(&text);
    }
    let levels: Vec<&Value> = seen.iter().map(|m| &m["params"]["level"]).collect();
    assert_eq!(levels, [&json!("info"), &json!("warning")], "{seen:?}");
    assert_eq!(seen[0]["params"]["data"], json!("step at info"));
}

/// Proves: a stdio upstream's log messages, which carry no relation to any call (one stream for
/// everything), reach the session whose call is the only one in flight, at or above its level;
/// all three of the demo's `test_tool_with_logging` messages, the last one sent just before the
/// answer included; on 2026-07-28 (the call asks for every level in its `_meta`) and on
/// 2025-11-25 (`logging/setLevel`). Fails without `upstream::inflight` (they went to the
/// gateway's log only).
#[tokio::test]
async fn a_stdio_upstreams_log_messages_reach_the_only_call_in_flight() {
    for over in [Over::Stdio { legacy: false }, Over::Stdio { legacy: true }] {
        stdio_log_messages_reach_the_call(over).await;
    }
}

async fn stdio_log_messages_reach_the_call(over: Over<'_>) {
    let contract = "upstream: demo\ntools:\n  test_tool_with_logging:\n    privilege: read\n    input: { type: object }\n";
    let gateway = Gateway::start(&over.config(&callers(&[])), &[("demo.yaml", contract)]);
    gateway.wait_tools_joined("demo", &["test_tool_with_logging"]);
    over.assert_spoken(&gateway);
    let over = over.name();
    let raw = Raw::new(&gateway.url);
    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    let set = raw
        .request(
            Some(KEY),
            &session,
            "2025-11-25",
            "logging/setLevel",
            json!({"level": "info"}),
        )
        .await;
    assert!(set.message()["result"].is_object(), "{over}: {set:?}");
    let mut stream = reqwest::Client::new()
        .get(&gateway.url)
        .header("accept", "text/event-stream")
        .header("authorization", format!("Bearer {KEY}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("GET stream");
    assert_eq!(stream.status(), 200, "{stream:?}");
    let call = json!({"name": "test_tool_with_logging", "arguments": {}});
    let reply = raw
        .request(Some(KEY), &session, "2025-11-25", "tools/call", call)
        .await;
    assert_eq!(
        reply.message()["result"]["isError"],
        json!(false),
        "{reply:?}"
    );
    let on_call_stream = log_messages(&reply.body);
    let mut seen = on_call_stream.clone();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.len() < 3 {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{over}: log messages did not arrive; got {seen:?}\n{}",
                    gateway.log()
                )
            })
            .expect("stream readable")
            .expect("stream open");
        text.push_str(&String::from_utf8_lossy(&chunk));
        seen = on_call_stream
            .iter()
            .cloned()
            .chain(log_messages(&text))
            .collect();
    }
    let data: Vec<&Value> = seen.iter().map(|m| &m["params"]["data"]).collect();
    assert_eq!(
        data,
        [
            &json!("Tool execution started"),
            &json!("Tool processing data"),
            &json!("Tool execution completed")
        ],
        "{over}: {seen:?}"
    );
}

/// Proves: a call to a 2026-07-28 stdio upstream (through rmcp's client, which has no
/// `logging/setLevel` to send on that protocol) asks in its own `_meta` for every log level,
/// next to the protocol version rmcp adds, on both entry paths (a plain session call, and one
/// rmcp serves because it asks for progress), so that each client hears what its own level
/// lets through. Fails without the level in `by_peer` (the upstream saw no `logLevel`, and
/// would log at its own default).
#[tokio::test]
async fn a_2026_stdio_call_asks_for_every_log_level_in_its_meta() {
    let over = Over::Stdio { legacy: false };
    let contract = format!("upstream: demo\ntools:\n{}", crate::relays::meta::ECHO_META);
    let gateway = Gateway::start(&over.config(&callers(&[])), &[("demo.yaml", &contract)]);
    gateway.wait_tools_joined("demo", &["echo_meta"]);
    over.assert_spoken(&gateway);
    let raw = Raw::new(&gateway.url);
    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    for meta in [json!({}), json!({"progressToken": "p-1"})] {
        let params = json!({"name": "echo_meta", "arguments": {}, "_meta": meta});
        let reply = raw
            .request(Some(KEY), &session, "2025-11-25", "tools/call", params)
            .await;
        let seen = &reply.message()["result"]["structuredContent"]["meta"];
        assert_eq!(
            seen["io.modelcontextprotocol/logLevel"],
            json!("debug"),
            "{meta}: {reply:?}"
        );
        assert_eq!(
            seen["io.modelcontextprotocol/protocolVersion"],
            json!("2026-07-28"),
            "{meta}: {reply:?}"
        );
    }
}
