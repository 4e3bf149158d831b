//! What real servers answer reaches real clients unchanged, under the contract `narrowgate init`
//! drafts and an operator accepts as is: an image of `@modelcontextprotocol/server-filesystem`'s
//! `read_media_file` and `@modelcontextprotocol/server-everything`'s `get-tiny-image` arrives as
//! the image block the server sent, a text result keeps its shape (not `{"content":"…"}`), through
//! the Python SDK 2.x (both handshakes) and 1.x, the TypeScript SDK and the Inspector CLI; a narrowed `content:` keeps an
//! image out. The peers are installed by `tests/setup-peers.sh`; a missing one fails the test
//! with a pointer to it.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::peers::{PyClient, node_bin, ts_client};
use common::process::run;
use common::{BOB, ConfigDir, Gateway, KEY, Raw, hash_key};
use serde_json::{Value, json};

/// A 1x1 PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// `tools/call` of `tool` with `arguments` sent straight to the stdio server `command args`
/// (no gateway): its `result`, as the reference for what the gateway must pass on.
fn direct_call(command: &Path, args: &[&str], tool: &str, arguments: Value) -> Value {
    direct(
        command,
        args,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// The `result` of one request `method` with `params` sent straight to the stdio server
/// `command args`, after an `initialize` that declares MCP Apps' UI extension (as a host would).
fn direct(command: &Path, args: &[&str], method: &str, params: Value) -> Value {
    let mut child = Command::new(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", command.display()));
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut send = |m: Value| writeln!(stdin, "{m}").expect("write to the server");
    let mut answer_to = |id: i64| loop {
        let line = lines
            .next()
            .expect("the server answers")
            .expect("a line from the server");
        let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if message["id"] == id && message.get("method").is_none() {
            return message;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"extensions": {UI: {"mimeTypes": [APP_MIME]}}},
        "clientInfo": {"name": "direct", "version": "1"}}}),
    );
    answer_to(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}));
    let answer = answer_to(2);
    let _ = child.kill();
    let _ = child.wait();
    answer["result"].clone()
}

/// MCP Apps' extension identifier and the MIME type of its HTML apps.
const UI: &str = "io.modelcontextprotocol/ui";
const APP_MIME: &str = "text/html;profile=mcp-app";

/// `narrowgate init --upstream NAME` against `config`, as an operator runs it: the draft.
fn init_draft(config: &Path, upstream: &str) -> String {
    let ran = run(
        Command::new(common::narrowgate_bin())
            .args(["init", "--upstream", upstream, "--config"])
            .arg(config),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(ran.code, Some(0), "init failed: {}", ran.stderr);
    ran.stdout
}

/// The filesystem server rooted at a fresh folder holding `pic.png` and `note.txt`.
struct Files {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().expect("tempdir");
        // The server resolves its root with realpath: the paths sent use the same spelling.
        let root = std::fs::canonicalize(dir.path()).expect("canonical root");
        let png = base64_decode(PIXEL_PNG);
        std::fs::write(root.join("pic.png"), png).expect("write png");
        std::fs::write(root.join("note.txt"), "first line\nsecond line\n").expect("write note");
        Files { _dir: dir, root }
    }

    fn at(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }
}

/// Standard base64 without padding checks, enough for the fixture above.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let symbols: Vec<u8> = text.bytes().filter(|b| *b != b'=').map(value).collect();
    let mut out = Vec::new();
    for chunk in symbols.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, s)| n | (u32::from(*s) << (18 - 6 * i)));
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// The configuration with both servers as stdio upstreams, `files` and `everything`.
fn config(files: &Files) -> String {
    format!(
        "upstreams:\n  files:\n    command: {}\n    args: [{}]\n  everything:\n    command: {}\n{}",
        node_bin("mcp-server-filesystem").display(),
        json!(files.root.display().to_string()),
        node_bin("mcp-server-everything").display(),
        callers()
    )
}

/// `alice` (key [`KEY`]) may use every tool and read every resource; `bob` (key [`BOB`]) every
/// tool but no resource.
fn callers() -> String {
    format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n    resources: ['*']\n  \
         - name: bob\n    api_key_sha256: {}\n    tools: ['*']\n",
        hash_key(KEY),
        hash_key(BOB)
    )
}

/// What a client's call step printed, as comparable parts: its content blocks and structured
/// content.
fn seen(step: &Value) -> (Value, Value) {
    (
        step["content_blocks"].clone(),
        step["structured_content"].clone(),
    )
}

/// What the server answered directly, as the same parts.
fn sent(result: &Value) -> (Value, Value) {
    (
        result["content"].clone(),
        result
            .get("structuredContent")
            .cloned()
            .unwrap_or(Value::Null),
    )
}

