//! `hostile-upstream`: an MCP upstream that misbehaves on purpose, for the gateway's tests.
//!
//! It speaks raw JSON-RPC (not through rmcp's server, so it can send what no SDK would) over stdio
//! or Streamable HTTP, and with no attack chosen it is a plain, conforming upstream with two tools:
//! `echo` (`{text}`: answers the text) and `notify_changed` (sends
//! `notifications/tools/list_changed` on the call's stream). `SIGUSR1` also sends a list_changed,
//! on the standalone stream (HTTP) or stdout (stdio).
//!
//! ```text
//! hostile-upstream stdio [--attack NAME]... [--record FILE] [--hold-lists FILE] [--flood-count N]
//!                        [--stderr-bytes N]
//! hostile-upstream http --port 0 [--host 127.0.0.1] [same options]
//! ```
//!
//! In HTTP mode it prints exactly one line, `listening on http://HOST:PORT/mcp`, to stdout once
//! bound. `--record FILE` appends every JSON-RPC message it receives to FILE, one per line (tests
//! count `tools/list` requests or read the `_meta` a call carried). While the file named by
//! `--hold-lists` exists, `tools/list` requests wait for its removal.
//!
//! Attacks (`--attack NAME`, several allowed), each family in its own file:
//!
//! - `flood.rs`:
//!   - `ping-flood`: every `tools/call` first sends `--flood-count` (default 20,000) `ping`
//!     requests on the call's answer stream, then the answer.
//!   - `ping-flood-standalone`: the same on the standalone stream (HTTP `GET`; stdout on
//!     stdio), unrelated to any request.
//!   - `list-changed-flood`: every `tools/call` first sends `--flood-count` (default 5,000)
//!     `notifications/tools/list_changed`; just before the last one the tool list gains `fresh`
//!     (so a gateway that coalesces must still end with the current list).
//!   - `stderr-lines`: at start, `--flood-count` (default 100,000) short lines on stderr.
//!   - `stderr-flood`: at start, writes `--stderr-bytes` (default 400 MiB) to stderr without a
//!     newline, beginning with terminal control sequences, then the line `after the flood`.
//! - `text.rs`:
//!   - `schema-injection`: `tools/list` carries "IGNORE ALL PREVIOUS INSTRUCTIONS" in the
//!     schema's description, title, examples, `$comment` and `x-*` keys, and `echo.text` gains a
//!     `pattern` the contract does not have.
//!   - `error-content`: `echo` answers a tool error with control characters, an image, an
//!     embedded resource, a resource link and a structuredContent no contract admits.
//!   - `rpc-error-huge`: `echo` answers a JSON-RPC error with a 3 MB message.
//!   - `output-contradiction`: `echo` declares an outputSchema whose `text` is an integer.
//!   - `result-key-leak`: `echo`'s structuredContent gains a key and value with instructions.
//!   - `not-a-result`: `echo` answers something that is not a tool result (`content` a string).
//!
//! Logs go to stderr only.

// `cargo test --all-targets` builds this under the test harness, where `main` is unused.
#![cfg_attr(test, allow(dead_code))]

mod flood;
mod http;
mod text;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Parser)]
#[command(
    name = "hostile-upstream",
    about = "An MCP upstream that misbehaves on purpose"
)]
struct Cli {
    #[command(subcommand)]
    transport: Transport,
}

#[derive(Debug, Subcommand)]
enum Transport {
    /// Serve over stdin/stdout (newline-delimited JSON-RPC).
    Stdio {
        #[command(flatten)]
        options: Options,
    },
    /// Serve Streamable HTTP at `/mcp`.
    Http {
        /// Port to listen on; 0 picks a free one (read it from the `listening on` line).
        #[arg(long)]
        port: u16,
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        #[command(flatten)]
        options: Options,
    },
}

#[derive(Debug, Args)]
struct Options {
    /// An attack to run (see the module documentation); repeat for several.
    #[arg(long = "attack")]
    attacks: Vec<String>,
    /// Append every received JSON-RPC message to this file, one per line.
    #[arg(long)]
    record: Option<PathBuf>,
    /// How many messages a flood sends (each flood has its own default).
    #[arg(long)]
    flood_count: Option<u64>,
    /// While this file exists, `tools/list` requests wait (a test holds a client's re-list
    /// in flight while it sets off a flood).
    #[arg(long)]
    hold_lists: Option<PathBuf>,
    /// How many bytes `stderr-flood` writes.
    #[arg(long, default_value_t = 400 * 1024 * 1024)]
    stderr_bytes: u64,
}

/// The upstream's state, shared by every connection and request.
pub struct Hostile {
    attacks: BTreeSet<String>,
    pub flood_count: Option<u64>,
    pub stderr_bytes: u64,
    record: Option<Mutex<std::fs::File>>,
    /// `list-changed-flood` has added the tool `fresh`.
    pub fresh: AtomicBool,
    /// While this file exists, `tools/list` is not answered.
    hold_lists: Option<PathBuf>,
    /// How often `notify_changed` (or SIGUSR1) has been used: attacks may change the list by it.
    pub generation: AtomicU64,
    /// The streams that carry messages unrelated to a request: stdout (stdio), or every open
    /// `GET` stream (HTTP).
    standalone: Mutex<Vec<Stream>>,
}

/// Where messages for the client go: a request's answer stream, or a standalone one.
#[derive(Clone)]
pub struct Stream(mpsc::Sender<String>);

impl Stream {
    /// Sends `message`; false once the stream is gone (the client stopped reading).
    pub async fn send(&self, message: &Value) -> bool {
        self.0.send(message.to_string()).await.is_ok()
    }
}

