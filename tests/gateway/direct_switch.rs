//! `direct_calls: false` hands every request to rmcp. The gateway must answer exactly alike
//! either way, for every method it serves, and its own path must answer on the MCP `path` only.

use std::time::Duration;

use serde_json::{Value, json};

use super::common::{self, Gateway, KEY, demo_stdio_config, hash_key};

const BOB: &str = "test-key-bob";
const ACCEPT: &str = "application/json, text/event-stream";

const CONTRACT: &str = r#"upstream: demo
tools:
  echo:
    privilege: read
    input:
      type: object
      properties: { message: { type: string, maxLength: 20 } }
      required: [message]
      additionalProperties: false
  add:
    privilege: read
  fail:
    privilege: read
"#;

/// alice may call every tool, bob only `add`; `direct_calls` as given.
fn start(direct_calls: bool) -> Gateway {
    let callers = format!(
        "{}  - name: bob\n    api_key_sha256: {}\n    tools: [add]\n",
        common::callers(&[]),
        hash_key(BOB)
    );
    let config = demo_stdio_config(&callers, &format!("direct_calls: {direct_calls}\n"));
    let gw = Gateway::spawn(
        &config,
        &[("demo.yaml", CONTRACT)],
        &[("NARROWGATE_LOG", "info,narrowgate::mcp::direct=debug")],
    );
    gw.wait_ready(Duration::from_secs(60));
    gw
}

/// One HTTP exchange as the comparison sees it.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    /// Every header but `date` and `mcp-session-id` (which differ between any two runs).
    headers: Vec<(String, String)>,
    body: String,
}

/// One request of the script; `{session}`/`{bob_session}` in a header value stand for the
/// sessions the script opened on the gateway it runs against.
struct Step {
    what: &'static str,
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Option<String>,
}

fn step(what: &'static str, headers: Vec<(&'static str, String)>, body: Value) -> Step {
    Step {
        what,
        method: "POST",
        path: "/mcp",
        headers,
        body: Some(body.to_string()),
    }
}

/// The headers of a request by `key` in the session named by `session` (a placeholder).
fn in_session(key: &str, session: &str) -> Vec<(&'static str, String)> {
    vec![
        ("authorization", format!("Bearer {key}")),
        ("accept", ACCEPT.to_string()),
        ("content-type", "application/json".to_string()),
        ("mcp-session-id", session.to_string()),
        ("mcp-protocol-version", "2025-11-25".to_string()),
    ]
}

/// The headers of a stateless 2026-07-28 request by `key`.
fn stateless(key: &str, method: &str, name: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("authorization", format!("Bearer {key}")),
        ("accept", ACCEPT.to_string()),
        ("content-type", "application/json".to_string()),
        ("mcp-protocol-version", "2026-07-28".to_string()),
        ("mcp-method", method.to_string()),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name.to_string()));
    }
    headers
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "switch-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}})
}

fn call(id: u32, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

fn stateless_call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "s-1", "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta()}})
}

fn initialize(key: &str) -> Step {
    step(
        "initialize",
        vec![
            ("authorization", format!("Bearer {key}")),
            ("accept", ACCEPT.to_string()),
            ("content-type", "application/json".to_string()),
        ],
        serde_json::from_str(&common::initialize_body("2025-11-25")).expect("JSON"),
    )
}

