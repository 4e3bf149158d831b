//! The gateway between real third-party MCP peers: upstreams `@modelcontextprotocol/server-everything`
//! (Streamable HTTP), `mcp-server-time` and `@modelcontextprotocol/server-filesystem` (stdio), and
//! clients the official Python SDKs (`mcp` 2.3.0 in both handshake modes, `mcp` 1.30.0), the
//! official TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2) and the MCP Inspector CLI. The peers are installed into `.peers/` by `tests/setup-peers.sh`; a missing peer
//! fails the test with a pointer to that script. `peers/real_servers.rs`: each of the MCP project's
//! servers from `init` to `serve`, answering every client as it does directly.

use crate::common;
#[path = "peers/real_servers.rs"]
pub(crate) mod real_servers;
#[path = "peers/stdio_protocols.rs"]
mod stdio_protocols;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::peers::{CLIENT_DEADLINE, PyClient, mcp_server_time, node_bin, ts_client};
use common::process::run;
use common::{
    Gateway, KEY, Raw, callers, free_port, result_text, sorted_tool_names, stateless_call_body,
    stateless_call_headers,
};
use serde_json::{Value, json};

/// `@modelcontextprotocol/server-everything` serving Streamable HTTP on a free port, killed on drop.
struct Everything {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Everything {
    /// Starts it and waits until it listens (retrying on another port if it lost a port race).
    fn start() -> Everything {
        let bin = node_bin("mcp-server-everything");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut logs = String::new();
        for attempt in 0..3 {
            let port = free_port();
            let log_path = dir.path().join(format!("everything-{attempt}.log"));
            let log = std::fs::File::create(&log_path).expect("log file");
            let mut child = Command::new(&bin)
                .arg("streamableHttp")
                .env("PORT", port.to_string())
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log handle"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            // Polls the log and the port with a deadline (not a wait_until: a lost port race
            // retries on another port rather than failing).
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let listening = log.contains(&format!("listening on port {port}"))
                    && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
                if listening {
                    return Everything {
                        child,
                        url: format!("http://127.0.0.1:{port}/mcp"),
                        _dir: dir,
                    };
                }
                let exited = child.try_wait().ok().flatten().is_some();
                if exited || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    logs.push_str(&format!("attempt {attempt} (port {port}):\n{log}\n"));
                    break;
                }
                std::thread::sleep(common::POLL_EVERY);
            }
        }
        panic!("mcp-server-everything did not start listening:\n{logs}");
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn weather_input() -> Value {
    json!({"type": "object",
        "properties": {"location": {"type": "string", "enum": ["Chicago", "New York"], "description": "City name"}},
        "required": ["location"], "additionalProperties": false})
}

/// `schema` as the gateway publishes it when the upstream declared a dialect (every
/// server-everything and server-filesystem tool does): with the 2020-12 `$schema`.
fn published(mut schema: Value) -> Value {
    schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    schema
}

fn weather_output() -> Value {
    json!({"type": "object",
        "properties": {
            "temperature": {"type": "number", "minimum": -60, "maximum": 60},
            "conditions": {"type": "string", "maxLength": 64},
            "humidity": {"type": "number", "minimum": 0, "maximum": 100}},
        "required": ["temperature", "conditions", "humidity"], "additionalProperties": false})
}

fn add_input() -> Value {
    let bounded = json!({"type": "number", "minimum": -1000, "maximum": 1000});
    json!({"type": "object", "properties": {"a": bounded, "b": bounded},
        "required": ["a", "b"], "additionalProperties": false})
}

/// The server-everything gateway: `get-structured-content` as `get_weather`, `get-sum` as `add`;
/// the upstream's other tools (echo, get-env, ...) have no contract. Schemas are written as JSON,
/// which is YAML too.
fn start_everything_gateway() -> (Everything, Gateway) {
    let upstream = Everything::start();
    let gw = everything_gateway(&upstream, true);
    (upstream, gw)
}

/// The server-everything gateway in front of `upstream`, its tools/calls through the forwarder
/// (`forwarder`) or through rmcp's client.
fn everything_gateway(upstream: &Everything, forwarder: bool) -> Gateway {
    let switch = if forwarder {
        ""
    } else {
        "    forwarder: false\n"
    };
    let config = format!(
        "upstreams:\n  everything:\n    url: {}\n{switch}{}",
        upstream.url,
        callers(&[])
    );
    let contract = format!(
        "upstream: everything\ntools:\n  get_weather:\n    upstream_tool: get-structured-content\n    \
         description: Current weather for Chicago or New York.\n    privilege: read\n    \
         input: {}\n    output: {}\n  add:\n    upstream_tool: get-sum\n    \
         description: Add two numbers between -1000 and 1000.\n    privilege: read\n    input: {}\n",
        weather_input(),
        weather_output(),
        add_input()
    );
    let tools = ["get_weather", "add"];
    start_joined(
        &config,
        ("everything.yaml", &contract),
        "everything",
        &tools,
    )
}

/// Proves: in front of a server nobody here wrote (server-everything over Streamable HTTP), the
/// forwarder and rmcp's client give the same answers, judged by the official TypeScript SDK and
/// the Python SDKs 2.x (2026-07-28 and 2025-11-25) and 1.x: in-contract calls (the SDKs check the
/// structured result against the published output schema), refused arguments, unknown tools, and
/// a call after the refusals. Any difference in what either path returns fails the comparison.
#[test]
fn the_forwarder_and_rmcps_client_answer_alike_in_front_of_server_everything() {
    let upstream = Everything::start();
    let (on, off) = (
        everything_gateway(&upstream, true),
        everything_gateway(&upstream, false),
    );
    let calls = json!([
        {"op": "list"},
        {"op": "call", "name": "get_weather", "arguments": {"location": "Chicago"}},
        {"op": "call", "name": "get_weather", "arguments": {"location": "New York"}},
        {"op": "call", "name": "get_weather", "arguments": {"location": "Los Angeles"}},
        {"op": "call", "name": "add", "arguments": {"a": 5000, "b": 1}},
        {"op": "call", "name": "echo", "arguments": {"message": "hi"}},
        {"op": "call", "name": "add", "arguments": {"a": 2, "b": 40}},
    ]);
    let ts = |gw: &Gateway| ts_client(&gw.url, KEY, &json!({"steps": calls}))["results"].clone();
    let py = |client: PyClient, gw: &Gateway| client.run(&gw.url, KEY, &calls)["results"].clone();
    for (client, through_on, through_off) in [
        ("TypeScript SDK", ts(&on), ts(&off)),
        (
            "Python SDK 2 auto",
            py(PyClient::V2("auto"), &on),
            py(PyClient::V2("auto"), &off),
        ),
        (
            "Python SDK 2 legacy",
            py(PyClient::V2("legacy"), &on),
            py(PyClient::V2("legacy"), &off),
        ),
        (
            "Python SDK 1",
            py(PyClient::V1, &on),
            py(PyClient::V1, &off),
        ),
    ] {
        let steps = through_on.as_array().map_or(0, Vec::len);
        assert_eq!(steps, 7, "{client}: every step answered: {through_on}");
        assert_eq!(through_on[1]["is_error"], false, "{client}: {through_on}");
        assert_eq!(
            through_on, through_off,
            "{client}: the forwarder (left) and rmcp's client (right) answered differently"
        );
    }
}

/// A gateway on `config` and one contract file, once `upstream` is up and its `tools` joined.
fn start_joined(config: &str, contract: (&str, &str), upstream: &str, tools: &[&str]) -> Gateway {
    let gw = Gateway::start(config, &[contract]);
    gw.wait_tools_joined(upstream, tools);
    gw
}

/// Asserts that /readyz says `tool`'s contract is proven narrower than its upstream tool.
fn assert_proven_narrower(gw: &Gateway, tool: &str) {
    let ready = gw.readyz();
    let verdict = &ready["tools"][tool]["narrowing"];
    assert_eq!(verdict, "proven narrower", "{tool}: {ready}");
}

/// The tool named `name` in a driver's `{"tools": [...]}` step result.
fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("{name} is not listed: {list}"))
}

