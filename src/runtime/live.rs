//! The version in force, and reload (docs/semantics.md).
//!
//! [`Live`] holds the current [`Version`] version. Every request takes the version in force when
//! it starts and keeps it until answered; a reload builds and checks a whole new version first
//! (an invalid one is refused and the running one keeps serving), then swaps it in. Upstream
//! connections whose configuration did not change are carried over; those that are gone are
//! stopped only once the calls of the old version have finished.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::contract::ContractSet;
use crate::runtime::Version;
use crate::upstream::Upstream;

/// How long a retired version may keep its upstreams for calls still in flight.
const DRAIN_AT_MOST: Duration = Duration::from_secs(300);

/// The gateway version in force, and the upstream supervisors behind all versions.
pub struct Live {
    current: RwLock<Arc<Version>>,
    /// Supervisors report status and tool-list changes here; the current version is re-joined.
    changed: mpsc::UnboundedSender<String>,
    /// One stop token per supervised upstream, by the upstream's address.
    supervisors: Mutex<HashMap<usize, CancellationToken>>,
    stop: CancellationToken,
}

/// Why a reload was refused.
#[derive(Debug, thiserror::Error)]
#[error("reload refused, the running configuration keeps serving: {0}")]
pub struct ReloadError(String);

impl Live {
    /// Puts `gateway` in force and starts its upstream supervisors; everything stops with `stop`.
    pub fn start(gateway: Arc<Version>, stop: CancellationToken) -> Arc<Live> {
        let (changed, mut changes) = mpsc::unbounded_channel::<String>();
        let live = Arc::new(Live {
            current: RwLock::new(gateway.clone()),
            changed,
            supervisors: Mutex::new(HashMap::new()),
            stop,
        });
        for (name, upstream) in &gateway.kept.upstreams {
            upstream.declare_extensions(gateway.contracts.used_extensions(name));
            live.supervise(upstream);
        }
        let rebuild = Arc::downgrade(&live);
        tokio::spawn(async move {
            while let Some(name) = changes.recv().await {
                // Coalesce a burst of changes into one rebuild.
                while changes.try_recv().is_ok() {}
                let Some(live) = rebuild.upgrade() else {
                    return;
                };
                tracing::debug!(upstream = %name, "rebuilding catalog");
                live.current().rebuild_catalog();
            }
        });
        live
    }

    /// The version in force. Cheap: one `Arc` clone under a read lock.
    pub fn current(&self) -> Arc<Version> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn supervise(&self, upstream: &Arc<Upstream>) {
        let token = self.stop.child_token();
        self.supervisors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key(upstream), token.clone());
        tokio::spawn(upstream.clone().supervise(self.changed.clone(), token));
    }

    /// Builds a version from `config` and `contracts` and puts it in force. On error nothing
    /// changes.
    pub fn reload(&self, config: Config, contracts: ContractSet) -> Result<(), ReloadError> {
        let old = self.current();
        if config.listen != old.config.listen || config.path != old.config.path {
            tracing::warn!(
                "`listen` and `path` changes take effect at the next restart; the rest is reloaded"
            );
        }
        let new = Version::build(config, contracts, Some(&old))
            .map_err(|e| ReloadError(e.to_string()))?;
        for (name, upstream) in &new.kept.upstreams {
            // A kept connection declares them when it next connects.
            upstream.declare_extensions(new.contracts.used_extensions(name));
            if !old
                .kept
                .upstreams
                .values()
                .any(|o| Arc::ptr_eq(o, upstream))
            {
                self.supervise(upstream);
            }
        }
        let retired: Vec<Arc<Upstream>> = old
            .kept
            .upstreams
            .values()
            .filter(|o| !new.kept.upstreams.values().any(|n| Arc::ptr_eq(n, o)))
            .cloned()
            .collect();
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = new.clone();
        tracing::info!(
            tools = new.contracts.tools.len(),
            upstreams = new.kept.upstreams.len(),
            "configuration reloaded"
        );
        if !retired.is_empty() {
            let tokens: Vec<CancellationToken> = {
                let mut supervisors = self.supervisors.lock().unwrap_or_else(|p| p.into_inner());
                retired
                    .iter()
                    .filter_map(|u| supervisors.remove(&key(u)))
                    .collect()
            };
            tokio::spawn(async move {
                // Calls that started under the old version still hold it: let them finish on
                // the connections they started with.
                let deadline = Instant::now() + DRAIN_AT_MOST;
                while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                drop(old);
                for token in tokens {
                    token.cancel();
                }
                let names: Vec<&str> = retired.iter().map(|u| u.name.as_str()).collect();
                tracing::info!(upstreams = ?names, "retired upstream connections stopped");
            });
        }
        Ok(())
    }
}

fn key(upstream: &Arc<Upstream>) -> usize {
    Arc::as_ptr(upstream) as usize
}