/// Proves: with the contracts `init` drafts accepted unchanged, an image result of
/// server-filesystem's `read_media_file` (which declares an outputSchema) and of
/// server-everything's `get-tiny-image` (which declares none), and a text result of
/// `read_text_file`, reach the Python SDK 2.x (2026-07-28 and legacy handshakes), the Python SDK
/// 1.x, the TypeScript SDK and the Inspector CLI exactly as the server answers them directly: the image as the same image block,
/// the text as the same text block, the structured content the same. (Before content blocks, the
/// image arrived as base64 inside a JSON text and the text as `{"content":"…"}`.)
#[test]
fn images_and_texts_reach_real_clients_as_the_server_sent_them() {
    let files = Files::new();
    let config = config(&files);
    let setup = ConfigDir::new(&config, &[]);
    let drafts = [
        ("files.yaml", init_draft(&setup.config(), "files")),
        ("everything.yaml", init_draft(&setup.config(), "everything")),
    ];
    assert!(
        drafts[0].1.contains("{ type: image }"),
        "init drafts no image for read_media_file:\n{}",
        drafts[0].1
    );
    let contracts: Vec<(&str, &str)> = drafts.iter().map(|(f, t)| (*f, t.as_str())).collect();
    let gw = Gateway::start(&config, &contracts);
    gw.wait_tools_joined("files", &["read_media_file", "read_text_file"]);
    gw.wait_tools_joined("everything", &["get-tiny-image"]);

    let fs_bin = node_bin("mcp-server-filesystem");
    let root = files.root.display().to_string();
    let calls = [
        ("read_media_file", json!({"path": files.at("pic.png")})),
        ("read_text_file", json!({"path": files.at("note.txt")})),
    ];
    let mut expected: Vec<(Value, Value)> = calls
        .iter()
        .map(|(tool, args)| sent(&direct_call(&fs_bin, &[&root], tool, args.clone())))
        .collect();
    expected.push(sent(&direct_call(
        &node_bin("mcp-server-everything"),
        &[],
        "get-tiny-image",
        json!({}),
    )));
    assert_eq!(expected[0].0[0]["type"], "image", "{:?}", expected[0]);
    assert_eq!(expected[0].0[0]["data"], PIXEL_PNG, "{:?}", expected[0]);
    assert!(
        expected[2]
            .0
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "image")),
        "{:?}",
        expected[2]
    );

    let steps: Vec<Value> = calls
        .iter()
        .map(|(tool, args)| json!({"op": "call", "name": tool, "arguments": args}))
        .chain([json!({"op": "call", "name": "get-tiny-image", "arguments": {}})])
        .collect();
    let steps = Value::Array(steps);
    for client in [PyClient::V2("auto"), PyClient::V2("legacy"), PyClient::V1] {
        let out = client.run(&gw.url, KEY, &steps);
        assert!(out.get("aborted").is_none(), "{out}");
        for (i, want) in expected.iter().enumerate() {
            let step = &out["results"][i];
            assert_eq!(step["is_error"], false, "{step}\n{}", gw.log());
            assert_eq!(&seen(step), want, "python step {i} ({out})");
        }
    }
    let out = ts_client(&gw.url, KEY, &json!({"steps": steps}));
    for (i, want) in expected.iter().enumerate() {
        let step = &out["results"][i];
        assert_eq!(step["is_error"], false, "{step}");
        assert_eq!(&seen(step), want, "typescript step {i} ({out})");
    }
    // The Inspector CLI prints the result as it received it.
    let home = tempfile::tempdir().expect("tempdir");
    let inspected = steps.as_array().expect("steps").iter();
    for (i, (step, want)) in inspected.zip(&expected).enumerate() {
        let mut cmd = Command::new(node_bin("mcp-inspector"));
        // Its own HOME: the Inspector keeps a catalog and OAuth state under ~/.mcp-inspector.
        cmd.env("HOME", home.path())
            .args(["--cli", &gw.url, "--format", "json", "--stored-auth-only"])
            .args(["--method", "tools/call", "--tool-name"])
            .arg(step["name"].as_str().expect("a name"))
            .args(["--tool-args-json", &step["arguments"].to_string()])
            .args(["--header", &format!("Authorization: Bearer {KEY}")]);
        let ran = run(&mut cmd, common::peers::CLIENT_DEADLINE);
        assert_eq!(ran.code, Some(0), "inspector step {i}: {}", ran.stderr);
        let result = &ran.json()["result"];
        assert_eq!(&sent(result), want, "inspector step {i}: {result}");
    }
}

