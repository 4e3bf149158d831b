//! What a reload keeps: the parts of a running gateway that outlive one configuration version.
//!
//! A reload builds a new [`Version`](crate::runtime::Version) and hands it the previous one's
//! [`Kept`]; [`Kept::carry`] is the whole rule of what survives. Everything else a version holds
//! (contracts, callers, the catalog's rules) is rebuilt from the new configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::approvals::Approvals;
use crate::config::{Config, StateBackend};
use crate::mrtr::holders::Holders;
use crate::mrtr::parked::ParkedCalls;
use crate::policy::limits::Limits;
use crate::receipts::query::Source;
use crate::receipts::traffic::rollup::Roller;
use crate::receipts::{ReceiptError, ReceiptLog, Settings};
use crate::state::dedupe::DedupeCache;
use crate::state::log_levels::LogLevels;
use crate::state::results::ResultCache;
use crate::state::shared_sessions::SharedSessions;
use crate::upstream::Upstream;

/// What one version hands to the next. Each field's doc says when it is kept.
pub struct Kept {
    /// Upstream connections by name: kept while the upstream's transport and default timeout
    /// are unchanged (else reconnected; `runtime::live` stops the old one after its calls).
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
    /// Where every `tools/call` leaves its receipt: kept while the receipt settings are unchanged.
    pub receipts: Arc<ReceiptLog>,
    receipt_settings: Settings,
    /// Summarises the receipts for the status page's charts, on its own thread: kept with
    /// `receipts` (a new database gets its own, and the old one stops when dropped).
    rollup: Arc<Roller>,
    /// Rate-limit state: kept while `state` points at the same backend.
    pub limits: Arc<Limits>,
    /// Recorded answers of `dedupe` tools: kept while `state` points at the same backend.
    pub dedupe: Arc<DedupeCache>,
    /// Which caller holds which sessions across replicas: kept while `state` is the same.
    pub shared_sessions: Arc<SharedSessions>,
    /// Calls held for approvers: kept while `state` is the same.
    pub approvals: Arc<Approvals>,
    /// The logging level each client session set: always kept.
    pub log_levels: Arc<LogLevels>,
    /// Stateless calls waiting for their clients' answers: always kept (a call parked under
    /// one version is answered under the next); who holds them is re-read from `state`.
    pub parked: Arc<ParkedCalls>,
    /// Bumped whenever the published tools change: always kept, so a session hears of
    /// changes a reload made.
    pub(crate) tools_changed: Arc<watch::Sender<u64>>,
    /// Answers of `cache:` tools: always kept (their keys carry the contract's digest, so a
    /// changed contract never answers from the old one's results).
    pub results: Arc<ResultCache>,
}

impl Kept {
    /// What `config` keeps of `previous` (nothing on the first version). Fails only if a new
    /// receipts database cannot be opened.
    pub fn carry(previous: Option<&Kept>, config: &Config) -> Result<Kept, ReceiptError> {
        let receipt_settings = Settings::of(config);
        let (receipts, rollup) = match previous {
            Some(p) if p.receipt_settings == receipt_settings => {
                (p.receipts.clone(), p.rollup.clone())
            }
            _ => {
                let log = ReceiptLog::open(&receipt_settings)?;
                let rollup = Source::of(&receipt_settings).start_rollup()?;
                (Arc::new(log), Arc::new(rollup))
            }
        };
        let upstreams = config
            .upstreams
            .iter()
            .map(|(name, settings)| {
                let fresh = Upstream::new(name, settings);
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
        let state = config.state_backend().unwrap_or(StateBackend::Memory);
        let parked: Arc<ParkedCalls> = previous.map(|p| p.parked.clone()).unwrap_or_default();
        parked.set_holders(Holders::from_config(config).map(Arc::new));
        Ok(Kept {
            upstreams,
            receipts,
            receipt_settings,
            rollup,
            limits: previous
                .map(|p| p.limits.clone())
                .filter(|l| l.serves(&state))
                .unwrap_or_else(|| Arc::new(Limits::from_config(config))),
            dedupe: previous
                .map(|p| p.dedupe.clone())
                .filter(|d| d.serves(&state))
                .unwrap_or_else(|| Arc::new(DedupeCache::from_config(config))),
            shared_sessions: previous
                .map(|p| p.shared_sessions.clone())
                .filter(|s| s.serves(&state))
                .unwrap_or_else(|| Arc::new(SharedSessions::from_config(config))),
            approvals: previous
                .map(|p| p.approvals.clone())
                .filter(|a| a.serves(&state))
                .unwrap_or_else(|| Arc::new(Approvals::from_config(config))),
            log_levels: previous.map(|p| p.log_levels.clone()).unwrap_or_default(),
            parked,
            tools_changed: previous
                .map(|p| p.tools_changed.clone())
                .unwrap_or_else(|| Arc::new(watch::Sender::new(0))),
            results: previous.map(|p| p.results.clone()).unwrap_or_default(),
        })
    }
}