/// Asserts a driver's call result is a tool error naming `path` and `rule` but not `hidden`.
fn assert_rejected(result: &Value, path: &str, rule: &str, hidden: &str) {
    let text = result["content"].to_string();
    assert_eq!(result["is_error"], true, "not rejected: {result}");
    assert!(text.contains(path) && text.contains(rule), "{result}");
    assert!(!text.contains(hidden), "the value is echoed: {text}");
    let error_type = &result["structured_content"]["error"]["type"];
    assert!(
        error_type == "invalid_arguments" || error_type == "invalid_result",
        "{result}"
    );
}

/// Asserts a driver's step failed with JSON-RPC -32602 `Unknown tool: NAME`.
fn assert_unknown(result: &Value, name: &str) {
    let expected = json!({"code": -32602, "message": format!("Unknown tool: {name}")});
    assert_eq!(result["error"], expected, "{result}");
}

/// One Python SDK client against gateway → server-everything: the list holds only the contracted
/// tools with the contract's schemas, in-contract calls return the upstream's structured result,
/// out-of-contract calls and unknown tools are refused without ending the session, and a client
/// without (or with a wrong) API key cannot connect (HTTP 401).
fn python_client_through_gateway(client: PyClient, expected_version: &str) {
    let (_upstream, gw) = start_everything_gateway();
    let steps = json!([
        {"op": "list"},
        {"op": "call", "name": "get_weather", "arguments": {"location": "Chicago"}},
        {"op": "call", "name": "get_weather", "arguments": {"location": "Los Angeles"}},
        {"op": "call", "name": "add", "arguments": {"a": 5000, "b": 1}},
        {"op": "call", "name": "echo", "arguments": {"message": "hi"}},
        {"op": "call", "name": "get-structured-content", "arguments": {"location": "Chicago"}},
        {"op": "call", "name": "add", "arguments": {"a": 2, "b": 40}},
    ]);
    let out = client.run(&gw.url, KEY, &steps);
    let log = || gw.log();
    assert_eq!(out["protocol_version"], expected_version, "{out}");
    assert!(out.get("aborted").is_none(), "{out}\n{}", log());
    let r = &out["results"];

    assert_eq!(sorted_tool_names(&r[0]), ["add", "get_weather"], "{}", r[0]);
    let weather = tool(&r[0], "get_weather");
    assert_eq!(
        weather["inputSchema"],
        published(weather_input()),
        "{weather}"
    );
    assert_eq!(
        weather["outputSchema"],
        common::published_output(&weather_output()),
        "{weather}"
    );
    let description = "Current weather for Chicago or New York.";
    let shown = weather["description"].as_str().unwrap_or_default();
    assert_eq!(common::without_error_types(shown), description, "{weather}");
    assert!(shown.ends_with("upstream_error."), "{weather}");
    assert_eq!(tool(&r[0], "add")["inputSchema"], published(add_input()));

    assert_eq!(r[1]["is_error"], false, "{}\n{}", r[1], log());
    let chicago = json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82});
    assert_eq!(r[1]["structured_content"], chicago, "{}", r[1]);
    // server-everything itself accepts Los Angeles: the refusal is the gateway's.
    assert_rejected(&r[2], "/location", "enum", "Los Angeles");
    assert_rejected(&r[3], "/a", "maximum", "5000");
    assert_unknown(&r[4], "echo");
    assert_unknown(&r[5], "get-structured-content");
    // The session survived the refusals (mcp 1.x would abort on an HTTP 4xx).
    assert_eq!(r[6]["is_error"], false, "{}", r[6]);
    assert!(r[6]["content"].to_string().contains("42"), "{}", r[6]);

    for key in ["-", "wrong-key"] {
        let refused = client.run(&gw.url, key, &json!([{"op": "list"}]));
        assert_eq!(refused["http_status"], 401, "key {key}: {refused}");
        assert!(refused["connect_error"].is_string(), "{refused}");
        assert!(refused.get("results").is_none(), "{refused}");
    }
}

