//! Calls that wait for an approver (`approval: approver`).
//!
//! A call of such a tool is held as a pending approval, with an id, until an approver decides it
//! (`approvals_http`: `GET /approvals`, `POST /approvals/{id}`, which `narrowgate approvals`
//! uses) or its `approval_timeout` passes. The decision is bound to what was approved: the
//! caller, the tool, the contract's digest and the digest of the canonical arguments
//! ([`Binding`]); a call only ever collects a decision made for its own binding, and an approval
//! is used once.
//!
//! A pending approval outlives the HTTP request that opened it: when the client goes away (its
//! connection closes while it waits), the call stops waiting and the approval stays pending until
//! its deadline, so that the same call sent again collects the decision, whether it was made
//! before the call came back or while it waits again.
//!
//! [`Approvals`] is the one entry point whatever `state` says: with `state: memory` the pending
//! approvals live in this process ([`memory`]); with `state: redis://…` in Redis ([`redis`]),
//! so a call held by one replica is listed and decided through any other. Besides the pipeline's
//! [`Approvals::wait`], two functions serve whoever shows approvers the queue (the HTTP API, a
//! status page): [`Approvals::list`] and [`Approvals::decide`].

mod memory;
pub mod questions;
mod redis;
pub mod step;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, StateBackend};
use crate::receipts::ApprovalRecord;
use crate::telemetry;
use memory::MemoryApprovals;
use redis::RedisApprovals;

/// The longest decision `reason` kept.
pub const MAX_REASON_CHARS: usize = 500;

/// What an approval is bound to: a decision is only ever used by a call with the same four.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Binding {
    pub caller: String,
    pub tool: String,
    pub contract_digest: String,
    pub arguments_digest: String,
}

/// Where a pending approval stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    Pending,
    Approved {
        approver: String,
        #[serde(default)]
        reason: Option<String>,
    },
    Denied {
        approver: String,
        #[serde(default)]
        reason: Option<String>,
    },
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved { .. } => "approved",
            State::Denied { .. } => "denied",
        }
    }
}

/// An approver's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
}

/// One pending approval as `GET /approvals` (and a status page) shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Listed {
    pub id: String,
    pub caller: String,
    pub tool: String,
    /// The arguments with the contract's `redact` paths masked.
    pub arguments: Value,
    /// Seconds since the call was first held.
    pub age_seconds: f64,
    /// Seconds until it times out.
    pub expires_in_seconds: f64,
    /// `pending`, or `approved`/`denied` while the decision waits for its call to collect it.
    pub state: &'static str,
}

/// Why an approver's decision was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecideError {
    #[error("no pending approval has the id `{0}` (it may have timed out or been used)")]
    Unknown(String),
    #[error("`{0}` may not decide its own call: another approver must")]
    OwnCall(String),
    #[error("approval `{0}` was already decided")]
    AlreadyDecided(String),
    #[error("the pending approvals cannot be reached: {0}")]
    Store(String),
}

/// How a wait for an approver ended.
#[derive(Debug)]
pub enum Verdict {
    /// Forward the call; `reason` is the approver's, for the receipt.
    Approved {
        record: ApprovalRecord,
        reason: Option<String>,
    },
    /// Do not: the message is the tool error the client reads, the reason what the receipt says.
    Refused {
        record: ApprovalRecord,
        message: String,
        reason: String,
    },
}

/// What the call needs to wait: the binding, what an approver is shown, and how long.
pub struct Request<'a> {
    pub binding: Binding,
    pub shown_arguments: Value,
    pub timeout: Duration,
    /// `_meta["narrowgate/approvalId"]`: the client names the approval it means to collect.
    pub named_id: Option<&'a str>,
    /// Cancelled when the call's client goes away.
    pub client_gone: Option<&'a CancellationToken>,
}

/// What looking for the call's approval found (in either backend).
enum Attached {
    /// Wait on `id` until `deadline`.
    Waiting {
        id: String,
        deadline: Instant,
        watcher: Watcher,
    },
    /// A decision made while no call waited, taken now.
    Collected(String, State),
    /// The named approval is unknown or another call's: the message says which.
    Refused(String),
}

/// How a waiting call hears of a decision: a channel in this process, or polling Redis.
enum Watcher {
    Memory(tokio::sync::watch::Receiver<State>),
    Redis,
}

