//! The MCP project's own servers behind the gateway as a new user sets them up: `mcp-server-git`,
//! `mcp-server-time`, `mcp-server-fetch` (PyPI), `@modelcontextprotocol/server-filesystem`,
//! `server-memory`, `server-postgres` and the MCP Apps example `server-basic-vanillajs` (npm), each
//! at the version pinned in tests/peers/. For each: `narrowgate init` → `narrowgate check` →
//! `narrowgate serve` with the draft unchanged, then the same steps through four official clients
//! (Python SDK 2.x and 1.x, TypeScript SDK, Inspector CLI), each run once against the server
//! directly (over stdio) and once through the gateway: every answer must be the same. Then a
//! contract narrowed as an operator would write it refuses what it leaves out, with the server's
//! state unchanged. The harness is here; the servers are in `real_servers/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::peers::{CLIENT_DEADLINE, node_bin, peers_dir, repo_root};
use crate::common::process::run;
use crate::common::{ConfigDir, Gateway, KEY, hash_key, narrowgate_bin};

#[path = "real_servers/node.rs"]
mod node;
#[path = "real_servers/python.rs"]
pub(crate) mod python;

/// A stdio MCP server as the gateway and the direct clients both start it: the same program,
/// arguments and environment (PATH, HOME and `env`, what the gateway gives a stdio upstream).
pub struct Stdio {
    /// The upstream's name in the configuration.
    pub name: &'static str,
    pub command: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The upstream's call timeout in the configuration, when the default 30 s is too short.
    pub timeout: Option<&'static str>,
}

impl Stdio {
    pub fn new(name: &'static str, command: PathBuf, args: &[&str]) -> Stdio {
        Stdio {
            name,
            command,
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            timeout: None,
        }
    }

    /// Its `upstreams:` entry.
    fn upstream_yaml(&self) -> String {
        let env: serde_json::Map<String, Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let timeout = self
            .timeout
            .map(|t| format!("    timeout: {t}\n"))
            .unwrap_or_default();
        format!(
            "  {}:\n    command: {}\n    args: {}\n    env: {}\n{timeout}",
            self.name,
            json!(self.command.display().to_string()),
            json!(self.args),
            Value::Object(env)
        )
    }

    /// The configuration (after `contracts:`): this upstream, and `alice` allowed everything,
    /// as a new user's first configuration does.
    pub fn config(&self) -> String {
        format!(
            "upstreams:\n{}callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n    \
             resources: ['*']\n    prompts: ['*']\n",
            self.upstream_yaml(),
            hash_key(KEY)
        )
    }

    /// The `stdio:` target the client drivers in tests/clients/ start it from.
    fn client_url(&self) -> String {
        let env: serde_json::Map<String, Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let spec =
            json!({"command": self.command.display().to_string(), "args": self.args, "env": env});
        format!("stdio:{spec}")
    }
}

/// `narrowgate init` → `check` → `serve` on `server`, the draft unchanged: returns the running
/// gateway (every tool joined) and the draft.
pub fn init_check_serve(server: &Stdio) -> (Gateway, String) {
    let started = std::time::Instant::now();
    let config = server.config();
    let dir = ConfigDir::new(&config, &[]);
    let narrowgate = |args: &[&str]| {
        let mut cmd = Command::new(narrowgate_bin());
        cmd.args(args).arg("--config").arg(dir.config());
        run(&mut cmd, CLIENT_DEADLINE)
    };
    let init = narrowgate(&["init", "--upstream", server.name]);
    assert_eq!(init.code, Some(0), "init {}: {}", server.name, init.stderr);
    let draft = init.stdout;
    dir.contract(&format!("{}.yaml", server.name), &draft);
    let check = narrowgate(&["check", "--json"]);
    assert_eq!(
        check.code,
        Some(0),
        "check of {}'s init draft:\n{}\n{}\ndraft:\n{draft}",
        server.name,
        check.stdout,
        check.stderr
    );
    let gw = Gateway::start(&config, &[(&format!("{}.yaml", server.name), &draft)]);
    wait_all_joined(&gw, server.name);
    eprintln!(
        "{}: init, check, serve in {:?}",
        server.name,
        started.elapsed()
    );
    (gw, draft)
}

/// A gateway in front of `server` with `contract` (an operator's narrowed one), every tool joined.
pub fn serve_narrowed(server: &Stdio, contract: &str) -> Gateway {
    let gw = Gateway::start(
        &server.config(),
        &[(&format!("{}.yaml", server.name), contract)],
    );
    wait_all_joined(&gw, server.name);
    gw
}

