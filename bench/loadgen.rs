//! `loadgen`: the MCP load generator of the narrowgate benchmarks (`bench/run.sh`).
//!
//! It speaks MCP over Streamable HTTP for real, so that the same calls can be sent straight to an
//! upstream and through a gateway, and compared:
//!
//! ```text
//! loadgen run      --url URL --mode legacy|stateless --calls FILE --clients N --duration S ...
//! loadgen sessions --url URL --count 1000 --watch gateway=PID      (RSS after N open sessions)
//! loadgen startup  --ready-url URL --expect-enabled N -- CMD ARGS  (time from spawn to ready)
//! ```
//!
//! * `legacy`: each virtual client opens a session (`initialize` at 2025-11-25, then
//!   `notifications/initialized`), sends `tools/call` requests with `Mcp-Session-Id` and
//!   `MCP-Protocol-Version`, and deletes the session at the end.
//! * `stateless`: each request is a self-contained 2026-07-28 request: the headers
//!   `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method` and `Mcp-Name`, and `params._meta` with the
//!   protocol version and client capabilities.
//!
//! Every request has a unique JSON-RPC id, carries `Authorization: Bearer KEY` when a key is given
//! (`--key` or `LOADGEN_KEY`), and every answer is checked: an HTTP success, a JSON-RPC result for
//! the same id (from a JSON body or an SSE stream), no `isError`, and exactly the expected
//! `structuredContent`. Anything else counts as an error, and the first few are reported.
//!
//! Each command prints one JSON object on stdout. Loops are bounded by time and by count.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

const LEGACY_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";
/// `/proc/<pid>/stat` counts CPU time in clock ticks of 1/USER_HZ s; USER_HZ is 100 on Linux.
const USER_HZ: f64 = 100.0;
/// How many distinct error messages a report keeps.
const ERROR_SAMPLES: usize = 5;

#[derive(Parser)]
#[command(
    name = "loadgen",
    about = "MCP over Streamable HTTP load generator (narrowgate benchmarks)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs one scenario (N concurrent clients for a fixed time) and prints its figures.
    Run(RunArgs),
    /// Opens N legacy sessions, reports the resident memory of watched processes, closes them.
    Sessions(SessionsArgs),
    /// Spawns a command and measures the time until its readiness URL answers 200.
    Startup(StartupArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Sessions: initialize at 2025-11-25, then calls with Mcp-Session-Id.
    Legacy,
    /// Stateless 2026-07-28 requests with per-request `_meta`.
    Stateless,
}

#[derive(Args, Clone)]
struct Endpoint {
    /// The MCP endpoint, e.g. http://127.0.0.1:8080/mcp.
    #[arg(long)]
    url: String,
    /// API key sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "LOADGEN_KEY", hide_env_values = true)]
    key: Option<String>,
    /// Timeout of one HTTP exchange, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Tokio worker threads of the load generator (1: a single-threaded runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    #[arg(long, value_enum)]
    mode: Mode,
    /// JSON file: a list of `{"tool", "arguments", "structuredContent"}`; requests cycle through it.
    #[arg(long)]
    calls: PathBuf,
    /// How tool names of the calls file are sent: `{}` stands for the name (e.g. `{}_stateless`
    /// for a gateway's other upstream, `demo-{}` for a gateway that prefixes names).
    #[arg(long, default_value = "{}")]
    tool_name: String,
    /// Concurrent virtual clients, each sending its next request when the previous is answered.
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// Seconds measured (after the warm-up).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Seconds of load before measuring starts.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Upper bound on requests per client, whatever the duration.
    #[arg(long, default_value_t = 1_000_000)]
    max_requests: u64,
    /// A label copied into the report.
    #[arg(long, default_value = "")]
    label: String,
    /// `NAME=PID`: report that process's CPU time per call over the measured window (repeatable).
    #[arg(long)]
    watch: Vec<String>,
}