/// Proves: a contract that narrows `content:` to text keeps server-filesystem's image away from
/// the client: with `output` the image becomes the JSON of the validated structured content, and
/// without `output` it is dropped; no image block arrives either way.
#[test]
fn a_text_only_contract_keeps_images_out() {
    let files = Files::new();
    let contract = r#"upstream: files
tools:
  read_media_file:
    privilege: read
    input: { type: object, properties: { path: { type: string } }, required: [path], additionalProperties: false }
    output: { type: object, properties: { content: { type: array } }, required: [content] }
    content: [{ type: text }]
  media_unchecked:
    upstream_tool: read_media_file
    privilege: read
    input: { type: object, properties: { path: { type: string } }, required: [path], additionalProperties: false }
  media_jpeg_only:
    upstream_tool: read_media_file
    privilege: read
    input: { type: object, properties: { path: { type: string } }, required: [path], additionalProperties: false }
    content: [{ type: image, mime_types: [image/jpeg] }]
"#;
    let config = format!(
        "upstreams:\n  files:\n    command: {}\n    args: [{}]\n{}",
        node_bin("mcp-server-filesystem").display(),
        json!(files.root.display().to_string()),
        callers()
    );
    let gw = Gateway::start(&config, &[("files.yaml", contract)]);
    gw.wait_tools_joined("files", &["read_media_file"]);
    let path = json!({"path": files.at("pic.png")});
    let steps = json!([
        {"op": "call", "name": "read_media_file", "arguments": path},
        {"op": "call", "name": "media_unchecked", "arguments": path},
        {"op": "call", "name": "media_jpeg_only", "arguments": path},
    ]);
    let out = PyClient::V2("legacy").run(&gw.url, KEY, &steps);
    let r = &out["results"];
    for step in r.as_array().expect("results") {
        assert_eq!(step["is_error"], false, "{step}");
        let blocks = step["content_blocks"].as_array().expect("blocks");
        assert!(blocks.iter().all(|b| b["type"] != "image"), "{step}");
    }
    let text = r[0]["content"][0].as_str().expect("a text block");
    let json: Value = serde_json::from_str(text).expect("the JSON of structuredContent");
    assert_eq!(json, r[0]["structured_content"], "{}", r[0]);
    assert_eq!(r[1]["content_blocks"], json!([]), "{}", r[1]);
    assert_eq!(r[2]["content_blocks"], json!([]), "{}", r[2]);
}

/// The MCP Apps example server (`@modelcontextprotocol/server-basic-vanillajs`) over stdio as
/// upstream `apps`, under `init`'s draft accepted unchanged plus `get-time-app`, the same tool
/// for the app only (`visibility: [app]`).
fn apps_gateway() -> Gateway {
    let config = format!(
        "upstreams:\n  apps:\n    command: {}\n    args: [--stdio]\n{}",
        node_bin("mcp-server-basic-vanillajs").display(),
        callers()
    );
    let setup = ConfigDir::new(&config, &[]);
    let draft = init_draft(&setup.config(), "apps");
    assert!(
        draft.contains("ui: { resource: \"ui://get-time/mcp-app.html\" }")
            && draft.contains("- uri: \"ui://get-time/mcp-app.html\""),
        "init scaffolds no ui or no ui resource:\n{draft}"
    );
    let app_only = "  get-time-app:\n    upstream_tool: get-time\n    privilege: read\n    \
        input: { type: object, additionalProperties: false }\n    \
        ui: { resource: \"ui://get-time/mcp-app.html\", visibility: [app] }\nresources:\n";
    let contract = draft.replacen("resources:\n", app_only, 1);
    let gw = Gateway::start(&config, &[("apps.yaml", &contract)]);
    gw.wait_tools_joined("apps", &["get-time", "get-time-app"]);
    gw
}

/// `initialize` (2025-11-25) as `key`, declaring the UI extension when `ui`, then `method`
/// with `params` in that session: the JSON-RPC message answered.
async fn in_session(gw: &Gateway, key: &str, ui: bool, method: &str, params: Value) -> Value {
    let raw = Raw::new(&gw.url);
    let auth = format!("Bearer {key}");
    let capabilities = match ui {
        true => json!({"extensions": {UI: {"mimeTypes": [APP_MIME]}}}),
        false => json!({}),
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "host", "version": "1"}}});
    let reply = raw
        .post(&[("authorization", &auth)], &init.to_string())
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("a session");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    raw.post(&headers, &note.to_string()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    raw.post(&headers, &body.to_string()).await.message()
}

/// The listed tool called `name` in a `tools/list` answer, if any.
fn listed<'a>(answer: &'a Value, name: &str) -> Option<&'a Value> {
    answer["result"]["tools"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
}