/// Every method the gateway serves, the refusals of its layers, and the requests rmcp refuses.
fn script() -> Vec<Step> {
    let s = "{session}";
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let mut steps = vec![
        initialize(KEY),
        step(
            "notifications/initialized",
            in_session(KEY, s),
            initialized.clone(),
        ),
        step(
            "ping",
            in_session(KEY, s),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        ),
        step(
            "tools/list",
            in_session(KEY, s),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ),
        step(
            "tools/call ok",
            in_session(KEY, s),
            call(3, "echo", json!({"message": "hi"})),
        ),
        step(
            "tools/call rejected",
            in_session(KEY, s),
            call(
                4,
                "echo",
                json!({"message": "far too long for the contract"}),
            ),
        ),
        step(
            "tools/call upstream error",
            in_session(KEY, s),
            call(5, "fail", json!({})),
        ),
        step(
            "tools/call unknown",
            in_session(KEY, s),
            call(6, "no_such_tool", json!({})),
        ),
        initialize(BOB),
        step(
            "bob: notifications/initialized",
            in_session(BOB, "{bob_session}"),
            initialized,
        ),
        step(
            "tools/call forbidden",
            in_session(BOB, "{bob_session}"),
            call(7, "echo", json!({"message": "hi"})),
        ),
        step(
            "another caller's session",
            in_session(BOB, s),
            call(8, "add", json!({"a": 1, "b": 2})),
        ),
        Step {
            body: Some("{not json".to_string()),
            ..step("bad JSON", in_session(KEY, s), json!(null))
        },
    ];
    let mut accept_json_only = in_session(KEY, s);
    accept_json_only[1].1 = "application/json".to_string();
    steps.push(step(
        "Accept without SSE",
        accept_json_only,
        call(9, "echo", json!({"message": "hi"})),
    ));
    let mut text_plain = in_session(KEY, s);
    text_plain[2].1 = "text/plain".to_string();
    steps.push(step(
        "Content-Type text/plain",
        text_plain,
        call(10, "echo", json!({"message": "hi"})),
    ));
    let mut no_key = in_session(KEY, s);
    no_key.remove(0);
    steps.push(step(
        "no credentials",
        no_key,
        call(11, "echo", json!({"message": "hi"})),
    ));
    let mut bad_host = in_session(KEY, s);
    bad_host.push(("host", "evil.example.com".to_string()));
    steps.push(step(
        "Host not allowed",
        bad_host,
        call(12, "echo", json!({"message": "hi"})),
    ));
    steps.extend([
        step(
            "stateless tools/call ok",
            stateless(KEY, "tools/call", Some("echo")),
            stateless_call("echo", json!({"message": "hi"})),
        ),
        step(
            "stateless tools/call rejected",
            stateless(KEY, "tools/call", Some("echo")),
            stateless_call("echo", json!({"message": 5})),
        ),
        step(
            "stateless tools/call unknown",
            stateless(KEY, "tools/call", Some("no_such_tool")),
            stateless_call("no_such_tool", json!({})),
        ),
        step(
            "stateless tools/call forbidden",
            stateless(BOB, "tools/call", Some("echo")),
            stateless_call("echo", json!({"message": "hi"})),
        ),
        step(
            "stateless tools/call, Mcp-Name of another tool",
            stateless(KEY, "tools/call", Some("add")),
            stateless_call("echo", json!({"message": "hi"})),
        ),
        step(
            "stateless tools/list",
            stateless(KEY, "tools/list", None),
            json!({"jsonrpc": "2.0", "id": "s-2", "method": "tools/list",
                "params": {"_meta": meta()}}),
        ),
        step(
            "stateless ping",
            stateless(KEY, "ping", None),
            json!({"jsonrpc": "2.0", "id": "s-3", "method": "ping",
                "params": {"_meta": meta()}}),
        ),
        Step {
            path: "/elsewhere",
            ..step(
                "stateless tools/call on another path",
                stateless(KEY, "tools/call", Some("echo")),
                stateless_call("echo", json!({"message": "hi"})),
            )
        },
        Step {
            what: "GET without a session",
            method: "GET",
            path: "/mcp",
            headers: vec![
                ("authorization", format!("Bearer {KEY}")),
                ("accept", "text/event-stream".to_string()),
            ],
            body: None,
        },
        Step {
            what: "GET of an unknown session",
            method: "GET",
            path: "/mcp",
            headers: vec![
                ("authorization", format!("Bearer {KEY}")),
                ("accept", "text/event-stream".to_string()),
                ("mcp-session-id", "no-such-session".to_string()),
                ("mcp-protocol-version", "2025-11-25".to_string()),
            ],
            body: None,
        },
        Step {
            what: "DELETE the session",
            method: "DELETE",
            path: "/mcp",
            headers: in_session(KEY, s),
            body: None,
        },
        step(
            "tools/call in the deleted session",
            in_session(KEY, s),
            call(13, "echo", json!({"message": "hi"})),
        ),
    ]);
    steps
}

