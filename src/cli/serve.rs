//! `narrowgate serve`: load, start the upstream supervisors, serve HTTP until SIGINT/SIGTERM.

use std::path::Path;
use std::process::ExitCode;

use axum::serve::ListenerExt as _;
use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, http};
use crate::telemetry::{self, logs::LogFormat};

pub fn run(config_path: &Path, log_format: LogFormat) -> ExitCode {
    super::init_logging(log_format);
    let (config, contracts) = match super::load(config_path) {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("narrowgate: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("narrowgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config, contracts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("narrowgate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(
    config: crate::config::Config,
    contracts: crate::contract::ContractSet,
) -> Result<(), String> {
    let addr = config.listen_addr();
    let path = config.path.clone();
    let telemetry = telemetry::install(config.telemetry.as_ref()).map_err(|e| e.to_string())?;
    let gateway = Gateway::new(config, contracts).map_err(|e| e.to_string())?;
    if !gateway.authenticator.has_callers() {
        tracing::warn!("no callers are configured: every request will be refused with 401");
    }
    let stop = CancellationToken::new();
    gateway.start(stop.clone());
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(
        tools = gateway.contracts.tools.len(),
        "narrowgate listening on http://{local}{path}"
    );
    let app = http::router(gateway, stop.clone());
    let shutdown = stop.clone();
    // Without TCP_NODELAY, a response written in two segments waits for the client's delayed ACK
    // (about 40 ms per call on a kept-alive connection).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            wait_for_signal().await;
            tracing::info!("shutting down");
            shutdown.cancel();
        })
        .await
        .map_err(|e| e.to_string());
    // Export the spans still batched (blocking: off the runtime's worker threads).
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    served
}

async fn wait_for_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
