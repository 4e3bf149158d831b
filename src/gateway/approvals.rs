//! Calls that wait for an approver (`approval: approver`).
//!
//! A call of such a tool is held as a [`Pending`] approval, with an id, until an approver decides
//! it (`approvals_http`: `GET /approvals`, `POST /approvals/{id}`, which `narrowgate approvals`
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
//! The pending approvals live in this process (`state: memory`); with `state: redis://` each
//! replica still keeps its own, so the approver and the repeated call must reach the replica
//! that holds the approval.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::policy::Caller;
use crate::receipts::ApprovalRecord;

/// What an approval is bound to: a decision is only ever used by a call with the same four.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Binding {
    pub caller: String,
    pub tool: String,
    pub contract_digest: String,
    pub arguments_digest: String,
}

/// Where a pending approval stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Pending,
    Approved {
        approver: String,
    },
    Denied {
        approver: String,
        reason: Option<String>,
    },
}

/// One held call, as the store keeps it.
struct Pending {
    binding: Binding,
    /// The arguments with the contract's `redact` paths masked: what an approver is shown.
    shown_arguments: Value,
    created: Instant,
    deadline: Instant,
    /// Calls waiting on it now (0 once its clients went away).
    waiters: usize,
    state: watch::Sender<State>,
}

/// The pending approvals of this gateway (shared by every version: a reload keeps them).
#[derive(Default)]
pub struct Approvals {
    pending: Mutex<HashMap<String, Pending>>,
}

/// One pending approval as `GET /approvals` lists it.
#[derive(Debug, Clone, Serialize)]
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
}