#[derive(Args)]
struct SessionsArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// Sessions to open.
    #[arg(long, default_value_t = 1000)]
    count: usize,
    /// Sessions opened at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Make one call in each session (the first entry of this calls file).
    #[arg(long)]
    calls: Option<PathBuf>,
    /// As for `run`.
    #[arg(long, default_value = "{}")]
    tool_name: String,
    /// Seconds to wait before reading memory, after opening and after closing.
    #[arg(long, default_value_t = 1.0)]
    settle: f64,
    /// `NAME=PID`: processes whose VmRSS is reported (repeatable).
    #[arg(long)]
    watch: Vec<String>,
    #[arg(long, default_value = "")]
    label: String,
}

#[derive(Args)]
struct StartupArgs {
    /// Polled until it answers 200, e.g. http://127.0.0.1:8080/readyz.
    #[arg(long)]
    ready_url: String,
    /// Also wait until the readiness report lists at least this many tools in state `enabled`.
    #[arg(long)]
    expect_enabled: Option<usize>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Poll interval in milliseconds.
    #[arg(long, default_value_t = 5)]
    poll_ms: u64,
    /// `KEY=VALUE` set in the child's environment (repeatable).
    #[arg(long)]
    env: Vec<String>,
    /// Where the child's stdout and stderr go (default: discarded).
    #[arg(long)]
    log: Option<PathBuf>,
    #[arg(long, default_value = "")]
    label: String,
    /// The command to start.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn main() {
    let cli = Cli::parse();
    let threads = match &cli.command {
        Command::Run(a) => a.endpoint.threads,
        Command::Sessions(a) => a.endpoint.threads,
        Command::Startup(_) => 1,
    };
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Sessions(args) => sessions(args).await,
            Command::Startup(args) => startup(args).await,
        }
    });
    match result {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(1);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One MCP client over HTTP.

/// One call of the mix: which tool, with what, and what must come back.
#[derive(Clone, Debug)]
struct Call {
    tool: String,
    arguments: Value,
    expect: Option<Value>,
}

fn load_calls(path: &PathBuf, template: &str) -> Result<Vec<Call>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let list: Vec<Value> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let calls: Vec<Call> = list
        .into_iter()
        .map(|c| Call {
            tool: template.replace("{}", c["tool"].as_str().unwrap_or_default()),
            arguments: c.get("arguments").cloned().unwrap_or_else(|| json!({})),
            expect: c.get("structuredContent").cloned(),
        })
        .collect();
    if calls.is_empty() || calls.iter().any(|c| c.tool == template.replace("{}", "")) {
        return Err(format!("{}: every call needs a `tool`", path.display()));
    }
    Ok(calls)
}

/// Unique JSON-RPC ids for the whole process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct McpClient {
    http: reqwest::Client,
    url: String,
    auth: Option<String>,
    mode: Mode,
    timeout: Duration,
    session: Option<String>,
}

impl McpClient {
    fn new(http: reqwest::Client, endpoint: &Endpoint, mode: Mode) -> McpClient {
        McpClient {
            http,
            url: endpoint.url.clone(),
            auth: endpoint.key.as_ref().map(|k| format!("Bearer {k}")),
            mode,
            timeout: Duration::from_millis(endpoint.timeout_ms),
            session: None,
        }
    }

    fn request(&self, body: Vec<u8>) -> reqwest::RequestBuilder {
        let version = match self.mode {
            Mode::Legacy => LEGACY_VERSION,
            Mode::Stateless => MODERN_VERSION,
        };
        let mut rb = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", version)
            .body(body);
        if let Some(auth) = &self.auth {
            rb = rb.header("authorization", auth);
        }
        if let Some(session) = &self.session {
            rb = rb.header("mcp-session-id", session);
        }
        rb
    }