/// Proves: the Python SDK `mcp` 2.3.0 in its default `auto` mode negotiates MCP 2026-07-28 with the
/// gateway (stateless `server/discover`), lists and calls server-everything's tools only as the
/// contract allows, gets -32602 for unknown tools without losing the connection, and gets 401
/// without an API key.
#[test]
fn python_sdk_2_auto_mode_speaks_2026_through_the_gateway() {
    python_client_through_gateway(PyClient::V2("auto"), "2026-07-28");
}

/// Proves: the same holds for `mcp` 2.3.0 with the legacy `initialize` handshake (2025-11-25, sessions).
#[test]
fn python_sdk_2_legacy_mode_works_through_the_gateway() {
    python_client_through_gateway(PyClient::V2("legacy"), "2025-11-25");
}

/// Proves: the same holds for `mcp` 1.30.0, which ends its session on any HTTP 4xx: the gateway
/// answers refused calls and unknown tools with HTTP 200, so its session survives them.
#[test]
fn python_sdk_1_works_through_the_gateway() {
    python_client_through_gateway(PyClient::V1, "2025-11-25");
}

/// Proves: the official TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2) through the gateway in
/// front of server-everything sees only the contracted tools with the contract's schemas, gets the
/// upstream's structured result for in-contract calls (which the SDK checks against the published
/// output schema), a tool error naming the path and rule for out-of-contract ones (the value not
/// echoed), -32602 for tools without a contract, keeps its session through the refusals, and
/// cannot connect without a valid API key.
#[test]
fn typescript_sdk_works_through_the_gateway() {
    let (_upstream, gw) = start_everything_gateway();
    let steps = json!({"steps": [
        {"op": "list"},
        {"op": "call", "name": "get_weather", "arguments": {"location": "Chicago"}},
        {"op": "call", "name": "get_weather", "arguments": {"location": "Los Angeles"}},
        {"op": "call", "name": "add", "arguments": {"a": 5000, "b": 1}},
        {"op": "call", "name": "echo", "arguments": {"message": "hi"}},
        {"op": "call", "name": "add", "arguments": {"a": 2, "b": 40}},
    ]});
    let out = ts_client(&gw.url, KEY, &steps);
    assert_eq!(out["protocol_version"], "2025-11-25", "{out}");
    let r = &out["results"];
    assert_eq!(sorted_tool_names(&r[0]), ["add", "get_weather"], "{}", r[0]);
    let weather = tool(&r[0], "get_weather");
    assert_eq!(
        weather["inputSchema"],
        published(weather_input()),
        "{weather}"
    );
    assert_eq!(
        weather["outputSchema"],
        common::published_output(&weather_output()),
        "{weather}"
    );

    assert_eq!(r[1]["is_error"], false, "{}\n{}", r[1], gw.log());
    let chicago = json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82});
    assert_eq!(r[1]["structured_content"], chicago, "{}", r[1]);
    assert_rejected(&r[2], "/location", "enum", "Los Angeles");
    assert_rejected(&r[3], "/a", "maximum", "5000");
    assert_eq!(r[4]["error"]["code"], -32602, "{}", r[4]);
    let message = r[4]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.ends_with("Unknown tool: echo"), "{}", r[4]);
    assert_eq!(r[5]["is_error"], false, "{}", r[5]);
    assert!(r[5]["content"].to_string().contains("42"), "{}", r[5]);

    for key in ["-", "wrong-key"] {
        let refused = ts_client(&gw.url, key, &json!({"steps": [{"op": "list"}]}));
        assert_eq!(refused["connect_error_code"], 401, "key {key}: {refused}");
        assert!(refused.get("results").is_none(), "{refused}");
    }
}

