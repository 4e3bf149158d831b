//! One version of the configuration: what a configuration builds (contracts, callers, the
//! catalog), and what it was handed by the version before it ([`Kept`]).

use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::config::Config;
use crate::contract::{Approval, ContractSet};
use crate::policy::Authenticator;
use crate::policy::resource::ProtectedResource;
use crate::receipts::ReceiptError;
use crate::runtime::catalog::Catalog;
use crate::runtime::kept::Kept;

/// Everything a request needs, shared by all sessions: one version of the configuration.
/// A request holds its version (`Arc<Version>`) until it is answered, so a reload never changes
/// the rules under a call in flight.
pub struct Version {
    pub config: Config,
    pub contracts: ContractSet,
    pub authenticator: Authenticator,
    /// The gateway as an OAuth protected resource (`None` without `oauth`).
    pub resource: Option<Arc<ProtectedResource>>,
    /// Whether any contract requires scopes (else `tools/call` bodies are not inspected early).
    pub any_scopes: bool,
    /// Whether any contract has `approval: approver`: only then does the HTTP layer watch for
    /// a client going away while its call waits.
    pub any_approver: bool,
    /// Whether any contract has `approval: user`: only then does the direct path look for
    /// calls it must leave to rmcp (which can ask the client).
    pub any_user_approval: bool,
    catalog: RwLock<Arc<Catalog>>,
    /// What outlives this version: connections, stores and state handed from version to
    /// version, each under the rule [`Kept::carry`] states.
    pub kept: Kept,
}

impl Version {
    /// The `ttlMs` of list results (`list_ttl`; 0: ask again every time).
    pub fn list_ttl_ms(&self) -> u64 {
        self.config
            .list_ttl
            .map(|d| u64::try_from(d.0.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    /// Fails only if the receipts database cannot be opened: a gateway that could not leave
    /// receipts must not serve calls.
    pub fn new(config: Config, contracts: ContractSet) -> Result<Arc<Version>, ReceiptError> {
        Version::build(config, contracts, None)
    }

    /// A version built from `config` and `contracts`, taking over from `previous` what
    /// [`Kept::carry`] keeps.
    pub fn build(
        config: Config,
        contracts: ContractSet,
        previous: Option<&Version>,
    ) -> Result<Arc<Version>, ReceiptError> {
        let kept = Kept::carry(previous.map(|p| &p.kept), &config)?;
        let any_approval = |kind: Approval| contracts.tools.values().any(|t| t.approval == kind);
        let gateway = Version {
            authenticator: Authenticator::from_config(&config),
            resource: ProtectedResource::from_config(&config, &contracts).map(Arc::new),
            any_scopes: contracts.tools.values().any(|t| !t.scopes.is_empty()),
            any_approver: any_approval(Approval::Approver),
            any_user_approval: any_approval(Approval::User),
            // Start from the previous catalog, so the rebuild below tells sessions only of a
            // real change in what they see.
            catalog: RwLock::new(previous.map(|p| p.catalog()).unwrap_or_default()),
            config,
            contracts,
            kept,
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
            .kept
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
            self.kept.tools_changed.send_modify(|version| *version += 1);
        }
    }

    /// A receiver that wakes whenever the published tools change.
    pub fn watch_tools(&self) -> watch::Receiver<u64> {
        self.kept.tools_changed.subscribe()
    }

    /// Whether every upstream has been tried at least once.
    pub fn all_upstreams_tried(&self) -> bool {
        self.catalog()
            .upstream_status
            .values()
            .all(|status| *status != crate::upstream::Status::Starting)
    }
}