    /// Opens the session (legacy mode; a no-op when stateless).
    async fn open(&mut self) -> Result<(), String> {
        if self.mode == Mode::Stateless {
            return Ok(());
        }
        let params = json!({
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "narrowgate-loadgen", "version": "0.1.0"}
        });
        let (reply, session) = self.rpc("initialize", params, None).await?;
        if reply
            .get("result")
            .and_then(|r| r.get("protocolVersion"))
            .is_none()
        {
            return Err(format!(
                "initialize: unexpected answer {}",
                clip(&reply.to_string())
            ));
        }
        // A server may serve 2025-11-25 clients without sessions: then no id comes back, and the
        // calls go without one (reported as `sessionless`).
        self.session = session;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = tokio::time::timeout(
            self.timeout,
            self.request(serde_json::to_vec(&note).expect("json"))
                .send(),
        )
        .await
        .map_err(|_| "notifications/initialized: timed out".to_string())?
        .map_err(|e| format!("notifications/initialized: {e}"))?;
        if !response.status().is_success() {
            return Err(format!(
                "notifications/initialized: HTTP {}",
                response.status()
            ));
        }
        let _ = response.bytes().await;
        Ok(())
    }

    /// Deletes the session, if any.
    async fn close(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let mut rb = self
            .http
            .delete(&self.url)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", LEGACY_VERSION);
        if let Some(auth) = &self.auth {
            rb = rb.header("authorization", auth);
        }
        if let Ok(Ok(response)) = tokio::time::timeout(self.timeout, rb.send()).await {
            let _ = response.bytes().await;
        }
    }

    /// One `tools/call`, checked.
    async fn call(&self, call: &Call) -> Result<(), String> {
        let params = json!({"name": call.tool, "arguments": call.arguments});
        let (reply, _) = self.rpc("tools/call", params, Some(&call.tool)).await?;
        check_result(&reply, call.expect.as_ref())
    }

    /// Sends one request and returns the JSON-RPC response for its id and the session header.
    async fn rpc(
        &self,
        method: &str,
        mut params: Value,
        name: Option<&str>,
    ) -> Result<(Value, Option<String>), String> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut rb_extra: Vec<(&str, String)> = Vec::new();
        if self.mode == Mode::Stateless {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "narrowgate-loadgen", "version": "0.1.0"}
            });
            rb_extra.push(("mcp-method", method.to_string()));
            if let Some(name) = name {
                rb_extra.push(("mcp-name", name.to_string()));
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut rb = self.request(serde_json::to_vec(&body).expect("json"));
        for (k, v) in rb_extra {
            rb = rb.header(k, v);
        }
        tokio::time::timeout(self.timeout, exchange(rb, id))
            .await
            .map_err(|_| format!("{method}: no answer within {:?}", self.timeout))?
            .map_err(|e| format!("{method}: {e}"))
    }
}

/// Sends the request and reads the whole answer: a JSON body, or an SSE stream in which the
/// response to `id` is one of the events.
async fn exchange(rb: reqwest::RequestBuilder, id: u64) -> Result<(Value, Option<String>), String> {
    let mut response = rb.send().await.map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(format!("HTTP {status}: {}", clip(&text)));
    }
    if !sse {
        let bytes = response.bytes().await.map_err(|e| format!("body: {e}"))?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "body is not JSON ({e}): {}",
                clip(&String::from_utf8_lossy(&bytes))
            )
        })?;
        return match_id(value, id).map(|v| (v, session));
    }
    // SSE: events are separated by blank lines; `data:` lines of one event are joined by "\n".
    let mut pending: Vec<u8> = Vec::new();
    let mut data = String::new();
    let mut found: Option<Value> = None;
    let dispatch = |data: &mut String, found: &mut Option<Value>| {
        if !data.is_empty() {
            if found.is_none()
                && let Ok(value) = serde_json::from_str::<Value>(data)
                && value.get("id").and_then(Value::as_u64) == Some(id)
            {
                *found = Some(value);
            }
            data.clear();
        }
    };
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("SSE body: {e}"))?
    {
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                dispatch(&mut data, &mut found);
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
            // `id:`, `event:`, `retry:` and `:` comments carry nothing we check.
        }
    }
    dispatch(&mut data, &mut found);
    match found {
        Some(value) => Ok((value, session)),
        None => Err(format!("SSE stream ended without a response to id {id}")),
    }
}

fn match_id(value: Value, id: u64) -> Result<Value, String> {
    if value.get("id").and_then(Value::as_u64) == Some(id) {
        Ok(value)
    } else {
        Err(format!(
            "answer is not for id {id}: {}",
            clip(&value.to_string())
        ))
    }
}