/// Waits until `upstream` is up and none of the gateway's tools is still unavailable.
fn wait_all_joined(gw: &Gateway, upstream: &str) {
    gw.wait_for(
        std::time::Duration::from_secs(30),
        "the upstream up and its tools joined",
        |r| {
            let tools = r["tools"].as_object();
            let joined = tools.is_some_and(|t| t.values().all(|t| t["state"] != "unavailable"));
            r["upstreams"][upstream]["state"] == "up" && joined
        },
    );
}

/// Each client step's timeout, in seconds (the drivers' `PY_CLIENT_TIMEOUT`/`TS_CLIENT_TIMEOUT`).
const STEP_TIMEOUT: &str = "90";
/// How long one client run may take in all.
const RUN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// `path`, which tests/setup-peers.sh installs; a missing one fails saying so.
fn existing(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "test peer missing at {}: run tests/setup-peers.sh (or tests/run.sh, which runs it)",
        path.display()
    );
    path
}

/// The official clients the comparison runs.
#[derive(Clone, Copy, Debug)]
pub enum Client {
    /// `mcp` 2.3.0 in its default `auto` mode (2026-07-28 where the server speaks it).
    Python2,
    /// `mcp` 1.30.0 (2025-11-25).
    Python1,
    /// `@modelcontextprotocol/sdk` 1.32.2.
    TypeScript,
    /// `@modelcontextprotocol/inspector` 2.12.0 `--cli`, one process per step.
    Inspector,
}

pub const CLIENTS: [Client; 4] = [
    Client::Python2,
    Client::Python1,
    Client::TypeScript,
    Client::Inspector,
];

/// Where a client connects: the server itself over stdio, or the gateway with alice's key.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    Direct(&'a Stdio),
    Gateway(&'a str),
}

impl Client {
    /// Runs `steps` (tests/clients/steps_common.py's format) and returns one result per step.
    pub fn run(self, target: Target, steps: &[Value]) -> Vec<Value> {
        let (url, key) = match target {
            Target::Direct(server) => (server.client_url(), "-"),
            Target::Gateway(url) => (url.to_string(), KEY),
        };
        let root = peers_dir();
        let clients = repo_root().join("tests/clients");
        let mut cmd = match self {
            Client::Python2 | Client::Python1 => {
                let (venv, script, mode) = match self {
                    Client::Python2 => ("py2", "py2_client.py", "auto"),
                    _ => ("py1", "py1_client.py", "legacy"),
                };
                let mut cmd = Command::new(existing(root.join(venv).join("bin/python")));
                cmd.arg(clients.join(script))
                    .args([&url, key, mode, &json!(steps).to_string()]);
                cmd
            }
            Client::TypeScript => {
                existing(root.join("node/node_modules/@modelcontextprotocol/sdk/package.json"));
                let mut cmd = Command::new("node");
                cmd.arg(clients.join("ts_client.mjs"))
                    .arg(root.join("node"))
                    .args([&url, key, &json!({"steps": steps}).to_string()]);
                cmd
            }
            Client::Inspector => return steps.iter().map(|s| inspector(target, s)).collect(),
        };
        // Longer than the drivers' defaults: a slow server start on a busy CI machine is not
        // what these tests are about.
        cmd.env("PY_CLIENT_TIMEOUT", STEP_TIMEOUT)
            .env("TS_CLIENT_TIMEOUT", STEP_TIMEOUT);
        let ran = run(&mut cmd, RUN_DEADLINE);
        assert_eq!(ran.code, Some(0), "{self:?} failed: {}", ran.stderr);
        let out = ran.json();
        let results = out["results"].as_array().cloned();
        results.unwrap_or_else(|| panic!("{self:?} did not connect: {out}"))
    }
}