/// How a wait for an approver ended.
#[derive(Debug)]
pub enum Verdict {
    /// Forward the call.
    Approved(ApprovalRecord),
    /// Do not: the message is the tool error the client reads.
    Refused(ApprovalRecord, String),
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

impl Approvals {
    /// Holds the call until it is approved, denied, times out, or its client goes away.
    pub async fn wait(&self, request: Request<'_>) -> Verdict {
        let started = Instant::now();
        let record = |id: &str, decision: &'static str, approver: Option<String>| ApprovalRecord {
            id: Some(id.to_string()),
            decision,
            approver,
            wait: started.elapsed(),
        };
        let (id, mut changes, deadline) = match self.attach(&request) {
            Attached::Waiting {
                id,
                changes,
                deadline,
            } => (id, changes, deadline),
            Attached::Collected(id, state) => return verdict(&id, state, record),
            Attached::Refused(message) => {
                let refused = ApprovalRecord {
                    id: request.named_id.map(str::to_string),
                    decision: "refused",
                    approver: None,
                    wait: Duration::ZERO,
                };
                return Verdict::Refused(refused, message);
            }
        };
        crate::telemetry::span_event("narrowgate.approval.pending", &[("approval.id", &id)]);
        tracing::info!(approval = %id, caller = %request.binding.caller, tool = %request.binding.tool, "call held for an approver");
        let gone = async {
            match request.client_gone {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(gone);
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        // The sender went with its entry: someone else collected it.
                        let message = format!("approval {id} was used by another identical call");
                        return Verdict::Refused(record(&id, "used", None), message);
                    }
                    let state = changes.borrow_and_update().clone();
                    if state != State::Pending {
                        return match self.collect(&id) {
                            Some(state) => verdict(&id, state, record),
                            None => verdict_elsewhere(&id, state, record),
                        };
                    }
                }
                () = tokio::time::sleep_until(deadline.into()) => {
                    // A decision that came at the last moment still counts.
                    if let Some(state) = self.collect(&id).filter(|s| *s != State::Pending) {
                        return verdict(&id, state, record);
                    }
                    self.remove(&id);
                    let message = format!(
                        "approval {id} timed out: no approver decided within {}s; the call was not performed",
                        request.timeout.as_secs()
                    );
                    return Verdict::Refused(record(&id, "timeout", None), message);
                }
                () = &mut gone => {
                    self.detach(&id);
                    let message = format!("the client went away; approval {id} stays pending: send the same call again to collect it");
                    return Verdict::Refused(record(&id, "abandoned", None), message);
                }
            }
        }
    }

    /// Finds the approval the call is for (the named one, or a live one with its binding), or
    /// opens one.
    fn attach(&self, request: &Request<'_>) -> Attached {
        let now = Instant::now();
        let mut pending = self.lock();
        pending.retain(|_, p| p.deadline > now || p.waiters > 0);
        let found = match request.named_id {
            Some(id) => match pending.get(id) {
                None => {
                    return Attached::Refused(format!(
                        "approval {id} is unknown: it timed out, was used, or never existed"
                    ));
                }
                Some(p) if p.binding != request.binding => {
                    return Attached::Refused(format!(
                        "approval {id} was given for another call (caller, tool, contract or \
                         arguments differ); it cannot be used for this one"
                    ));
                }
                Some(_) => Some(id.to_string()),
            },
            None => pending
                .iter()
                .find(|(_, p)| p.binding == request.binding)
                .map(|(id, _)| id.clone()),
        };
        if let Some(id) = found
            && let Some(p) = pending.get_mut(&id)
        {
            let state = p.state.borrow().clone();
            if state != State::Pending {
                pending.remove(&id);
                return Attached::Collected(id, state);
            }
            p.waiters += 1;
            return Attached::Waiting {
                changes: p.state.subscribe(),
                deadline: p.deadline,
                id,
            };
        }
        let id = uuid::Uuid::new_v4().to_string();
        let (state, changes) = watch::channel(State::Pending);
        let deadline = now + request.timeout;
        pending.insert(
            id.clone(),
            Pending {
                binding: request.binding.clone(),
                shown_arguments: request.shown_arguments.clone(),
                created: now,
                deadline,
                waiters: 1,
                state,
            },
        );
        Attached::Waiting {
            id,
            changes,
            deadline,
        }
    }

    /// Takes a decided approval out of the store (used once); `None` if another call took it.
    fn collect(&self, id: &str) -> Option<State> {
        let mut pending = self.lock();
        let state = pending.get(id)?.state.borrow().clone();
        if state != State::Pending {
            pending.remove(id);
        }
        Some(state)
    }

    fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    fn detach(&self, id: &str) {
        if let Some(p) = self.lock().get_mut(id) {
            p.waiters = p.waiters.saturating_sub(1);
        }
    }

    /// The approvals not yet collected, oldest first.
    pub fn list(&self) -> Vec<Listed> {
        let now = Instant::now();
        let mut pending = self.lock();
        pending.retain(|_, p| p.deadline > now || p.waiters > 0);
        let mut listed: Vec<(Instant, Listed)> = pending
            .iter()
            .map(|(id, p)| {
                let state = match &*p.state.borrow() {
                    State::Pending => "pending",
                    State::Approved { .. } => "approved",
                    State::Denied { .. } => "denied",
                };
                let listed = Listed {
                    id: id.clone(),
                    caller: p.binding.caller.clone(),
                    tool: p.binding.tool.clone(),
                    arguments: p.shown_arguments.clone(),
                    age_seconds: now.duration_since(p.created).as_secs_f64(),
                    expires_in_seconds: p.deadline.saturating_duration_since(now).as_secs_f64(),
                    state,
                };
                (p.created, listed)
            })
            .collect();
        listed.sort_by_key(|(created, _)| *created);
        listed.into_iter().map(|(_, l)| l).collect()
    }

    /// An approver's decision on the approval `id`. Never the calling caller's own.
    pub fn decide(
        &self,
        id: &str,
        approver: &Caller,
        approve: bool,
        reason: Option<String>,
    ) -> Result<Listed, DecideError> {
        let now = Instant::now();
        let mut pending = self.lock();
        pending.retain(|_, p| p.deadline > now || p.waiters > 0);
        let p = pending
            .get(id)
            .ok_or_else(|| DecideError::Unknown(id.to_string()))?;
        if p.binding.caller == approver.name {
            return Err(DecideError::OwnCall(approver.name.clone()));
        }
        if *p.state.borrow() != State::Pending {
            return Err(DecideError::AlreadyDecided(id.to_string()));
        }
        let state = if approve {
            State::Approved {
                approver: approver.name.clone(),
            }
        } else {
            State::Denied {
                approver: approver.name.clone(),
                reason,
            }
        };
        p.state.send_replace(state);
        let decided = if approve { "approved" } else { "denied" };
        tracing::info!(approval = %id, approver = %approver.name, decided, "approval decided");
        Ok(Listed {
            id: id.to_string(),
            caller: p.binding.caller.clone(),
            tool: p.binding.tool.clone(),
            arguments: p.shown_arguments.clone(),
            age_seconds: now.duration_since(p.created).as_secs_f64(),
            expires_in_seconds: p.deadline.saturating_duration_since(now).as_secs_f64(),
            state: decided,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        // The map stays consistent whatever panicked while holding it: each change is one call.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

enum Attached {
    Waiting {
        id: String,
        changes: watch::Receiver<State>,
        deadline: Instant,
    },
    /// A decision made while no call waited, taken now.
    Collected(String, State),
    Refused(String),
}

/// The verdict of a decision this call collected.
fn verdict(
    id: &str,
    state: State,
    record: impl Fn(&str, &'static str, Option<String>) -> ApprovalRecord,
) -> Verdict {
    match state {
        State::Approved { approver } => {
            crate::telemetry::span_event(
                "narrowgate.approval.approved",
                &[("approval.id", id), ("approval.approver", &approver)],
            );
            Verdict::Approved(record(id, "approved", Some(approver)))
        }
        State::Denied { approver, reason } => {
            crate::telemetry::span_event(
                "narrowgate.approval.denied",
                &[("approval.id", id), ("approval.approver", &approver)],
            );
            let message = match reason {
                Some(reason) => format!("approval {id} was denied by {approver}: {reason}"),
                None => format!("approval {id} was denied by {approver}"),
            };
            Verdict::Refused(record(id, "denied", Some(approver)), message)
        }
        State::Pending => Verdict::Refused(
            record(id, "timeout", None),
            format!("approval {id} was not decided"),
        ),
    }
}

/// A decision another identical call collected first: an approval is used once; a denial
/// holds for every call that waited for it.
fn verdict_elsewhere(
    id: &str,
    state: State,
    record: impl Fn(&str, &'static str, Option<String>) -> ApprovalRecord,
) -> Verdict {
    match state {
        State::Denied { .. } => verdict(id, state, record),
        _ => Verdict::Refused(
            record(id, "used", None),
            format!("approval {id} was used by another identical call"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller(name: &str) -> Caller {
        Caller {
            name: name.into(),
            tools: vec![],
            scopes: vec![],
            rate: None,
            roles: vec![],
        }
    }

    fn binding(arguments: &str) -> Binding {
        Binding {
            caller: "alice".into(),
            tool: "refund".into(),
            contract_digest: "sha256:c".into(),
            arguments_digest: arguments.into(),
        }
    }

    fn request<'a>(arguments: &str, named_id: Option<&'a str>) -> Request<'a> {
        Request {
            binding: binding(arguments),
            shown_arguments: json!({"amount": 1}),
            timeout: Duration::from_secs(60),
            named_id,
            client_gone: None,
        }
    }

    /// Proves: a decision made while no call waits is collected by the next identical call,
    /// once; a call with other arguments does not collect it, and naming its id for them is
    /// refused.
    #[tokio::test]
    async fn a_decision_is_collected_once_by_the_same_call_only() {
        let approvals = Approvals::default();
        let gone = CancellationToken::new();
        gone.cancel();
        let abandoned = approvals
            .wait(Request {
                client_gone: Some(&gone),
                ..request("a", None)
            })
            .await;
        let Verdict::Refused(record, _) = abandoned else {
            panic!("a call whose client left stops waiting")
        };
        let id = record.id.expect("an id");
        assert_eq!(record.decision, "abandoned");
        assert!(approvals.decide(&id, &caller("bob"), true, None).is_ok());

        let Verdict::Refused(refused, message) = approvals.wait(request("b", Some(&id))).await
        else {
            panic!("another call's approval is refused")
        };
        assert_eq!(refused.decision, "refused");
        assert!(message.contains("another call"), "{message}");

        let Verdict::Approved(approved) = approvals.wait(request("a", None)).await else {
            panic!("the same call collects the approval")
        };
        assert_eq!(approved.approver.as_deref(), Some("bob"));
        assert!(approvals.list().is_empty(), "used once");
    }

    /// Proves: nobody decides their own call, an unknown id is reported as such, and a decided
    /// approval cannot be decided again.
    #[tokio::test]
    async fn deciding_is_for_others_and_once() {
        let approvals = Approvals::default();
        let gone = CancellationToken::new();
        gone.cancel();
        let _ = approvals
            .wait(Request {
                client_gone: Some(&gone),
                ..request("a", None)
            })
            .await;
        let id = approvals.list()[0].id.clone();
        assert_eq!(
            approvals.decide(&id, &caller("alice"), true, None).err(),
            Some(DecideError::OwnCall("alice".into()))
        );
        assert_eq!(
            approvals.decide("nope", &caller("bob"), true, None).err(),
            Some(DecideError::Unknown("nope".into()))
        );
        assert!(approvals.decide(&id, &caller("bob"), false, None).is_ok());
        assert_eq!(
            approvals.decide(&id, &caller("carol"), true, None).err(),
            Some(DecideError::AlreadyDecided(id.clone()))
        );
    }
}