/// Runs the script against `gw`: what each step saw, by name.
async fn run(gw: &Gateway) -> Vec<(&'static str, Seen)> {
    let client = reqwest::Client::new();
    let mut sessions: Vec<(&str, String)> = vec![];
    let mut seen = vec![];
    for step in script() {
        let url = format!("{}{}", gw.base, step.path);
        let method = reqwest::Method::from_bytes(step.method.as_bytes()).expect("a method");
        let mut request = client.request(method, &url);
        for (name, value) in &step.headers {
            let mut value = value.clone();
            for (placeholder, id) in &sessions {
                value = value.replace(placeholder, id);
            }
            request = request.header(*name, value);
        }
        if let Some(body) = &step.body {
            request = request.body(body.clone());
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        if step.what == "initialize" {
            let id = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .expect("initialize opens a session")
                .to_string();
            let placeholder = match sessions.is_empty() {
                true => "{session}",
                false => "{bob_session}",
            };
            sessions.push((placeholder, id));
        }
        let mut headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(name, _)| *name != "date" && *name != "mcp-session-id")
            .map(|(name, value)| {
                (
                    name.to_string(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        headers.sort();
        let body = without_event_ids(&response.text().await.expect("a body"));
        seen.push((
            step.what,
            Seen {
                status,
                headers,
                body,
            },
        ));
    }
    seen
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The steps the direct path answers in a session.
fn in_session_call(what: &str) -> bool {
    [
        "tools/call ok",
        "tools/call rejected",
        "tools/call upstream error",
        "tools/call forbidden",
        "tools/call unknown",
    ]
    .contains(&what)
}

/// An SSE stream with its event ids blanked: rmcp numbers a session's streams by the requests
/// it served in the session, so they run ahead where it served the calls the direct path
/// answers otherwise (ids that stay unique in the session either way).
fn without_event_ids(body: &str) -> String {
    body.lines()
        .map(|l| match l.starts_with("id: ") {
            true => "id: (event id)",
            false => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The JSON-RPC message of the last `data:` event of an SSE stream.
fn last_event(stream: &str) -> Option<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .next_back()
}

fn answered_directly(gw: &Gateway) -> usize {
    gw.log().matches("tools/call answered without rmcp").count()
}

/// Proves: with the direct path on and off, every step of a conversation using every method
/// the gateway serves (initialize, notifications/initialized, ping, tools/list, tools/call with
/// a result, a rejection, an upstream error, an unknown and a forbidden tool, in a session and
/// stateless), every refusal of the HTTP layers and every request rmcp refuses (bad JSON, wrong
/// headers, GET, DELETE, a deleted session) gets the same status, headers (but the date and
/// session ids) and body (but SSE event ids, and the framing of a session's answer: rmcp's one-event SSE stream,
/// the direct path's JSON, the same message); the switch does switch (the log shows which path answered); and a
/// `tools/call` on another URL path is a 404 either way, run by neither path.
#[tokio::test]
async fn the_direct_path_answers_exactly_as_rmcp_would() {
    let on = start(true);
    let off = start(false);
    let with = run(&on).await;
    let without = run(&off).await;
    assert!(
        answered_directly(&on) >= 5,
        "the direct path answered too few calls; log:\n{}",
        on.log()
    );
    assert_eq!(answered_directly(&off), 0, "log:\n{}", off.log());
    for ((what, a), (_, b)) in with.iter().zip(&without) {
        if a != b && in_session_call(what) {
            // The one documented difference: in a session, rmcp writes its answer as a
            // one-event SSE stream (event ids from its own per-session counter), the direct
            // path as plain JSON (clients accept both). The status and the JSON-RPC message
            // must still be the same.
            assert_eq!(a.status, b.status, "{what}");
            assert_eq!(a.header("content-type"), Some("application/json"), "{what}");
            assert_eq!(
                b.header("content-type"),
                Some("text/event-stream"),
                "{what}"
            );
            assert_eq!(
                serde_json::from_str::<Value>(&a.body).ok(),
                last_event(&b.body),
                "{what}: direct path on (left) and off (right) differ"
            );
            continue;
        }
        assert_eq!(a, b, "{what}: direct path on (left) and off (right) differ");
    }
    let status = |what: &str| with.iter().find(|(w, _)| *w == what).map(|(_, s)| s.status);
    assert_eq!(status("stateless tools/call on another path"), Some(404));
    assert_eq!(status("stateless tools/call ok"), Some(200));
    assert_eq!(status("tools/call ok"), Some(200));
    assert_eq!(status("DELETE the session"), Some(200));
    // One receipt per tools/call the gateway served (the refusals before any version are not
    // calls): the one on another path left none.
    let served = |gw: &Gateway| common::receipts_json(&gw.config_path(), &[]).len();
    assert_eq!(served(&on), served(&off));
}