impl Hostile {
    fn new(options: Options) -> Result<Hostile, BoxError> {
        let known: Vec<&str> = flood::ATTACKS
            .iter()
            .chain(text::ATTACKS)
            .map(|(name, _)| *name)
            .collect();
        for attack in &options.attacks {
            if !known.contains(&attack.as_str()) {
                return Err(
                    format!("unknown attack `{attack}`; known: {}", known.join(", ")).into(),
                );
            }
        }
        let record = match &options.record {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("cannot open {}: {e}", path.display()))?,
            )),
            None => None,
        };
        Ok(Hostile {
            attacks: options.attacks.into_iter().collect(),
            flood_count: options.flood_count,
            stderr_bytes: options.stderr_bytes,
            record,
            fresh: AtomicBool::new(false),
            hold_lists: options.hold_lists,
            generation: AtomicU64::new(0),
            standalone: Mutex::new(Vec::new()),
        })
    }

    /// Whether the attack `name` was chosen.
    pub fn has(&self, name: &str) -> bool {
        self.attacks.contains(name)
    }

    /// Notes a received message in the record file, if there is one.
    fn record(&self, line: &str) {
        if let Some(file) = &self.record {
            let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
            // One write per line, so a reader never sees half of one.
            let _ = file.write_all(format!("{}\n", line.trim()).as_bytes());
        }
    }

    /// Sends `message` on every standalone stream.
    pub async fn broadcast(&self, message: &Value) {
        let streams: Vec<Stream> = self
            .standalone
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for stream in streams {
            stream.send(message).await;
        }
    }

    fn add_standalone(&self, stream: Stream) {
        let mut all = self.standalone.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|s| !s.0.is_closed());
        all.push(stream);
    }

    /// The tool list as it stands, after every attack had its say.
    fn tools(&self) -> Vec<Value> {
        let mut tools = vec![
            json!({
                "name": "echo",
                "description": "Answers its text.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "text": { "type": "string" } },
                    "required": ["text"]
                }
            }),
            json!({
                "name": "notify_changed",
                "description": "Sends notifications/tools/list_changed.",
                "inputSchema": { "type": "object" }
            }),
        ];
        flood::tools(self, &mut tools);
        text::tools(self, &mut tools);
        tools
    }

    /// Handles one received message: the answer to send for a request, `None` for anything else.
    /// `stream` is where the request's own messages (floods, notifications) go.
    async fn handle(self: Arc<Self>, message: Value, stream: Stream) -> Option<Value> {
        let id = message.get("id").cloned()?;
        let method = message.get("method").and_then(Value::as_str)?;
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => Ok(initialize_result(&params)),
            "ping" => Ok(json!({})),
            "tools/list" => {
                while self.hold_lists.as_ref().is_some_and(|hold| hold.exists()) {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Ok(json!({ "tools": self.tools() }))
            }
            "tools/call" => self.call(&params, &stream).await,
            other => Err((-32601, format!("Method not found: {other}"))),
        };
        Some(match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        })
    }

    async fn call(&self, params: &Value, stream: &Stream) -> Result<Value, (i64, String)> {
        flood::on_call(self, stream).await;
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(answer) = text::on_call(self, name) {
            return answer;
        }
        match name {
            "echo" => {
                let text = params
                    .pointer("/arguments/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Ok(json!({"content": [{"type": "text", "text": text}], "isError": false}))
            }
            "fresh" => {
                Ok(json!({"content": [{"type": "text", "text": "fresh"}], "isError": false}))
            }
            "notify_changed" => {
                self.generation.fetch_add(1, Ordering::SeqCst);
                stream.send(&list_changed()).await;
                Ok(json!({"content": [{"type": "text", "text": "sent"}], "isError": false}))
            }
            other => Err((-32602, format!("Unknown tool: {other}"))),
        }
    }

    /// On SIGUSR1: a list_changed notification on the standalone streams.
    async fn notify_on_signal(self: Arc<Self>) {
        let Ok(mut signal) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        else {
            return;
        };
        while signal.recv().await.is_some() {
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.broadcast(&list_changed()).await;
        }
    }
}

pub fn list_changed() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
}

/// The client's protocol version, up to 2025-11-25 (newer ones take the gateway off its forwarder
/// path, which the floods must reach).
fn initialize_result(params: &Value) -> Value {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("2025-06-18");
    let version = if asked > "2025-11-25" {
        "2025-11-25"
    } else {
        asked
    };
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": true } },
        "serverInfo": { "name": "hostile-upstream", "version": "1.0.0" }
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("hostile-upstream: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.transport {
            Transport::Stdio { options } => serve_stdio(Arc::new(Hostile::new(options)?)).await,
            Transport::Http {
                port,
                host,
                options,
            } => http::serve(Arc::new(Hostile::new(options)?), &host, port).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hostile-upstream: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Newline-delimited JSON-RPC on stdin/stdout. Each request is handled in a task of its own, so a
/// flood on one does not stop the others (or the client's answers to the flood) being read.
async fn serve_stdio(state: Arc<Hostile>) -> Result<(), BoxError> {
    let (tx, mut rx) = mpsc::channel::<String>(1024);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if stdout
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
                || stdout.flush().await.is_err()
            {
                return;
            }
        }
    });
    let stdout = Stream(tx);
    state.add_standalone(stdout.clone());
    flood::on_start(&state);
    tokio::spawn(state.clone().notify_on_signal());
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        state.record(&line);
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (state, stream) = (state.clone(), stdout.clone());
        tokio::spawn(async move {
            if let Some(answer) = state.handle(message, stream.clone()).await {
                stream.send(&answer).await;
            }
        });
    }
    drop(stdout);
    state
        .standalone
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
    let _ = writer.await;
    Ok(())
}
