//! Pending approvals in this process (`state: memory`): a map under one lock, each entry with a
//! watch channel its waiting calls are woken through.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;

use super::{Attached, Binding, DecideError, Decision, Listed, Request, State, Watcher};

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

impl Pending {
    fn listed(&self, id: &str, now: Instant) -> Listed {
        Listed {
            id: id.to_string(),
            caller: self.binding.caller.clone(),
            tool: self.binding.tool.clone(),
            arguments: self.shown_arguments.clone(),
            age_seconds: now.duration_since(self.created).as_secs_f64(),
            expires_in_seconds: self.deadline.saturating_duration_since(now).as_secs_f64(),
            state: self.state.borrow().name(),
        }
    }
}

#[derive(Default)]
pub struct MemoryApprovals {
    pending: Mutex<HashMap<String, Pending>>,
}

impl MemoryApprovals {
    /// Finds the approval the call is for (the named one, or a live one with its binding), or
    /// opens one.
    pub(super) fn attach(&self, request: &Request<'_>) -> Attached {
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
                watcher: Watcher::Memory(p.state.subscribe()),
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
            deadline,
            watcher: Watcher::Memory(changes),
        }
    }

    /// Takes a decided approval out of the store (used once); `None` if another call took it.
    pub(super) fn collect(&self, id: &str) -> Option<State> {
        let mut pending = self.lock();
        let state = pending.get(id)?.state.borrow().clone();
        if state != State::Pending {
            pending.remove(id);
        }
        Some(state)
    }

    pub(super) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    pub(super) fn detach(&self, id: &str) {
        if let Some(p) = self.lock().get_mut(id) {
            p.waiters = p.waiters.saturating_sub(1);
        }
    }

    /// The approvals not yet collected, oldest first.
    pub(super) fn list(&self) -> Vec<Listed> {
        let now = Instant::now();
        let mut pending = self.lock();
        pending.retain(|_, p| p.deadline > now || p.waiters > 0);
        let mut listed: Vec<(Instant, Listed)> = pending
            .iter()
            .map(|(id, p)| (p.created, p.listed(id, now)))
            .collect();
        listed.sort_by_key(|(created, _)| *created);
        listed.into_iter().map(|(_, l)| l).collect()
    }

    pub(super) fn decide(
        &self,
        id: &str,
        approver: &str,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<Listed, DecideError> {
        let now = Instant::now();
        let mut pending = self.lock();
        pending.retain(|_, p| p.deadline > now || p.waiters > 0);
        let p = pending
            .get(id)
            .ok_or_else(|| DecideError::Unknown(id.to_string()))?;
        if p.binding.caller == approver {
            return Err(DecideError::OwnCall(approver.to_string()));
        }
        if *p.state.borrow() != State::Pending {
            return Err(DecideError::AlreadyDecided(id.to_string()));
        }
        let approver = approver.to_string();
        p.state.send_replace(match decision {
            Decision::Approve => State::Approved { approver, reason },
            Decision::Deny => State::Denied { approver, reason },
        });
        Ok(p.listed(id, now))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        // The map stays consistent whatever panicked while holding it: each change is one call.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