/// A stateless MCP 2026-07-28 `tools/call` (no session; per-request `_meta` and SEP-2243 headers).
async fn stateless_call(raw: &Raw, name: &str, arguments: Value) -> common::Reply {
    let body = stateless_call_body(json!(1), name, arguments);
    let headers = stateless_call_headers(KEY, name);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    raw.post(&headers, &body.to_string()).await
}

/// Proves: server-everything's draft-07 schemas narrow to "proven narrower" in /readyz; its tools
/// without a contract, and contracted tools under their upstream names, answer -32602 `Unknown
/// tool` both in a 2025-11-25 session and in a stateless 2026-07-28 request (HTTP 200 there too).
#[tokio::test]
async fn server_everything_is_narrowed_and_its_other_tools_are_invisible() {
    let (_upstream, gw) = start_everything_gateway();
    let ready = gw.readyz();
    for name in ["get_weather", "add"] {
        let tool = &ready["tools"][name];
        let verdict = tool["state"] == "enabled" && tool["narrowing"] == "proven narrower";
        assert!(verdict, "{name}: {ready}");
    }
    let count = ready["upstreams"]["everything"]["tools"].as_u64();
    assert!(count >= Some(13), "{ready}");

    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    let listed = raw
        .request(Some(KEY), &session, "2025-11-25", "tools/list", json!({}))
        .await
        .message();
    assert_eq!(
        sorted_tool_names(&listed["result"]),
        ["add", "get_weather"],
        "{listed}"
    );
    // Uncontracted tools, contracted ones under their upstream names, and a name nobody has.
    for name in "echo get-env get-sum get-structured-content nope".split(' ') {
        let params = json!({"name": name, "arguments": {}});
        let in_session = raw
            .request(Some(KEY), &session, "2025-11-25", "tools/call", params)
            .await;
        let stateless = stateless_call(&raw, name, json!({})).await;
        let sessionless = stateless.header("mcp-session-id").is_none();
        assert!(sessionless, "{stateless:?}");
        for reply in [in_session, stateless] {
            assert_eq!(reply.status, 200, "{name}: {reply:?}");
            assert_unknown(&reply.message(), name);
        }
    }
    let reply = stateless_call(&raw, "add", json!({"a": 2, "b": 40})).await;
    let result = &reply.message()["result"];
    assert_ne!(result["isError"], true, "{reply:?}\n{}", gw.log());
    // 2026-07-28 results carry resultType; the Python SDK 2.x refuses results without it.
    assert_eq!(result["resultType"], "complete", "{reply:?}");
    assert!(result_text(result).contains("42"), "{reply:?}");
}

