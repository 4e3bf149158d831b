//! The status page's one seam with approvals: what the "pending approvals" panel shows, and who
//! counts as an approver. Kept to these two functions so that wiring the page to the approvals
//! store is a change of this file alone.
//!
//! The page decides nothing itself: its approve and deny buttons `POST /approvals/{id}` (the
//! approvals API) from the page's inline script, with the credentials the browser signed in with.

use crate::policy::Caller;
use crate::runtime::Version;

/// One pending approval as the panel shows it (what `GET /approvals` lists).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingView {
    /// The id `POST /approvals/{id}` takes.
    pub id: String,
    /// Who made the call that waits.
    pub caller: String,
    pub tool: String,
    /// The call's arguments as the approver is shown them (redacted), as JSON text.
    pub arguments: String,
    /// How long the call has waited.
    pub age_seconds: f64,
    /// How long until it is denied for want of a decision.
    pub expires_in_seconds: f64,
    /// `pending` (the page offers approve and deny), or the decision waiting for its call to
    /// collect it (`approved`, `denied`).
    pub state: String,
}

/// What the panel has to show.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    /// This gateway holds no calls for approvers (no approvals store, or no `approvers`).
    NotConfigured,
    /// The calls waiting for a decision, oldest first (possibly none).
    Waiting(Vec<PendingView>),
    /// The approvals store cannot be read (a shared one, unreachable): why.
    Unreadable(String),
}

/// The calls of `gateway` waiting for an approver: `NotConfigured` when `approvers` is empty,
/// else the approvals store's list (`Unreadable` with the store's error).
pub async fn pending(gateway: &Version) -> Pending {
    if gateway.config.approvers.is_empty() {
        return Pending::NotConfigured;
    }
    match gateway.kept.approvals.list().await {
        Ok(listed) => Pending::Waiting(
            listed
                .into_iter()
                .map(|l| PendingView {
                    id: l.id,
                    caller: l.caller,
                    tool: l.tool,
                    arguments: l.arguments.to_string(),
                    age_seconds: l.age_seconds,
                    expires_in_seconds: l.expires_in_seconds,
                    state: l.state.to_string(),
                })
                .collect(),
        ),
        Err(e) => Pending::Unreadable(e.to_string()),
    }
}

/// Whether `caller` is one of `gateway`'s approvers (by name, or by `role:NAME`), who may see the
/// status page and decide approvals from it.
pub fn is_approver(caller: &Caller, gateway: &Version) -> bool {
    caller.is_approver(&gateway.config.approvers)
}