/// The pending approvals of this gateway (shared by every version: a reload keeps them unless
/// `state` changes).
pub struct Approvals {
    backend: Backend,
    state: StateBackend,
    /// The user approvals asked through MRTR, waiting for the client's answer
    /// (`approval: user` on 2026-07-28 stateless requests).
    pub questions: questions::Questions,
}

enum Backend {
    Memory(MemoryApprovals),
    /// Boxed: its scripts make it much larger than the memory store.
    Redis(Box<RedisApprovals>),
}

impl Default for Approvals {
    fn default() -> Self {
        Approvals::new(&StateBackend::Memory)
    }
}

impl Approvals {
    /// The store `state` asks for.
    pub fn new(state: &StateBackend) -> Approvals {
        let backend = match state {
            StateBackend::Memory => Backend::Memory(MemoryApprovals::default()),
            StateBackend::Redis(url) => Backend::Redis(Box::new(RedisApprovals::new(url))),
        };
        Approvals {
            backend,
            state: state.clone(),
            questions: questions::Questions::new(state),
        }
    }

    /// The store of `config`'s `state` (memory if it is invalid, which loading refuses).
    pub fn from_config(config: &Config) -> Approvals {
        Approvals::new(&config.state_backend().unwrap_or(StateBackend::Memory))
    }

    /// Whether this store is the one `state` asks for (so a reload may keep it).
    pub fn serves(&self, state: &StateBackend) -> bool {
        self.state == *state
    }

    /// The approvals not yet collected, oldest first, with their arguments masked: for the
    /// approvals API and any page that shows approvers the queue.
    pub async fn list(&self) -> Result<Vec<Listed>, DecideError> {
        match &self.backend {
            Backend::Memory(m) => Ok(m.list()),
            Backend::Redis(r) => r.list().await,
        }
    }