/// Proves: in front of the MCP Apps example server, under init's draft, a host gets the tool's
/// UI link (`_meta`) exactly as the server publishes it, and the `ui://` resource's contents
/// exactly as the server serves them; a caller who may not read the resource gets the tool
/// without the link; a tool for the app only is listed to and callable by a client that declared
/// the UI extension, and to any other client does not exist. (Before MCP Apps support, the
/// link was dropped and no contract could declare it.)
#[tokio::test]
async fn mcp_apps_ui_reaches_hosts_as_the_example_server_publishes_it() {
    let gw = apps_gateway();
    let server = node_bin("mcp-server-basic-vanillajs");
    let direct_list = direct(&server, &["--stdio"], "tools/list", json!({}));
    let direct_tool = direct_list["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "get-time"))
        .cloned()
        .expect("the server lists get-time");
    let uri = "ui://get-time/mcp-app.html";
    let direct_read = direct(&server, &["--stdio"], "resources/read", json!({"uri": uri}));

    for ui in [false, true] {
        let list = in_session(&gw, KEY, ui, "tools/list", json!({})).await;
        let tool = listed(&list, "get-time").expect("get-time listed");
        // The server's own `_meta`, plus the error types the gateway publishes.
        let mut meta = tool["_meta"].clone();
        let types = meta
            .as_object_mut()
            .and_then(|m| m.remove("narrowgate/errors"));
        assert!(types.is_some_and(|t| t.is_array()), "ui={ui}: {tool}");
        assert_eq!(meta, direct_tool["_meta"], "ui={ui}: {tool}");
        let app = listed(&list, "get-time-app");
        assert_eq!(app.is_some(), ui, "ui={ui}: {list}");
        let call = in_session(&gw, KEY, ui, "tools/call", json!({"name": "get-time-app"})).await;
        match ui {
            true => assert!(
                call["result"]["structuredContent"]["time"].is_string(),
                "{call}"
            ),
            false => assert_eq!(
                call["error"]["message"], "Unknown tool: get-time-app",
                "{call}"
            ),
        }
    }
    let app = in_session(&gw, KEY, true, "tools/list", json!({})).await;
    assert_eq!(
        listed(&app, "get-time-app").expect("listed")["_meta"]["ui"],
        json!({"resourceUri": uri, "visibility": ["app"]})
    );
    let read = in_session(&gw, KEY, false, "resources/read", json!({"uri": uri})).await;
    assert_eq!(
        read["result"]["contents"], direct_read["contents"],
        "{read}"
    );

    // Bob may use the tools but not read the UI: no link.
    let list = in_session(&gw, BOB, true, "tools/list", json!({})).await;
    let tool = listed(&list, "get-time").expect("get-time listed to bob");
    // (Only the error types the gateway publishes for every tool.)
    let no_ui =
        |t: &Value| t["_meta"].get("ui").is_none() && t["_meta"].get("ui/resourceUri").is_none();
    assert!(no_ui(tool), "{tool}");
    assert!(no_ui(listed(&list, "get-time-app").expect("listed")));

    // A 2026-07-28 stateless client declares its extensions per request.
    let raw = Raw::new(&gw.url);
    let auth = format!("Bearer {KEY}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    for ui in [false, true] {
        let capabilities = match ui {
            true => json!({"extensions": {UI: {}}}),
            false => json!({}),
        };
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities}}});
        let list = raw.post(&headers, &body.to_string()).await.message();
        assert_eq!(
            listed(&list, "get-time-app").is_some(),
            ui,
            "stateless ui={ui}: {list}"
        );
        let mut meta = listed(&list, "get-time").expect("listed")["_meta"].clone();
        meta.as_object_mut().map(|m| m.remove("narrowgate/errors"));
        assert_eq!(meta, direct_tool["_meta"]);
        let mut call = body.clone();
        call["method"] = json!("tools/call");
        call["params"]["name"] = json!("get-time-app");
        let call_headers = [
            ("authorization", auth.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "get-time-app"),
        ];
        let called = raw.post(&call_headers, &call.to_string()).await.message();
        match ui {
            true => assert!(
                called["result"]["structuredContent"]["time"].is_string(),
                "{called}"
            ),
            false => assert_eq!(
                called["error"]["message"], "Unknown tool: get-time-app",
                "{called}"
            ),
        }
    }
}

/// Proves: the example's text result keeps its shape through the Python SDK 2.x and the
/// TypeScript SDK: one text block holding the time, exactly the structured content's `time`
/// (not `{"time":"…"}`).
#[test]
fn the_apps_example_text_result_keeps_its_shape() {
    let gw = apps_gateway();
    let steps = json!([{"op": "call", "name": "get-time", "arguments": {}}]);
    let py = PyClient::V2("auto").run(&gw.url, KEY, &steps);
    let ts = ts_client(&gw.url, KEY, &json!({"steps": steps}));
    for out in [&py, &ts] {
        let step = &out["results"][0];
        assert_eq!(step["is_error"], false, "{step}");
        let time = step["structured_content"]["time"].clone();
        assert!(time.is_string(), "{step}");
        assert_eq!(
            step["content_blocks"],
            json!([{"type": "text", "text": time}]),
            "{step}"
        );
    }
}