/// A `tools/call` answer passes when it is a result, not a tool error, with the expected
/// structured content.
fn check_result(reply: &Value, expect: Option<&Value>) -> Result<(), String> {
    if let Some(error) = reply.get("error") {
        return Err(format!("JSON-RPC error {}", clip(&error.to_string())));
    }
    let Some(result) = reply.get("result") else {
        return Err(format!("no result: {}", clip(&reply.to_string())));
    };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(format!("isError: {}", clip(&result["content"].to_string())));
    }
    if let Some(expect) = expect
        && result.get("structuredContent") != Some(expect)
    {
        return Err(format!(
            "structuredContent {} instead of {expect}",
            clip(
                &result
                    .get("structuredContent")
                    .unwrap_or(&Value::Null)
                    .to_string()
            )
        ));
    }
    Ok(())
}

fn clip(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn http_client(connections: usize) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(connections.max(1))
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

// ---------------------------------------------------------------------------------------------
// /proc readings.

/// utime + stime of a process (all its threads), in seconds.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// VmRSS in KiB.
fn rss_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn parse_watch(watch: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = watch
        .iter()
        .map(|w| {
            w.split_once('=')
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .ok_or_else(|| format!("--watch {w}: expected NAME=PID"))
        })
        .collect::<Result<_, _>>()?;
    out.push(("loadgen".into(), "self".into()));
    Ok(out)
}

fn cpu_snapshot(watch: &[(String, String)]) -> BTreeMap<String, Option<f64>> {
    watch
        .iter()
        .map(|(name, pid)| (name.clone(), cpu_seconds(pid)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// `run`

#[derive(Default)]
struct ClientStats {
    latencies_ns: Vec<u64>,
    in_window: u64,
    total: u64,
    errors: u64,
    error_samples: Vec<String>,
}

async fn run(args: RunArgs) -> Result<Value, String> {
    let calls = Arc::new(load_calls(&args.calls, &args.tool_name)?);
    let watch = parse_watch(&args.watch)?;
    let http = http_client(args.clients)?;
    let clients = args.clients.max(1);

    // Legacy clients open their sessions before the clock starts.
    let mut opened = Vec::with_capacity(clients);
    let setup_started = Instant::now();
    {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..clients {
            let mut c = McpClient::new(http.clone(), &args.endpoint, args.mode);
            set.spawn(async move { c.open().await.map(|()| (i, c)) });
        }
        while let Some(joined) = set.join_next().await {
            opened.push(joined.map_err(|e| e.to_string())??);
        }
    }
    let setup_ms = setup_started.elapsed().as_secs_f64() * 1e3;
    let sessionless = opened
        .iter()
        .filter(|(_, c)| args.mode == Mode::Legacy && c.session.is_none())
        .count();
    opened.sort_by_key(|(i, _)| *i);

    let start = Instant::now();
    let window_start = start + Duration::from_secs_f64(args.warmup);
    let end = window_start + Duration::from_secs_f64(args.duration);
    let mut set = tokio::task::JoinSet::new();
    for (i, client) in opened {
        let calls = calls.clone();
        let max = args.max_requests;
        set.spawn(async move {
            let mut stats = ClientStats::default();
            let mut n = i; // each client starts at a different call of the mix
            while stats.total < max {
                let sent = Instant::now();
                if sent >= end {
                    break;
                }
                let call = &calls[n % calls.len()];
                n += 1;
                let outcome = client.call(call).await;
                let done = Instant::now();
                stats.total += 1;
                // Counted when it completes inside the window, whenever it started, so slow
                // answers are not left out of the latencies.
                if done >= window_start && done <= end {
                    stats.in_window += 1;
                    stats.latencies_ns.push((done - sent).as_nanos() as u64);
                }
                if let Err(e) = outcome {
                    stats.errors += 1;
                    if stats.error_samples.len() < ERROR_SAMPLES {
                        stats.error_samples.push(e);
                    }
                }
            }
            (client, stats)
        });
    }
    // CPU of the watched processes over exactly the measured window.
    tokio::time::sleep_until(window_start.into()).await;
    let cpu_before = cpu_snapshot(&watch);
    tokio::time::sleep_until(end.into()).await;
    let cpu_after = cpu_snapshot(&watch);
    let window = args.duration;

    let mut all = ClientStats::default();
    let mut finished = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (client, stats) = joined.map_err(|e| e.to_string())?;
        finished.push(client);
        all.latencies_ns.extend(stats.latencies_ns);
        all.in_window += stats.in_window;
        all.total += stats.total;
        all.errors += stats.errors;
        for e in stats.error_samples {
            if all.error_samples.len() < ERROR_SAMPLES && !all.error_samples.contains(&e) {
                all.error_samples.push(e);
            }
        }
    }
    for mut client in finished {
        client.close().await;
    }

    let mut cpu = serde_json::Map::new();
    for (name, _) in &watch {
        let (Some(Some(a)), Some(Some(b))) = (cpu_before.get(name), cpu_after.get(name)) else {
            continue;
        };
        let seconds = b - a;
        cpu.insert(
            name.clone(),
            json!({
                "cpu_s": round(seconds, 3),
                "cpu_ms_per_call": if all.in_window > 0 { Value::from(round(seconds * 1e3 / all.in_window as f64, 4)) } else { Value::Null },
                "cores": round(seconds / window, 3),
            }),
        );
    }
    let mut lat = all.latencies_ns;
    lat.sort_unstable();
    Ok(json!({
        "kind": "run",
        "label": args.label,
        "url": args.endpoint.url,
        "mode": format!("{:?}", args.mode).to_lowercase(),
        "clients": clients,
        "duration_s": window,
        "warmup_s": args.warmup,
        "setup_ms": round(setup_ms, 2),
        "sessionless": sessionless,
        "requests": all.in_window,
        "requests_total": all.total,
        "errors": all.errors,
        "error_samples": all.error_samples,
        "throughput_rps": round(all.in_window as f64 / window, 1),
        "latency_ms": latency_summary(&lat),
        "cpu": cpu,
    }))
}

fn latency_summary(sorted_ns: &[u64]) -> Value {
    if sorted_ns.is_empty() {
        return Value::Null;
    }
    let pct = |p: f64| {
        let rank = ((p * sorted_ns.len() as f64).ceil() as usize).clamp(1, sorted_ns.len());
        round(sorted_ns[rank - 1] as f64 / 1e6, 4)
    };
    let mean = sorted_ns.iter().map(|&n| n as f64).sum::<f64>() / sorted_ns.len() as f64 / 1e6;
    json!({
        "mean": round(mean, 4),
        "p50": pct(0.50),
        "p90": pct(0.90),
        "p99": pct(0.99),
        "max": round(*sorted_ns.last().expect("non-empty") as f64 / 1e6, 4),
    })
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

// ---------------------------------------------------------------------------------------------
// `sessions`

async fn sessions(args: SessionsArgs) -> Result<Value, String> {
    let watch = parse_watch(&args.watch)?;
    let call = match &args.calls {
        Some(path) => Some(load_calls(path, &args.tool_name)?.remove(0)),
        None => None,
    };
    let rss = |w: &[(String, String)]| -> BTreeMap<String, Option<u64>> {
        w.iter().map(|(n, p)| (n.clone(), rss_kib(p))).collect()
    };
    let before = rss(&watch);
    let http = http_client(args.concurrency)?;
    let next = Arc::new(AtomicUsize::new(0));
    let open: Arc<Mutex<Vec<McpClient>>> = Arc::new(Mutex::new(Vec::with_capacity(args.count)));
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency.max(1) {
        let (http, endpoint, call) = (http.clone(), args.endpoint.clone(), call.clone());
        let (next, open, errors, count) = (next.clone(), open.clone(), errors.clone(), args.count);
        set.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let mut c = McpClient::new(http.clone(), &endpoint, Mode::Legacy);
                let mut outcome = c.open().await;
                if outcome.is_ok()
                    && let Some(call) = &call
                {
                    outcome = c.call(call).await;
                }
                match outcome {
                    Ok(()) => open.lock().expect("lock").push(c),
                    Err(e) => {
                        {
                            let mut errors = errors.lock().expect("lock");
                            if errors.len() < 1000 {
                                errors.push(e);
                            }
                        }
                        c.close().await;
                    }
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    tokio::time::sleep(Duration::from_secs_f64(args.settle)).await;
    let with_sessions = rss(&watch);
    let opened = open.lock().expect("lock").len();

    // Close them all again.
    let clients: Vec<McpClient> = std::mem::take(&mut *open.lock().expect("lock"));
    let queue = Arc::new(Mutex::new(clients));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency.max(1) {
        let queue = queue.clone();
        set.spawn(async move {
            loop {
                let next = queue.lock().expect("lock").pop();
                match next {
                    Some(mut c) => c.close().await,
                    None => break,
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    tokio::time::sleep(Duration::from_secs_f64(args.settle)).await;
    let after_close = rss(&watch);

    let errors = errors.lock().expect("lock").clone();
    let mut per_process = serde_json::Map::new();
    for (name, _) in &watch {
        if name == "loadgen" {
            continue;
        }
        let (b, w, a) = (before[name], with_sessions[name], after_close[name]);
        per_process.insert(
            name.clone(),
            json!({
                "rss_kib_before": b,
                "rss_kib_with_sessions": w,
                "rss_kib_after_close": a,
                "kib_per_session": match (b, w) {
                    (Some(b), Some(w)) if opened > 0 => Value::from(round((w as f64 - b as f64) / opened as f64, 2)),
                    _ => Value::Null,
                },
            }),
        );
    }
    let mut samples: Vec<String> = Vec::new();
    for e in &errors {
        if samples.len() < ERROR_SAMPLES && !samples.contains(e) {
            samples.push(e.clone());
        }
    }
    Ok(json!({
        "kind": "sessions",
        "label": args.label,
        "url": args.endpoint.url,
        "requested": args.count,
        "opened": opened,
        "errors": errors.len(),
        "error_samples": samples,
        "open_ms": round(open_ms, 1),
        "processes": per_process,
    }))
}

// ---------------------------------------------------------------------------------------------
// `startup`

async fn startup(args: StartupArgs) -> Result<Value, String> {
    let (program, rest) = args.command.split_first().ok_or("no command given")?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--env {kv}: expected KEY=VALUE"))?;
        cmd.env(k, v);
    }
    match &args.log {
        Some(path) => {
            let file =
                std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let err = file.try_clone().map_err(|e| e.to_string())?;
            cmd.stdout(file).stderr(err);
        }
        None => {
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
        }
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let pid = child.id().map(|p| p.to_string()).unwrap_or_default();
    let deadline = started + Duration::from_secs_f64(args.timeout);
    let mut ready_ms: Option<f64> = None;
    let mut enabled_ms: Option<f64> = None;
    let mut enabled_seen = 0usize;
    let mut failure: Option<String> = None;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            failure = Some(format!("the command exited early ({status})"));
            break;
        }
        if Instant::now() >= deadline {
            failure = Some(format!("not ready within {} s", args.timeout));
            break;
        }
        if let Ok(response) = http.get(&args.ready_url).send().await
            && response.status().as_u16() == 200
        {
            let at = started.elapsed().as_secs_f64() * 1e3;
            ready_ms.get_or_insert(at);
            match args.expect_enabled {
                None => break,
                Some(want) => {
                    let body: Value = response.json().await.unwrap_or(Value::Null);
                    enabled_seen = body["tools"]
                        .as_object()
                        .map(|t| t.values().filter(|v| v["state"] == "enabled").count())
                        .unwrap_or(0);
                    if enabled_seen >= want {
                        enabled_ms = Some(at);
                        break;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(args.poll_ms)).await;
    }
    let rss = rss_kib(&pid);
    // Stop it politely (SIGTERM), then for good.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    Ok(json!({
        "kind": "startup",
        "label": args.label,
        "ready_ms": ready_ms.map(|v| round(v, 1)),
        "enabled_ms": enabled_ms.map(|v| round(v, 1)),
        "tools_enabled": enabled_seen,
        "rss_kib_ready": rss,
        "error": failure,
    }))
}
