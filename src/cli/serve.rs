//! `narrowgate serve`: load, start the upstream supervisors, serve HTTP until SIGINT/SIGTERM,
//! and reload on SIGHUP or when the configuration file or contracts directory changes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::edge::{self as http, connections};
use crate::runtime::Version;
use crate::runtime::live::Live;
use crate::telemetry::{self, logs::LogFormat};

pub fn run(config_path: &Path, log_format: LogFormat, workers: Option<usize>) -> ExitCode {
    super::init_logging(log_format);
    let (config, contracts) = match super::load(config_path) {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("narrowgate: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match super::runtime(workers) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("narrowgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config_path.to_path_buf(), config, contracts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("narrowgate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(
    config_path: PathBuf,
    config: crate::config::Config,
    contracts: crate::contract::ContractSet,
) -> Result<(), String> {
    let addr = config.listen_addr();
    let path = config.path.clone();
    let telemetry = telemetry::install(config.telemetry.as_ref()).map_err(|e| e.to_string())?;
    let gateway = Version::new(config, contracts).map_err(|e| e.to_string())?;
    if !gateway.authenticator.has_callers() {
        tracing::warn!("no callers are configured: every request will be refused with 401");
    }
    let stop = CancellationToken::new();
    let contracts_dir = gateway.config.contracts.clone();
    let live = Live::start(gateway.clone(), stop.clone());
    tokio::spawn(reload_on_change(
        live.clone(),
        config_path,
        contracts_dir,
        stop.clone(),
        crate::config::Needs::Serve,
    ));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    tracing::info!(
        tools = gateway.contracts.tools.len(),
        "narrowgate listening on http://{local}{path}"
    );
    let app = http::router(live.clone(), stop.clone());
    let shutdown = stop.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        shutdown.cancel();
    });
    // Counts connections and applies the header timeout (`http:` in the configuration).
    connections::serve(listener, app, live, stop).await;
    // Export the spans still batched (blocking: off the runtime's worker threads).
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    Ok(())
}

pub(super) async fn wait_for_signal() {
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

/// Reloads on SIGHUP, and when the configuration file or a file of the contracts directory
/// changes (polled every second: no watcher dependency, and it works on every filesystem).
/// The files are read as the command that runs them reads them (`needs`).
pub(super) async fn reload_on_change(
    live: Arc<Live>,
    config_path: PathBuf,
    mut contracts_dir: PathBuf,
    stop: CancellationToken,
    needs: crate::config::Needs,
) {
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut seen = fingerprint(&config_path, &contracts_dir);
    let mut poll = tokio::time::interval(Duration::from_secs(1));
    loop {
        #[cfg(unix)]
        let signalled = async {
            match hangup.as_mut() {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let signalled = std::future::pending::<Option<()>>();
        let why = tokio::select! {
            _ = stop.cancelled() => return,
            _ = signalled => "SIGHUP",
            _ = poll.tick() => {
                if fingerprint(&config_path, &contracts_dir) == seen {
                    continue;
                }
                "a change of the configuration files"
            }
        };
        tracing::info!("reloading after {why}");
        match super::load_all(&config_path, &needs) {
            Err(problems) => {
                for e in problems {
                    tracing::error!("reload refused, the running configuration keeps serving: {e}")
                }
            }
            Ok((config, contracts)) => {
                let dir = config.contracts.clone();
                match live.reload(config, contracts) {
                    Ok(()) => contracts_dir = dir,
                    Err(e) => tracing::error!("{e}"),
                }
            }
        }
        seen = fingerprint(&config_path, &contracts_dir);
    }
}

/// What identifies a version of the files on disk: each file's path, size and modification time.
fn fingerprint(config: &Path, contracts: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let stat = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (p.to_path_buf(), m.len(), m.modified().ok()))
    };
    let mut files: Vec<_> = stat(config).into_iter().collect();
    if let Ok(entries) = std::fs::read_dir(contracts) {
        files.extend(
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| stat(&e.path())),
        );
    }
    files.sort();
    files
}
