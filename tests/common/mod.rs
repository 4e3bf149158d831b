//! Shared harness of the integration tests: start the real `narrowgate` binary on a config written
//! to a temporary folder, start the repository's demo upstream (and a real `redis-server` for
//! `state: redis://…`), and talk MCP to it: with rmcp's client, or raw over HTTP.
#![allow(dead_code)] // each test crate uses a part of it

mod hostile;
pub mod peers;
mod redis;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

#[allow(unused_imports)] // each test crate uses a part of it
pub use hostile::{
    HostileHttp, hostile_stdio_upstream, hostile_upstream_bin, recorded, recorded_requests,
};
#[allow(unused_imports)] // each test crate uses a part of it
pub use redis::{Redis, free_port};

/// The API key every test config gives its main caller.
pub const KEY: &str = "test-key-alice";

/// `sha256(key)` in hex, as `api_key_sha256` wants it (computed by the binary itself).
pub fn hash_key(key: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(["hash-key", key])
        .output()
        .expect("run narrowgate hash-key");
    assert!(out.status.success(), "hash-key failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A `callers:` block: `alice` (key [`KEY`]) may call every tool, then each `(name, key, tools)`
/// of `others`, `tools` a YAML list such as `[echo]`.
pub fn callers(others: &[(&str, &str, &str)]) -> String {
    let mut text = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n",
        hash_key(KEY)
    );
    for (name, key, tools) in others {
        text.push_str(&format!(
            "  - name: {name}\n    api_key_sha256: {}\n    tools: {tools}\n",
            hash_key(key)
        ));
    }
    text
}

/// A config (without `contracts:`) with the demo upstream over stdio as `demo`, then `callers`
/// and `extra`.
pub fn demo_stdio_config(callers: &str, extra: &str) -> String {
    format!(
        "upstreams:\n  demo:\n    command: {}\n    args: [stdio]\n{callers}{extra}",
        demo_upstream_bin().display()
    )
}

/// Contract YAML, one entry under `tools:`: the demo upstream's `bad_weather`, whose results
/// break the output schema (a temperature of 999).
pub const BAD_WEATHER_TOOL: &str = r#"  bad_weather:
    privilege: read
    input:
      type: object
      properties: { location: { type: string, enum: [Chicago] } }
      required: [location]
    output:
      type: object
      properties:
        temperature: { type: number, minimum: -60, maximum: 60 }
        conditions: { type: string }
      required: [temperature, conditions]
"#;

/// Contract YAML, one entry under `tools:`: `name` for the demo upstream's `slow` tool (sleeps
/// `ms` milliseconds) with `privilege`, a 300 ms timeout and the `extra` lines.
pub fn slow_tool(name: &str, privilege: &str, extra: &str) -> String {
    let upstream_tool = if name == "slow" {
        String::new()
    } else {
        "    upstream_tool: slow\n".to_string()
    };
    format!(
        "  {name}:\n{upstream_tool}    privilege: {privilege}\n    timeout: 300ms\n{extra}    \
         input: {{ type: object, properties: {{ ms: {{ type: integer }} }}, required: [ms] }}\n"
    )
}

/// The demo upstream built from `tests/upstream` (`tests/run.sh` builds it before the tests).
pub fn demo_upstream_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/debug/deps/<test> → target/debug/examples/demo-upstream
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("examples");
    let bin = dir.join("demo-upstream");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --example demo-upstream` first (tests/run.sh does)",
        bin.display()
    );
    bin
}

/// A running gateway process, killed on drop. Its log is kept in its temporary folder.
pub struct Gateway {
    child: Child,
    pub base: String,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Gateway {
    /// Writes `config` (YAML without `listen`/`contracts`) and `contracts` (file name, YAML) and
    /// starts `narrowgate serve` on a free port, waiting until `/readyz` answers 200.
    pub fn start(config: &str, contracts: &[(&str, &str)]) -> Gateway {
        let gateway = Gateway::spawn(config, contracts, &[]);
        gateway.wait_ready(Duration::from_secs(60));
        gateway
    }

    /// Like [`start`](Self::start) without waiting, with extra environment variables.
    pub fn spawn(config: &str, contracts: &[(&str, &str)], env: &[(&str, &str)]) -> Gateway {
        let dir = tempfile::tempdir().expect("tempdir");
        let contracts_dir = dir.path().join("contracts");
        std::fs::create_dir(&contracts_dir).expect("contracts dir");
        for (name, text) in contracts {
            std::fs::write(contracts_dir.join(name), text).expect("write contract");
        }
        let config_path = dir.path().join("narrowgate.yaml");
        std::fs::write(&config_path, format!("contracts: contracts\n{config}"))
            .expect("write config");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("gateway.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .args(["serve", "--config"])
            .arg(&config_path)
            .env("NARROWGATE_LISTEN", format!("127.0.0.1:{port}"))
            .env("NARROWGATE_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start narrowgate");
        let base = format!("http://127.0.0.1:{port}");
        Gateway {
            child,
            url: format!("{base}/mcp"),
            base,
            dir,
        }
    }

    /// Blocks until `/readyz` answers 200, or panics with the gateway's log.
    pub fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some((200, _)) = http_get(&self.base, "/readyz") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("gateway not ready within {within:?}; log:\n{}", self.log());
    }

    /// The gateway's process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The folder holding `narrowgate.yaml` and `contracts/`.
    pub fn config_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its `narrowgate.yaml`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("narrowgate.yaml")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }

    /// The `/readyz` report.
    pub fn readyz(&self) -> Value {
        let (_, body) = http_get(&self.base, "/readyz").expect("readyz answers");
        serde_json::from_str(&body).expect("readyz is JSON")
    }

    /// Polls `/readyz` until `predicate` holds, or panics after `within`.
    pub fn wait_for(&self, within: Duration, what: &str, predicate: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if predicate(&self.readyz()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{what} did not happen within {within:?}; readyz: {}\nlog:\n{}",
            self.readyz(),
            self.log()
        );
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal blocking HTTP GET (no client crate needed): `(status, body)`.
pub fn http_get(base: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    // Bodies may be chunked: keep the JSON between the first `{` and the last `}`.
    let body = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a < b => body[a..=b].to_string(),
        _ => body,
    };
    Some((status, body))
}

/// The demo upstream serving Streamable HTTP on a free port, killed on drop.
pub struct HttpUpstream {
    child: Child,
    pub url: String,
}

impl HttpUpstream {
    pub fn start(extra_args: &[&str]) -> HttpUpstream {
        HttpUpstream::start_at(0, extra_args)
    }

    /// Like [`start`](Self::start) on a given port (0: any free port).
    pub fn start_at(port: u16, extra_args: &[&str]) -> HttpUpstream {
        let mut child = Command::new(demo_upstream_bin())
            .args(["http", "--port", &port.to_string()])
            .args(extra_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start demo-upstream http");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from demo-upstream: {line:?}"))
            .to_string();
        HttpUpstream { child, url }
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP answer from the MCP endpoint.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// The JSON-RPC message in the body: plain JSON, or the last `data:` event of an SSE stream.
    pub fn message(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .next_back()
            .unwrap_or_else(|| panic!("no JSON-RPC message in body: {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// Raw MCP over HTTP, to send what SDK clients never would.
pub struct Raw {
    pub url: String,
    client: reqwest::Client,
}

impl Raw {
    pub fn new(url: &str) -> Raw {
        Raw {
            url: url.to_string(),
            client: reqwest::Client::new(),
        }
    }

    /// POSTs `body` with MCP's Accept header plus `headers`.
    pub async fn post(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut all = vec![("accept", "application/json, text/event-stream")];
        all.extend_from_slice(headers);
        self.post_exactly(&all, body).await
    }

    /// POSTs `body` as JSON with exactly `headers` (no Accept added).
    pub async fn post_exactly(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.expect("POST reaches the gateway");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// `initialize` + `notifications/initialized` at `version`; returns the session id.
    pub async fn open_session(&self, key: Option<&str>, version: &str) -> String {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = vec![];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        let reply = self.post(&headers, &initialize_body(version)).await;
        assert_eq!(reply.status, 200, "initialize failed: {reply:?}");
        let session = reply.header("mcp-session-id").expect("session id");
        headers.push(("mcp-session-id", session.as_str()));
        headers.push(("mcp-protocol-version", version));
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = self.post(&headers, &note.to_string()).await;
        assert_eq!(ack.status, 202, "initialized notification: {ack:?}");
        session
    }

    /// `tools/call` of `name` with `arguments`, as `key` in a session of its own at `version`.
    pub async fn call_in_new_session(
        &self,
        key: &str,
        version: &str,
        name: &str,
        arguments: Value,
    ) -> Reply {
        let session = self.open_session(Some(key), version).await;
        let params = json!({"name": name, "arguments": arguments});
        self.request(Some(key), &session, version, "tools/call", params)
            .await
    }

    /// A JSON-RPC request inside a session.
    pub async fn request(
        &self,
        key: Option<&str>,
        session: &str,
        version: &str,
        method: &str,
        params: Value,
    ) -> Reply {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = vec![
            ("mcp-session-id", session),
            ("mcp-protocol-version", version),
        ];
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
        }
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        self.post(&headers, &body.to_string()).await
    }
}

/// The body of an `initialize` request (id 0) asking for protocol `version`.
pub fn initialize_body(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}}})
    .to_string()
}

/// Text of every text block of a `CallToolResult` JSON, joined.
pub fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An rmcp client connected through the gateway at `url` with the API key `key`.
pub async fn client(url: &str, key: &str) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("rmcp client connects through the gateway")
}

/// The names of the tools the gateway lists to `c` (every page of tools/list).
pub async fn tool_names<S: rmcp::service::Service<RoleClient>>(
    c: &RunningService<RoleClient, S>,
) -> Vec<String> {
    let tools = c.list_all_tools().await.expect("tools/list");
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// `tools/call` parameters: `name` with `args` (a JSON object) as its arguments.
pub fn tool_params(name: &str, args: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = args.as_object().cloned();
    params
}

/// Calls tool `name` with `args`: its result, or the JSON-RPC error as text.
pub async fn call(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, String> {
    c.call_tool(tool_params(name, args))
        .await
        .map_err(|e| e.to_string())
}

/// Like [`call`], for calls the gateway must answer with a result (a tool error included).
pub async fn call_answered(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> CallToolResult {
    call(c, name, args).await.expect("the gateway answers")
}

/// Like [`call`], asserting that the gateway answers a result that is not a tool error.
pub async fn call_ok(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let r = call_answered(c, name, args).await;
    assert_ne!(r.is_error, Some(true), "{name}: {r:?}");
    r
}

/// Text of every text block of a result, joined.
pub fn text_of(r: &CallToolResult) -> String {
    result_text(&serde_json::to_value(r).expect("result serializes"))
}

/// The demo upstream's counter, through a contract for its `peek_counter` tool (without `dedupe`,
/// so the call always reaches the upstream).
pub async fn counter(c: &RunningService<RoleClient, ()>) -> u64 {
    let r = call_answered(c, "peek_counter", json!({})).await;
    r.structured_content
        .as_ref()
        .and_then(|s| s["count"].as_u64())
        .unwrap_or_else(|| panic!("peek_counter answers a count: {r:?}"))
}

/// Makes the same call at the same time through each of `urls`, each from a client of its own
/// (as [`KEY`]); the answers in the order of `urls`.
pub async fn concurrent_calls(urls: &[&str], name: &str, args: Value) -> Vec<CallToolResult> {
    let tasks: Vec<_> = urls
        .iter()
        .map(|url| {
            let (url, name, args) = (url.to_string(), name.to_string(), args.clone());
            tokio::spawn(async move {
                let c = client(&url, KEY).await;
                call_answered(&c, &name, args).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    results
}

/// Asserts that the first of `results` has structuredContent and every other the same.
pub fn assert_same_structured_content(results: &[CallToolResult]) {
    let first = results[0].structured_content.clone();
    assert!(first.is_some(), "{:?}", results[0]);
    assert!(
        results.iter().all(|r| r.structured_content == first),
        "{results:?}"
    );
}

/// Runs `attempt` every `pause` until it returns `Ok`, and returns that; once `within` has passed,
/// panics saying `what` did not happen, with the last attempt's `Err` and the gateway's log.
pub async fn retry_until<T>(
    gw: &Gateway,
    within: Duration,
    pause: Duration,
    what: &str,
    mut attempt: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let last = match attempt().await {
            Ok(done) => return done,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {within:?}; last attempt: {last}\nlog:\n{}",
            gw.log()
        );
        tokio::time::sleep(pause).await;
    }
}

/// Runs `narrowgate receipts --config CONFIG ARGS...`: (exit code, stdout, stderr).
pub fn receipts_command(config: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .arg("receipts")
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run narrowgate receipts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The receipts `narrowgate receipts --json ARGS...` prints.
pub fn receipts_json(config: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = receipts_command(config, &all);
    assert_eq!(code, 0, "narrowgate receipts failed: {stderr}");
    match serde_json::from_str(&stdout) {
        Ok(Value::Array(receipts)) => receipts,
        other => panic!("not a JSON array: {other:?}\n{stdout}"),
    }
}