/// One step with the Inspector CLI, its answer in the drivers' shape.
fn inspector(target: Target, step: &Value) -> Value {
    // Its own HOME: the Inspector keeps a catalog and OAuth state under ~/.mcp-inspector.
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(node_bin("mcp-inspector"));
    cmd.env("HOME", home.path()).arg("--cli");
    // A URL goes first: `--header` takes every argument after it.
    if let Target::Gateway(url) = target {
        cmd.arg(url);
    }
    // The default 15 s to connect is too short for a Python server starting on a busy CI machine.
    cmd.args(["--format", "json", "--connect-timeout", "60000"]);
    match step["op"].as_str() {
        Some("list") => cmd.args(["--method", "tools/list"]),
        Some("resources") => cmd.args(["--method", "resources/list"]),
        Some("read") => cmd
            .args(["--method", "resources/read", "--uri"])
            .arg(str_of(step, "uri")),
        _ => cmd
            .args(["--method", "tools/call", "--tool-name"])
            .arg(str_of(step, "name"))
            .arg("--tool-args-json")
            .arg(step["arguments"].to_string()),
    };
    match target {
        Target::Direct(server) => {
            cmd.env_clear();
            for key in ["PATH", "HOME"] {
                if let Some(v) = std::env::var_os(key) {
                    cmd.env(key, v);
                }
            }
            cmd.env("HOME", home.path());
            for (k, v) in &server.env {
                cmd.arg("-e").arg(format!("{k}={v}"));
            }
            cmd.arg("--").arg(&server.command).args(&server.args);
        }
        Target::Gateway(_) => {
            cmd.args(["--stored-auth-only", "--header"])
                .arg(format!("Authorization: Bearer {KEY}"));
        }
    }
    let ran = run(&mut cmd, RUN_DEADLINE);
    // Exit 5 is a tool result with isError (printed like any result); others failed.
    if !matches!(ran.code, Some(0) | Some(5)) {
        return json!({"exception": {"code": ran.code, "message": ran.stderr.trim()}});
    }
    let result = ran.json()["result"].take();
    match step["op"].as_str() {
        Some("list") => json!({"tools": result["tools"]}),
        Some("resources") => json!({"resources": result["resources"]}),
        Some("read") => json!({"contents": result["contents"]}),
        _ => json!({
            "is_error": result["isError"] == true,
            "content_blocks": result["content"],
            "structured_content": result["structuredContent"],
        }),
    }
}

fn str_of<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} missing in {value}"))
}

/// What must be the same directly and through the gateway in one step's result: for a tool
/// list, each tool's MCP Apps link (`_meta.ui`; the rest of a listing is the contract's by
/// design); for a call, the content blocks, structured content and error flag; for resources,
/// each one's URI, description and MIME type (the gateway names a resource by its URI: its
/// `name` is not compared); for a read, the contents. A step marked `"volatile": true`
/// (a clock) is compared by shape only.
fn comparable(step: &Value, result: &Value) -> Value {
    if result.get("error").is_some() || result.get("exception").is_some() {
        return result.clone();
    }
    match step["op"].as_str() {
        Some("list") => {
            let tools = result["tools"].as_array().into_iter().flatten();
            let ui: serde_json::Map<String, Value> = tools
                .map(|t| (str_of(t, "name").to_string(), t["_meta"]["ui"].clone()))
                .collect();
            json!({"ui": ui})
        }
        Some("resources") => {
            let all = result["resources"].as_array().into_iter().flatten();
            let mut seen: Vec<Value> = all
                .map(|r| json!({"uri": r["uri"], "description": r["description"], "mimeType": r["mimeType"]}))
                .collect();
            seen.sort_by_key(|r| r["uri"].to_string());
            json!({"resources": seen})
        }
        Some("read") => json!({"contents": result["contents"]}),
        _ => {
            let blocks = result["content_blocks"].clone();
            let structured = result["structured_content"].clone();
            if step["volatile"] == true {
                let types: Vec<Value> = blocks
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|b| b["type"].clone())
                    .collect();
                let keys: Vec<String> = structured
                    .as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default();
                return json!({"is_error": result["is_error"], "block_types": types, "structured_keys": keys});
            }
            json!({"is_error": result["is_error"], "content_blocks": blocks, "structured_content": structured})
        }
    }
}

/// What differed between the direct and the gateway's answers, with the gateway's log: asserted
/// empty at a test's end, so that the rest of the test (the narrowed contract) runs either way.
#[must_use = "assert_none() it"]
pub struct Differences {
    server: &'static str,
    found: Vec<String>,
    log: String,
}

impl Differences {
    /// Panics listing every difference.
    #[track_caller]
    pub fn assert_none(self) {
        assert!(
            self.found.is_empty(),
            "{}: {} answers differ through the gateway:\n{}\ngateway log (tail):\n{}",
            self.server,
            self.found.len(),
            self.found.join("\n"),
            self.log
        );
    }
}