/// Proves: the MCP Inspector CLI (v2.12) lists and calls the gateway's tools with an API key in
/// `--header`: only contracted tools with the contract's schemas; results come back structured;
/// a refused call exits as a tool error; without or with a wrong key it fails with auth_required,
/// saying which of the two it is.
#[test]
fn mcp_inspector_cli_lists_and_calls_through_the_gateway() {
    let (_upstream, gw) = start_everything_gateway();
    // Its own HOME: the Inspector keeps a catalog and OAuth state under ~/.mcp-inspector.
    let home = tempfile::tempdir().expect("tempdir");
    let inspector = |args: &[&str], auth: Option<&str>| {
        let mut cmd = Command::new(node_bin("mcp-inspector"));
        cmd.env("HOME", home.path())
            .args(["--cli", &gw.url, "--format", "json", "--stored-auth-only"])
            .args(args);
        if let Some(auth) = auth {
            cmd.args(["--header", &format!("Authorization: Bearer {auth}")]);
        }
        run(&mut cmd, CLIENT_DEADLINE)
    };

    let listed = inspector(&["--method", "tools/list"], Some(KEY));
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let listed = listed.json();
    assert_eq!(
        sorted_tool_names(&listed["result"]),
        ["add", "get_weather"],
        "{listed}"
    );
    let weather = tool(&listed["result"], "get_weather");
    assert_eq!(
        weather["inputSchema"],
        published(weather_input()),
        "{weather}"
    );
    assert_eq!(
        weather["outputSchema"],
        common::published_output(&weather_output()),
        "{weather}"
    );

    let call = |tool: &str, extra: &[&str]| {
        let args = [&["--method", "tools/call", "--tool-name", tool], extra].concat();
        inspector(&args, Some(KEY))
    };
    // Without --tool-arg the required location is missing: the contract refuses the call.
    let bare = call("get_weather", &[]);
    assert_eq!(bare.code, Some(5), "{}", bare.stderr);
    assert!(bare.stdout.contains("required"), "{}", bare.stdout);

    let new_york = call("get_weather", &["--tool-arg", "location=New York"]);
    assert_eq!(new_york.code, Some(0), "{}\n{}", new_york.stderr, gw.log());
    let result = &new_york.json()["result"];
    let expected = json!({"temperature": 33, "conditions": "Cloudy", "humidity": 82});
    assert_eq!(result["structuredContent"], expected, "{result}");

    let sum = call("add", &["--tool-args-json", r#"{"a":2,"b":40}"#]);
    assert_eq!(sum.code, Some(0), "{}", sum.stderr);
    let text = result_text(&sum.json()["result"]);
    assert!(text.contains("42"), "{}", sum.stdout);

    let refused = call("get_weather", &["--tool-arg", "location=Los Angeles"]);
    assert_eq!(refused.code, Some(5), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("tool_is_error"),
        "{}",
        refused.stderr
    );
    let text = result_text(&refused.json()["result"]);
    let named = text.contains("/location") && text.contains("enum");
    assert!(named && !text.contains("Los Angeles"), "{text}");

    // What the Inspector tells its user: a wrong key is "not known" (the 401 says
    // `invalid_token`), a missing one asks for credentials (docs/clients.md).
    for (auth, says) in [
        (None, "requires credentials"),
        (Some("wrong-key"), "not known to this gateway"),
    ] {
        let denied = inspector(&["--method", "tools/list"], auth);
        assert_eq!(denied.code, Some(3), "{auth:?}: {}", denied.stderr);
        assert!(denied.stderr.contains("auth_required"), "{}", denied.stderr);
        assert!(denied.stderr.contains(says), "{auth:?}: {}", denied.stderr);
    }
}

/// The JSON Schema `pattern` (ECMA-262 regex) matching `text` literally.
pub(crate) fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\^$.|?*+()[]{}/".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// Proves: over stdio, `mcp-server-time` is narrowed to a timezone enum: an allowed timezone
/// returns its real structured result (valid against the contract's output schema, checked by the
/// gateway and again by the Python SDK); another is refused without being echoed; a contract whose
/// output schema the real result violates gets a tool error carrying none of it; the upstream's
/// uncontracted `convert_time` is unknown.
#[test]
fn mcp_server_time_over_stdio_is_narrowed_and_its_results_checked() {
    let config = format!(
        "upstreams:\n  time:\n    command: {}\n    args: [--local-timezone, UTC]\n{}",
        mcp_server_time().display(),
        callers(&[])
    );
    let output = |timezone: Value| {
        json!({"type": "object", "properties": {
            "timezone": timezone,
            "datetime": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+[+-][0-9]{2}:[0-9]{2}$"},
            "day_of_week": {"enum": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]},
            "is_dst": {"type": "boolean"}},
            "required": ["timezone", "datetime", "day_of_week", "is_dst"], "additionalProperties": false})
    };
    let zones = |zones: Value| {
        json!({"type": "object", "properties": {"timezone": {"type": "string", "enum": zones}},
            "required": ["timezone"], "additionalProperties": false})
    };
    let contract = format!(
        "upstream: time\ntools:\n  get_current_time:\n    privilege: read\n    input: {}\n    output: {}\n  \
         utc_time_mislabeled:\n    upstream_tool: get_current_time\n    privilege: read\n    input: {}\n    output: {}\n",
        zones(json!(["UTC", "Europe/Paris"])),
        output(json!({"enum": ["UTC", "Europe/Paris"]})),
        zones(json!(["UTC"])),
        output(json!({"const": "Europe/Paris"})),
    );
    let tools = ["get_current_time", "utc_time_mislabeled"];
    let gw = start_joined(&config, ("time.yaml", &contract), "time", &tools);
    assert_proven_narrower(&gw, "get_current_time");

    let call = |name: &str, timezone: &str| json!({"op": "call", "name": name, "arguments": {"timezone": timezone}});
    let steps = json!([
        {"op": "list"},
        call("get_current_time", "Europe/Paris"),
        call("get_current_time", "UTC"),
        call("get_current_time", "America/New_York"),
        call("utc_time_mislabeled", "UTC"),
        {"op": "call", "name": "convert_time", "arguments": {}},
    ]);
    let out = PyClient::V2("auto").run(&gw.url, KEY, &steps);
    assert!(out.get("aborted").is_none(), "{out}");
    let r = &out["results"];
    assert_eq!(
        sorted_tool_names(&r[0]),
        ["get_current_time", "utc_time_mislabeled"]
    );
    for (i, zone) in [(1, "Europe/Paris"), (2, "UTC")] {
        assert_eq!(r[i]["is_error"], false, "{}\n{}", r[i], gw.log());
        let s = &r[i]["structured_content"];
        assert_eq!(s["timezone"], zone, "{s}");
        assert!(s["datetime"].is_string() && s["is_dst"].is_boolean(), "{s}");
    }
    assert_rejected(&r[3], "/timezone", "enum", "America/New_York");
    let datetime = r[2]["structured_content"]["datetime"]
        .as_str()
        .unwrap_or("");
    assert_rejected(&r[4], "/timezone", "const", &datetime[..10]);
    assert_unknown(&r[5], "convert_time");
}

/// Proves: over stdio, `server-filesystem` rooted at a temporary folder is reachable only through
/// `read_text_file` narrowed by a `pattern` to the folder's `public/` files: such a file is read
/// (structured result), while `private/secret.txt` and a `public/../` escape are refused by the
/// gateway, never echoed and never read, although the upstream itself would serve them (the
/// unconstrained control contract `read_any` reads the secret); its other tools are unknown.
#[test]
fn mcp_server_filesystem_reads_only_what_the_pattern_allows() {
    const SECRET: &str = "PRIVATE-SECRET-CONTENT";
    let root_dir = tempfile::tempdir().expect("tempdir");
    // The server resolves its root with realpath: use the same spelling in the pattern.
    let root: PathBuf = std::fs::canonicalize(root_dir.path()).expect("canonical root");
    for (dir, file, text) in [
        ("public", "note.txt", "public note\n"),
        ("private", "secret.txt", SECRET),
    ] {
        std::fs::create_dir(root.join(dir)).expect("mkdir");
        std::fs::write(root.join(dir).join(file), text).expect("write");
    }
    let at = |rel: &str| root.join(rel).display().to_string();
    let root_text = root.display().to_string();
    let pattern = format!("^{}/public/[A-Za-z0-9_-]+\\.txt$", regex_escape(&root_text));
    let config = format!(
        "upstreams:\n  files:\n    command: {}\n    args: [{}]\n{}",
        node_bin("mcp-server-filesystem").display(),
        json!(root_text),
        callers(&[])
    );
    let read_input = |path: Value| {
        json!({"type": "object", "properties": {"path": path},
            "required": ["path"], "additionalProperties": false})
    };
    let output = json!({"type": "object", "properties": {"content": {"type": "string", "maxLength": 4096}},
        "required": ["content"]});
    let public_input = read_input(
        json!({"type": "string", "pattern": pattern, "description": "A file in public/"}),
    );
    let contract = format!(
        "upstream: files\ntools:\n  read_text_file:\n    privilege: read\n    input: {}\n    output: {output}\n  \
         read_any:\n    upstream_tool: read_text_file\n    privilege: read\n    input: {}\n",
        public_input,
        read_input(json!({"type": "string"})),
    );
    let tools = ["read_text_file", "read_any"];
    let gw = start_joined(&config, ("files.yaml", &contract), "files", &tools);
    assert_proven_narrower(&gw, "read_text_file");

    let read =
        |name: &str, path: String| json!({"op": "call", "name": name, "arguments": {"path": path}});
    let steps = json!([
        {"op": "list"},
        read("read_text_file", at("public/note.txt")),
        read("read_text_file", at("private/secret.txt")),
        read("read_text_file", at("public/../private/secret.txt")),
        read("read_any", at("private/secret.txt")),
        {"op": "call", "name": "write_file", "arguments": {"path": at("public/x.txt"), "content": "x"}},
        {"op": "call", "name": "list_directory", "arguments": {"path": root_text}},
    ]);
    let out = PyClient::V2("legacy").run(&gw.url, KEY, &steps);
    assert!(out.get("aborted").is_none(), "{out}");
    let r = &out["results"];
    assert_eq!(
        sorted_tool_names(&r[0]),
        ["read_any", "read_text_file"],
        "{}",
        r[0]
    );
    assert_eq!(
        tool(&r[0], "read_text_file")["inputSchema"],
        published(public_input)
    );

    assert_eq!(r[1]["is_error"], false, "{}\n{}", r[1], gw.log());
    assert_eq!(
        r[1]["structured_content"],
        json!({"content": "public note\n"})
    );
    for escape in [&r[2], &r[3]] {
        assert_rejected(escape, "/path", "pattern", "private");
        assert!(!escape.to_string().contains(SECRET), "{escape}");
    }
    // Control: the upstream serves the secret when the contract lets the call through.
    assert_eq!(r[4]["is_error"], false, "{}", r[4]);
    assert!(r[4].to_string().contains(SECRET), "{}", r[4]);
    assert_unknown(&r[5], "write_file");
    assert_unknown(&r[6], "list_directory");
    assert!(!Path::new(&at("public/x.txt")).exists(), "write_file ran");
}
