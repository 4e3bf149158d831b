//! `narrowgate stdio`: the gateway for one client that launches it, speaking MCP on stdin and
//! stdout. Everything else is as under `serve`: the upstreams, contracts, receipts, approvals,
//! limits (shared with a fleet through `state: redis://…`) and reloads; logs go to stderr,
//! never to stdout, which carries MCP alone. Exits when the client closes stdin.

use std::path::Path;
use std::process::ExitCode;

use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio_util::sync::CancellationToken;

use crate::config::Needs;
use crate::edge::stdio::{Admitting, StdioCaller};
use crate::mcp::handler::McpHandler;
use crate::runtime::Version;
use crate::runtime::live::Live;
use crate::telemetry::{self, logs::LogFormat};

/// The environment variable holding the stdio client's API key (or OAuth token).
pub const KEY_VARIABLE: &str = "NARROWGATE_API_KEY";

/// How a stdio gateway ends: 2 for what the user must fix before it can start (the files, the
/// caller), 1 for what went wrong while it ran.
enum Failure {
    Setup(String),
    Running(String),
}

pub fn run(config_path: &Path, log_format: LogFormat) -> ExitCode {
    super::init_logging(log_format);
    let (config, contracts) = match super::load_all(config_path, &Needs::Stdio) {
        Ok(loaded) => loaded,
        Err(problems) => {
            for e in problems {
                eprintln!("narrowgate: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let runtime = match super::runtime(None) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("narrowgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let key = std::env::var(KEY_VARIABLE).ok();
    let ended = runtime.block_on(serve(config_path, config, contracts, key));
    // Upstream children are killed with their handles; nothing may wait on a blocked stdin read.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match ended {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Setup(e)) => {
            eprintln!("narrowgate: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Running(e)) => {
            tracing::error!("{e}");
            eprintln!("narrowgate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(
    config_path: &Path,
    config: crate::config::Config,
    contracts: crate::contract::ContractSet,
    key: Option<String>,
) -> Result<(), Failure> {
    let telemetry =
        telemetry::install(config.telemetry.as_ref()).map_err(|e| Failure::Setup(e.to_string()))?;
    let gateway = Version::new(config, contracts).map_err(|e| Failure::Setup(e.to_string()))?;
    let caller = StdioCaller::of(key, &gateway).map_err(|e| Failure::Setup(e.to_string()))?;
    let who = caller
        .resolve(&gateway)
        .await
        .map_err(|e| Failure::Setup(e.to_string()))?;
    let stop = CancellationToken::new();
    let contracts_dir = gateway.config.contracts.clone();
    let tools = gateway.contracts.tools.len();
    let live = Live::start(gateway, stop.clone());
    tokio::spawn(super::serve::reload_on_change(
        live.clone(),
        config_path.to_path_buf(),
        contracts_dir,
        stop.clone(),
        Needs::Stdio,
    ));
    first_attempts(&live).await;
    tracing::info!(caller = %who.name, tools, "narrowgate serving MCP on stdin/stdout");
    let gone = CancellationToken::new();
    let (stdin, stdout) = rmcp::transport::io::stdio();
    let transport = Admitting::new(
        AsyncRwTransport::new_server(stdin, stdout),
        live.clone(),
        caller,
        gone.clone(),
    );
    let ended = match McpHandler::new(live).serve(transport).await {
        Ok(service) => {
            tokio::select! {
                quit = service.waiting() => quit.map(|_| ()).map_err(|e| Failure::Running(format!("the stdio session failed: {e}"))),
                () = super::serve::wait_for_signal() => Ok(()),
            }
        }
        // The client went away before initializing: nothing to serve.
        Err(e) if gone.is_cancelled() => {
            tracing::info!("the client closed stdin before initializing: {e}");
            Ok(())
        }
        Err(e) => Err(Failure::Running(format!(
            "the stdio client's initialization failed: {e}"
        ))),
    };
    tracing::info!("stdio client gone, shutting down");
    stop.cancel();
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    ended
}

/// The longest a stdio gateway waits for its upstreams' first connection attempts.
const FIRST_ATTEMPTS_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits until every upstream's first connection attempt has ended (up or down), at most
/// [`FIRST_ATTEMPTS_WITHIN`]. A desktop client launches the gateway and calls at once; a
/// listening gateway has long been running by then (and `/readyz` says when it is ready).
async fn first_attempts(live: &Live) {
    let gateway = live.current();
    let started = tokio::time::Instant::now();
    while gateway
        .kept
        .upstreams
        .values()
        .any(|u| u.snapshot().status == crate::upstream::Status::Starting)
        && started.elapsed() < FIRST_ATTEMPTS_WITHIN
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The catalog follows the upstreams' states a moment later (its rebuild is a task of its
    // own): join them now, so that the first call finds the tools the upstream listed.
    gateway.rebuild_catalog();
}