/// Runs `steps` through every client, directly and through `gw`, all at once; returns every
/// step whose answers differ (or that failed directly: the comparison needs a real answer).
pub fn compare_through_gateway(server: &Stdio, gw: &Gateway, steps: &[Value]) -> Differences {
    let started = std::time::Instant::now();
    let runs: Vec<(Client, Vec<Value>, Vec<Value>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = CLIENTS
            .iter()
            .map(|&client| {
                let direct = scope.spawn(move || client.run(Target::Direct(server), steps));
                let through = scope.spawn(move || client.run(Target::Gateway(&gw.url), steps));
                (client, direct, through)
            })
            .collect();
        handles
            .into_iter()
            .map(|(client, direct, through)| {
                let joined = |h: std::thread::ScopedJoinHandle<'_, Vec<Value>>| {
                    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
                };
                (client, joined(direct), joined(through))
            })
            .collect()
    });
    // Where a slow test spends its time, in its output.
    eprintln!("{}: clients in {:?}", server.name, started.elapsed());
    // A tool error a server gave while eight clients and their servers shared two cores says
    // nothing of the gateway (seen: mcp-server-fetch's "Failed to fetch robots.txt due to a
    // connection issue", its HTTP client timing out while another fetch's HTML conversion held
    // the server's only event loop, on either side). Such a client asks again, alone, once, on
    // the side that failed: a gateway fault is deterministic and fails again; what still differs
    // is reported below.
    let runs: Vec<(Client, Vec<Value>, Vec<Value>)> = runs
        .into_iter()
        .map(|(client, direct, through)| {
            let failed = |answers: &[Value]| answers.iter().any(|a| a["is_error"] == true);
            let direct = match failed(&direct) {
                true => client.run(Target::Direct(server), steps),
                false => direct,
            };
            let through = match failed(&through) && !failed(&direct) {
                true => client.run(Target::Gateway(&gw.url), steps),
                false => through,
            };
            (client, direct, through)
        })
        .collect();
    let mut differences = Vec::new();
    for (client, direct, through) in &runs {
        for (i, step) in steps.iter().enumerate() {
            let d = comparable(step, &direct[i]);
            let g = comparable(step, &through[i]);
            if d.get("error").is_some() || d.get("exception").is_some() {
                differences.push(format!(
                    "{client:?} step {i} {step}: failed directly: {}",
                    short(&d)
                ));
            } else if d != g {
                differences.push(format!(
                    "{client:?} step {i} {step}:\n    direct:  {}\n    gateway: {}",
                    short(&d),
                    short(&g)
                ));
            }
        }
    }
    Differences {
        server: server.name,
        found: differences,
        log: tail(&gw.log(), 40),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(700) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `steps` (a JSON array) through `gw` with the Python SDK 2.x: the operator's narrowed contract
/// seen by a client.
pub fn py2_through(gw: &Gateway, steps: &Value) -> Vec<Value> {
    let steps = steps.as_array().expect("steps are an array");
    Client::Python2.run(Target::Gateway(&gw.url), steps)
}

/// One call step.
pub fn call(name: &str, arguments: Value) -> Value {
    json!({"op": "call", "name": name, "arguments": arguments})
}

/// Asserts a (Python SDK driver's) call result is the gateway's refusal naming `path` and `rule`.
pub fn assert_refused(result: &Value, path: &str, rule: &str) {
    let text = result["content"].to_string();
    assert_eq!(result["is_error"], true, "not refused: {result}");
    assert!(
        text.contains(path) && text.contains(rule),
        "not the gateway's refusal of {path} ({rule}): {result}"
    );
}

/// Asserts a step failed with JSON-RPC -32602 `Unknown tool: NAME`: a tool the contract leaves out.
pub fn assert_unknown_tool(result: &Value, name: &str) {
    let expected = json!({"code": -32602, "message": format!("Unknown tool: {name}")});
    assert_eq!(result["error"], expected, "{result}");
}

/// A Python venv server executable installed by tests/setup-peers.sh (`mcp-server-git`, ...).
pub fn py2_bin(name: &str) -> PathBuf {
    let path = peers_dir().join("py2/bin").join(name);
    assert!(
        path.exists(),
        "peer '{name}' is missing at {}: run tests/setup-peers.sh (or tests/run.sh, which runs it)",
        path.display()
    );
    path
}

/// Every file under `root` (relative path → contents), to prove a folder unchanged.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                out.push((path.strip_prefix(root).expect("under root").into(), bytes));
            }
        }
    }
    out.sort();
    out
}
