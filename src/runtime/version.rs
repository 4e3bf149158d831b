//! The gateway: the MCP server clients talk to, and the pipeline every `tools/call` goes through.
//!
//! [`Version`] is one version of the shared state (configuration, contracts, upstreams, the
//! current catalog); [`live::Live`] holds the version in force and swaps in a new one on reload;
//! [`http`] holds the HTTP layers around the MCP endpoint (admission, Host/Origin checks, the body,
//! authentication, session ownership), which carry each request's version, caller and parsed body
//! in a [`request::Admitted`] and refuse with one `Rejection` type; [`server`] is rmcp's handler
//! and `direct` the gateway's own answer to plain `tools/call` requests, both running
//! [`pipeline`], the life of one call. ARCHITECTURE.md at the repository's root walks through it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::approvals::Approvals;
use crate::config::{Config, StateBackend};
use crate::contract::ContractSet;
use crate::mrtr::holders::Holders;
use crate::mrtr::parked::ParkedCalls;
use crate::policy::Authenticator;
use crate::policy::limits::Limits;
use crate::policy::resource::ProtectedResource;
use crate::receipts::{ReceiptError, ReceiptLog, Settings};
use crate::runtime::catalog::Catalog;
use crate::state::dedupe::DedupeCache;
use crate::state::log_levels::LogLevels;
use crate::state::shared_sessions::SharedSessions;
use crate::upstream::Upstream;

/// Everything a request needs, shared by all sessions: one version of the configuration.
/// A request holds its version (`Arc<Version>`) until it is answered, so a reload never changes
/// the rules under a call in flight.
pub struct Version {
    pub config: Config,
    pub contracts: ContractSet,
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
    pub authenticator: Authenticator,
    /// Rate limits (docs/semantics.md), in memory or shared through Redis.
    pub limits: Arc<Limits>,
    /// Where every `tools/call` leaves its receipt (docs/semantics.md).
    pub receipts: Arc<ReceiptLog>,
    receipt_settings: Settings,
    /// Recorded answers of `dedupe` tools, for at-most-once within their window (in memory, or
    /// shared by replicas through Redis).
    pub dedupe: Arc<DedupeCache>,
    /// The gateway as an OAuth protected resource (`None` without `oauth`).
    pub resource: Option<Arc<ProtectedResource>>,
    /// Whether any contract requires scopes (else `tools/call` bodies are not inspected early).
    pub any_scopes: bool,
    /// Calls held for approvers (`approval: approver`), shared by every version.
    pub approvals: Arc<Approvals>,
    /// Whether any contract has `approval: approver`: only then does the HTTP layer watch for
    /// a client going away while its call waits.
    pub any_approver: bool,
    /// Whether any contract has `approval: user`: only then does the direct path look for
    /// calls it must leave to rmcp (which can ask the client).
    pub any_user_approval: bool,
    catalog: RwLock<Arc<Catalog>>,
    /// The logging level each client session set (`relay::levels`), kept across reloads.
    pub log_levels: Arc<LogLevels>,
    /// Stateless calls waiting for their clients' answers to the upstream's requests; kept
    /// across reloads (a call parked under one version is answered under the next).
    pub parked: Arc<ParkedCalls>,
    /// Which caller holds which sessions across the replicas (with `state: redis://…`).
    pub shared_sessions: Arc<SharedSessions>,
    /// Bumped whenever the published tools change, so sessions can tell their clients. Shared
    /// by every version, so a session hears of changes made by a reload too.
    tools_changed: Arc<watch::Sender<u64>>,
}

impl Version {
    /// Fails only if the receipts database cannot be opened: a gateway that could not leave
    /// receipts must not serve calls.
    pub fn new(config: Config, contracts: ContractSet) -> Result<Arc<Version>, ReceiptError> {
        Version::build(config, contracts, None)
    }

    /// A version built from `config` and `contracts`. What the new configuration leaves
    /// unchanged is carried over from `previous`: upstream connections (same transport and
    /// timeout), the receipt log (same settings), the rate-limit state and the dedupe records
    /// (same `state`).
    pub fn build(
        config: Config,
        contracts: ContractSet,
        previous: Option<&Version>,
    ) -> Result<Arc<Version>, ReceiptError> {
        let receipt_settings = Settings::of(&config);
        let receipts = match previous {
            Some(p) if p.receipt_settings == receipt_settings => p.receipts.clone(),
            _ => Arc::new(ReceiptLog::open(&receipt_settings)?),
        };
        let upstreams = config
            .upstreams
            .iter()
            .map(|(name, u)| {
                let fresh = Upstream::new(name, u);
                let kept = previous
                    .and_then(|p| p.upstreams.get(name))
                    .filter(|old| {
                        old.transport == fresh.transport
                            && old.default_timeout == fresh.default_timeout
                    })
                    .cloned();
                (name.clone(), kept.unwrap_or_else(|| Arc::new(fresh)))
            })
            .collect();
        let authenticator = Authenticator::from_config(&config);
        // Rate-limit state and dedupe records survive a reload unless `state` now points
        // elsewhere.
        let state = config.state_backend().unwrap_or(StateBackend::Memory);
        let limits = previous
            .map(|p| p.limits.clone())
            .filter(|l| l.serves(&state))
            .unwrap_or_else(|| Arc::new(Limits::from_config(&config)));
        let dedupe = previous
            .map(|p| p.dedupe.clone())
            .filter(|d| d.serves(&state))
            .unwrap_or_else(|| Arc::new(DedupeCache::from_config(&config)));
        let shared_sessions = previous
            .map(|p| p.shared_sessions.clone())
            .filter(|s| s.serves(&state))
            .unwrap_or_else(|| Arc::new(SharedSessions::from_config(&config)));
        let resource = ProtectedResource::from_config(&config, &contracts).map(Arc::new);
        let any_scopes = contracts.tools.values().any(|t| !t.scopes.is_empty());
        let any_approver = contracts
            .tools
            .values()
            .any(|t| t.approval == crate::contract::Approval::Approver);
        let any_user_approval = contracts
            .tools
            .values()
            .any(|t| t.approval == crate::contract::Approval::User);
        let approvals = previous
            .map(|p| p.approvals.clone())
            .filter(|a| a.serves(&state))
            .unwrap_or_else(|| Arc::new(Approvals::from_config(&config)));
        let gateway = Version {
            config,
            contracts,
            upstreams,
            authenticator,
            limits,
            receipts,
            receipt_settings,
            dedupe,
            resource,
            any_scopes,
            approvals,
            any_approver,
            any_user_approval,
            // Start from the previous catalog, so the rebuild below tells sessions only of a
            // real change in what they see.
            catalog: RwLock::new(previous.map(|p| p.catalog()).unwrap_or_default()),
            log_levels: previous.map(|p| p.log_levels.clone()).unwrap_or_default(),
            parked: previous.map(|p| p.parked.clone()).unwrap_or_default(),
            shared_sessions,
            tools_changed: previous
                .map(|p| p.tools_changed.clone())
                .unwrap_or_else(|| Arc::new(watch::Sender::new(0))),
        };
        gateway.rebuild_catalog();
        gateway
            .parked
            .set_holders(Holders::from_config(&gateway.config).map(Arc::new));
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

    /// Whether every upstream has been tried at least once.
    pub fn all_upstreams_tried(&self) -> bool {
        self.catalog()
            .upstream_status
            .values()
            .all(|status| *status != crate::upstream::Status::Starting)
    }
}
