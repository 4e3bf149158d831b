//! The gateway: the MCP server clients talk to, and the pipeline every `tools/call` goes through.
//!
//! [`Gateway`] is the shared state (configuration, contracts, upstreams, the current catalog);
//! [`server`] is the MCP face of it, [`pipeline`] the life of one call, [`http`] the HTTP layers
//! around the MCP endpoint (Host/Origin checks, authentication, session ownership).

pub mod catalog;
pub mod dedupe;
pub mod health;
pub mod http;
pub mod pipeline;
pub mod server;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::contract::ContractSet;
use crate::policy::Authenticator;
use crate::policy::limits::Limits;
use crate::receipts::{ReceiptError, ReceiptLog, Settings};
use crate::upstream::Upstream;
use catalog::Catalog;
use dedupe::DedupeCache;

/// Everything a request needs, shared by all sessions.
pub struct Gateway {
    pub config: Config,
    pub contracts: ContractSet,
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
    pub authenticator: Authenticator,
    /// Rate limits (SPEC §4.7), in memory or shared through Redis.
    pub limits: Limits,
    /// Where every `tools/call` leaves its receipt (SPEC §4.11).
    pub receipts: ReceiptLog,
    /// Recorded answers of `dedupe` tools, for at-most-once within their window.
    pub dedupe: DedupeCache,
    catalog: RwLock<Arc<Catalog>>,
    /// Bumped whenever the published tools change, so sessions can tell their clients.
    tools_changed: watch::Sender<u64>,
}

impl Gateway {
    /// Fails only if the receipts database cannot be opened: a gateway that could not leave
    /// receipts must not serve calls.
    pub fn new(config: Config, contracts: ContractSet) -> Result<Arc<Gateway>, ReceiptError> {
        let receipts = ReceiptLog::open(&Settings::of(&config))?;
        let upstreams = config
            .upstreams
            .iter()
            .map(|(name, u)| (name.clone(), Arc::new(Upstream::new(name, u))))
            .collect();
        let authenticator = Authenticator::from_config(&config);
        let limits = Limits::from_config(&config);
        let gateway = Gateway {
            config,
            contracts,
            upstreams,
            authenticator,
            limits,
            receipts,
            dedupe: DedupeCache::default(),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            tools_changed: watch::Sender::new(0),
        };
        gateway.rebuild_catalog();
        Ok(Arc::new(gateway))
    }

    /// The current catalog. Cheap: one `Arc` clone under a read lock.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Re-joins the contracts with the upstreams' current tool lists.
    pub fn rebuild_catalog(&self) {
        let snapshots = self
            .upstreams
            .iter()
            .map(|(name, u)| (name.clone(), u.snapshot()))
            .collect();
        let catalog = Arc::new(Catalog::build(&self.contracts, &snapshots));
        let previous = std::mem::replace(
            &mut *self.catalog.write().unwrap_or_else(|p| p.into_inner()),
            catalog.clone(),
        );
        if previous.published_tools() != catalog.published_tools() {
            self.tools_changed.send_modify(|version| *version += 1);
        }
    }

    /// A receiver that wakes whenever the published tools change.
    pub fn watch_tools(&self) -> watch::Receiver<u64> {
        self.tools_changed.subscribe()
    }

    /// Starts one supervisor per upstream and a task that rebuilds the catalog when any of them
    /// changes. Everything stops when `stop` is cancelled.
    pub fn start(self: &Arc<Self>, stop: CancellationToken) {
        let (changed_tx, mut changed_rx) = mpsc::unbounded_channel::<String>();
        for upstream in self.upstreams.values() {
            tokio::spawn(upstream.clone().supervise(changed_tx.clone(), stop.clone()));
        }
        let gateway = self.clone();
        tokio::spawn(async move {
            while let Some(name) = changed_rx.recv().await {
                // Coalesce a burst of changes into one rebuild.
                while changed_rx.try_recv().is_ok() {}
                tracing::debug!(upstream = %name, "rebuilding catalog");
                gateway.rebuild_catalog();
            }
        });
    }

    /// Whether every upstream has been tried at least once.
    pub fn all_upstreams_tried(&self) -> bool {
        self.catalog()
            .upstream_status
            .values()
            .all(|status| *status != crate::upstream::Status::Starting)
    }
}
