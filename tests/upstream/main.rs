//! `demo-upstream`: the repository's own MCP upstream server.
//!
//! It is used by the example configuration (`cargo run --bin demo-upstream`), by the
//! integration tests (as a conforming and a deliberately non-conforming upstream) and by the
//! benchmarks. It serves a fixed set of tools (see `catalog.rs`), and everything the official MCP
//! conformance suite's server scenarios call (`conformance.rs`: tools; `content.rs`: resources,
//! prompts, completions), over either stdio or Streamable HTTP:
//!
//! ```text
//! demo-upstream stdio [--legacy]
//! demo-upstream http --port 0 [--host 127.0.0.1] [--stateless] [--session-idle-ms N]
//!                    [--modern-only-tool] [--legacy] [--modern-declares-less] [--listen-ndjson]
//!                    [--asks-on-stream] [--asks-on-standalone]
//! ```
//!
//! In HTTP mode it prints exactly one line, `listening on http://HOST:PORT/mcp`, to stdout once
//! the listening socket is bound. Logs (`RUST_LOG`, default `warn`) always go to stderr.

// `cargo test --bin demo-upstream` builds this under the test harness (unit tests in
// `tools.rs`), where `main` and everything only it reaches are unused, which is expected.
#![cfg_attr(test, allow(dead_code))]

mod ask;
mod asks_on_stream;
mod catalog;
mod conformance;
mod content;
mod handler;
mod ndjson_listen;
mod reconnect;
mod relay;
mod subscriptions;
mod tools;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt as _;
use clap::{Parser, Subcommand};
use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::handler::DemoUpstream;
use crate::reconnect::Sessions;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Parser)]
#[command(
    name = "demo-upstream",
    about = "The narrowgate demo MCP upstream server"
)]
struct Cli {
    #[command(subcommand)]
    transport: Transport,
}

#[derive(Debug, Subcommand)]
enum Transport {
    /// Serve MCP over stdin/stdout (newline-delimited JSON-RPC).
    Stdio {
        /// Answer `server/discover` as a legacy server (2025-11-25 and before) does: clients
        /// then open with `initialize`.
        #[arg(long)]
        legacy: bool,
    },
    /// Serve MCP over Streamable HTTP at `/mcp`.
    Http {
        /// Port to listen on; 0 picks a free port (read it from the `listening on` line).
        #[arg(long)]
        port: u16,
        /// Address to bind.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Stateless mode: no `Mcp-Session-Id`, plain JSON responses.
        #[arg(long)]
        stateless: bool,
        /// Close a session after this many milliseconds without activity (rmcp's default: 5 min).
        #[arg(long)]
        session_idle_ms: Option<u64>,
        /// Also offer the `modern_only` tool, to 2026-07-28 clients only.
        #[arg(long)]
        modern_only_tool: bool,
        /// Answer `server/discover` as a legacy server (2025-11-25 and before) does: clients
        /// then open a session with `initialize`.
        #[arg(long)]
        legacy: bool,
        /// Declare on 2026-07-28 only what the conformance suite's reference server declares
        /// there (no resource subscriptions, no completions, no logging), and, as there, let
        /// no tool ask the client on that revision; sessions still get everything.
        #[arg(long)]
        modern_declares_less: bool,
        /// Answer `subscriptions/listen` as the conformance suite's reference server does:
        /// newline-delimited JSON (not SSE), acknowledging only list changes.
        #[arg(long)]
        listen_ndjson: bool,
        /// On 2026-07-28, ask the client (sampling, elicitation) with a request on the call's
        /// own answer stream, as a session would, instead of a multi round-trip request.
        #[arg(long)]
        asks_on_stream: bool,
        /// In a session, ask the client on the session's standalone stream (`GET`) rather
        /// than on the call's own answer stream.
        #[arg(long)]
        asks_on_standalone: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("demo-upstream: cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.transport {
            Transport::Stdio { legacy } => serve_stdio(DemoUpstream::new().legacy(legacy)).await,
            Transport::Http {
                port,
                host,
                stateless,
                session_idle_ms,
                modern_only_tool,
                legacy,
                modern_declares_less,
                listen_ndjson,
                asks_on_stream,
                asks_on_standalone,
            } => {
                ask::ON_STANDALONE.store(asks_on_standalone, std::sync::atomic::Ordering::Relaxed);
                let handler = DemoUpstream::new()
                    .with_modern_only_tool(modern_only_tool)
                    .legacy(legacy)
                    .modern_declares_less(modern_declares_less);
                let modes = Modes {
                    stateless,
                    session_idle_ms,
                    listen_ndjson,
                    asks_on_stream,
                };
                serve_http(handler, &host, port, modes).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("demo-upstream: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr only: stdout carries the protocol (stdio) or the `listening on` line (http).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// 2026-07-28 when the client offers it (rmcp's server takes `server/discover` and
/// `initialize` alike), unless the handler is `legacy`.
async fn serve_stdio(handler: DemoUpstream) -> Result<(), BoxError> {
    let service = handler.serve(rmcp::transport::stdio_pipes()).await?;
    service.waiting().await?;
    Ok(())
}

/// How the HTTP server answers, besides the handler.
struct Modes {
    stateless: bool,
    session_idle_ms: Option<u64>,
    listen_ndjson: bool,
    asks_on_stream: bool,
}

async fn serve_http(
    handler: DemoUpstream,
    host: &str,
    port: u16,
    modes: Modes,
) -> Result<(), BoxError> {
    let Modes {
        stateless,
        session_idle_ms,
        listen_ndjson,
        asks_on_stream,
    } = modes;
    let shutdown = CancellationToken::new();
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    if stateless {
        config = config
            .with_legacy_session_mode(false)
            .with_json_response(true);
    }
    // One shared state for the whole process: every session (or, stateless, every request)
    // gets a cheap clone, so the tool list, the `extra` toggle and the counter are global; the
    // log level and resource subscriptions are per session.
    let mut local = LocalSessionManager::default();
    if let Some(ms) = session_idle_ms {
        local.session_config.keep_alive = Some(Duration::from_millis(ms));
    }
    let sessions = Arc::new(Sessions::new(local));
    let handler = handler.with_sessions(Arc::clone(&sessions));
    let service = StreamableHttpService::new(move || Ok(handler.for_session()), sessions, config);
    let mut app = axum::Router::new().nest_service("/mcp", service);
    if listen_ndjson {
        app = app.layer(axum::middleware::from_fn(ndjson_listen::answer));
    }
    if asks_on_stream {
        let asked = asks_on_stream::Asked::default();
        app = app.layer(axum::middleware::from_fn(move |request, next| {
            asks_on_stream::answer(asked.clone(), request, next)
        }));
    }

    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .map_err(|error| format!("cannot bind {host}:{port}: {error}"))?;
    let addr = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{addr}/mcp")?;
        stdout.flush()?;
    }

    // Without TCP_NODELAY an SSE answer written in two segments waits for the client's delayed
    // ACK (about 40 ms), which would make "direct" look slow in the benchmarks.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            shutdown.cancel();
        })
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