    /// `approver`'s decision on the approval `id` (never their own call's), with an optional
    /// `reason` (a denial's reason is shown to the caller). What the approvals API and any page
    /// that decides call.
    pub async fn decide(
        &self,
        id: &str,
        approver: &str,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<Listed, DecideError> {
        // Bounded (the caller reads it in a denial) and dropped when blank.
        let reason = reason
            .map(|r| r.chars().take(MAX_REASON_CHARS).collect::<String>())
            .filter(|r| !r.trim().is_empty());
        let decided = match &self.backend {
            Backend::Memory(m) => m.decide(id, approver, decision, reason),
            Backend::Redis(r) => r.decide(id, approver, decision, reason).await,
        }?;
        tracing::info!(approval = %id, %approver, decided = decided.state, "approval decided");
        Ok(decided)
    }

    /// Holds the call until it is approved, denied, times out, or its client goes away.
    pub async fn wait(&self, request: Request<'_>) -> Verdict {
        let started = Instant::now();
        let record = |id: &str, decision: &'static str, approver: Option<String>| ApprovalRecord {
            id: Some(id.to_string()),
            decision,
            approver,
            wait: started.elapsed(),
        };
        let attached = match &self.backend {
            Backend::Memory(m) => Ok(m.attach(&request)),
            Backend::Redis(r) => r.attach(&request).await,
        };
        let (id, deadline, mut watcher) = match attached {
            Ok(Attached::Waiting {
                id,
                deadline,
                watcher,
            }) => (id, deadline, watcher),
            Ok(Attached::Collected(id, state)) => return verdict(&id, state, record),
            Ok(Attached::Refused(message)) => {
                let refused = ApprovalRecord {
                    id: request.named_id.map(str::to_string),
                    decision: "refused",
                    approver: None,
                    wait: Duration::ZERO,
                };
                return Verdict::Refused {
                    record: refused,
                    reason: message.clone(),
                    message,
                };
            }
            Err(e) => {
                let message = format!("{e}; the call was not performed");
                let refused = ApprovalRecord {
                    id: None,
                    decision: "unavailable",
                    approver: None,
                    wait: started.elapsed(),
                };
                return Verdict::Refused {
                    record: refused,
                    reason: message.clone(),
                    message,
                };
            }
        };
        telemetry::event(
            "narrowgate.approval.pending",
            &[("approval.id", id.clone())],
        );
        tracing::info!(approval = %id, caller = %request.binding.caller, tool = %request.binding.tool, "call held for an approver");
        let gone = async {
            match request.client_gone {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(gone);
        loop {
            let changed = async {
                match (&self.backend, &mut watcher) {
                    (Backend::Memory(_), Watcher::Memory(changes)) => match changes.changed().await
                    {
                        Ok(()) => Some(changes.borrow_and_update().clone()),
                        Err(_) => None,
                    },
                    (Backend::Redis(r), _) => r.next_state(&id).await,
                    _ => None,
                }
            };
            tokio::select! {
                state = changed => {
                    let Some(state) = state else {
                        // The entry is gone: another identical call collected it.
                        return used_elsewhere(&id, record);
                    };
                    if state != State::Pending {
                        return match self.collect(&id).await {
                            Some(state) => verdict(&id, state, record),
                            None => match state {
                                // A denial holds for every call that waited for it.
                                State::Denied { .. } => verdict(&id, state, record),
                                _ => used_elsewhere(&id, record),
                            },
                        };
                    }
                }
                () = tokio::time::sleep_until(deadline.into()) => {
                    // A decision that came at the last moment still counts.
                    if let Some(state) = self.collect(&id).await.filter(|s| *s != State::Pending) {
                        return verdict(&id, state, record);
                    }
                    self.remove(&id).await;
                    let message = format!(
                        "approval {id} timed out: no approver decided within {}s; the call was \
                         not performed",
                        request.timeout.as_secs()
                    );
                    telemetry::event("narrowgate.approval.timeout", &[("approval.id", id.clone())]);
                    return Verdict::Refused {
                        record: record(&id, "timeout", None),
                        reason: format!("approval {id} timed out"),
                        message,
                    };
                }
                () = &mut gone => {
                    self.detach(&id).await;
                    let message = format!(
                        "the client went away; approval {id} stays pending: send the same call \
                         again to collect it"
                    );
                    return Verdict::Refused {
                        record: record(&id, "abandoned", None),
                        reason: format!("the client went away while approval {id} was pending"),
                        message,
                    };
                }
            }
        }
    }

    /// Takes a decided approval out of the store (used once); `None` if another call took it,
    /// the state as it is if still pending.
    async fn collect(&self, id: &str) -> Option<State> {
        match &self.backend {
            Backend::Memory(m) => m.collect(id),
            Backend::Redis(r) => r.collect(id).await,
        }
    }

    async fn remove(&self, id: &str) {
        match &self.backend {
            Backend::Memory(m) => m.remove(id),
            Backend::Redis(r) => r.remove(id).await,
        }
    }

    async fn detach(&self, id: &str) {
        match &self.backend {
            Backend::Memory(m) => m.detach(id),
            Backend::Redis(_) => {}
        }
    }
}

/// The verdict of a decision this call collected.
fn verdict(
    id: &str,
    state: State,
    record: impl Fn(&str, &'static str, Option<String>) -> ApprovalRecord,
) -> Verdict {
    match state {
        State::Approved { approver, reason } => {
            telemetry::event(
                "narrowgate.approval.approved",
                &[
                    ("approval.id", id.to_string()),
                    ("approval.approver", approver.clone()),
                ],
            );
            Verdict::Approved {
                reason: reason.map(|r| format!("approval {id} was approved by {approver}: {r}")),
                record: record(id, "approved", Some(approver)),
            }
        }
        State::Denied { approver, reason } => {
            telemetry::event(
                "narrowgate.approval.denied",
                &[
                    ("approval.id", id.to_string()),
                    ("approval.approver", approver.clone()),
                ],
            );
            let message = match &reason {
                Some(reason) => format!("approval {id} was denied by {approver}: {reason}"),
                None => format!("approval {id} was denied by {approver}"),
            };
            Verdict::Refused {
                record: record(id, "denied", Some(approver)),
                reason: message.clone(),
                message,
            }
        }
        State::Pending => Verdict::Refused {
            record: record(id, "timeout", None),
            reason: format!("approval {id} was not decided"),
            message: format!("approval {id} was not decided"),
        },
    }
}

/// An approval another identical call collected first: it is used once.
fn used_elsewhere(
    id: &str,
    record: impl Fn(&str, &'static str, Option<String>) -> ApprovalRecord,
) -> Verdict {
    let message = format!("approval {id} was used by another identical call");
    Verdict::Refused {
        record: record(id, "used", None),
        reason: message.clone(),
        message,
    }
}

#[cfg(test)]
mod tests;
