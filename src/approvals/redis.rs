//! Pending approvals shared by replicas (`state: redis://…`): a call held by one replica is
//! listed, decided and collected through any of them.
//!
//! Each approval is a hash `narrowgate:approval:<id>` (`binding`, `shown`, `created_ms`,
//! `deadline_ms`, `state`, `binding_key`) that expires with its `approval_timeout`;
//! `narrowgate:approval-binding:<sha256 of the binding>` names the live approval of an identical
//! call, and the sorted set `narrowgate:approvals` (by creation time) lists them. Every change is
//! one script, so two replicas never both take (or both decide) one approval. A waiting call
//! polls its approval's state. If Redis cannot be reached, calls of `approval: approver` tools
//! are refused (fail closed) and the approvals API answers 503.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Attached, Binding, DecideError, Decision, Listed, Request, State, Watcher};
use crate::state::RedisState;

/// How often a waiting call looks at its approval: an approver's decision reaches the call
/// within this, at one cheap script call per waiting call.
const POLL_EVERY: Duration = Duration::from_millis(200);
/// The sorted set of approval ids, by creation time.
const INDEX: &str = "narrowgate:approvals";

/// Finds the call's approval (named by ARGV[1], else by its binding key KEYS[1]), takes it if
/// decided, or opens a new one. ARGV: named id or '', new id, shown arguments, ttl ms, created
/// ms, binding JSON, pending state JSON, deadline ms. Returns {'unknown'|'other', id},
/// {'collected', id, state} or {'waiting', id, deadline ms}.
const ATTACH_SCRIPT: &str = r"
local prefix = 'narrowgate:approval:'
local id = ARGV[1]
if id ~= '' then
  local b = redis.call('HGET', prefix .. id, 'binding')
  if not b then return {'unknown', id} end
  if b ~= ARGV[6] then return {'other', id} end
else
  id = redis.call('GET', KEYS[1])
  if id and redis.call('EXISTS', prefix .. id) == 0 then id = false end
end
if id then
  local s = redis.call('HGET', prefix .. id, 'state')
  if s ~= ARGV[7] then
    redis.call('DEL', prefix .. id)
    redis.call('ZREM', KEYS[2], id)
    if redis.call('GET', KEYS[1]) == id then redis.call('DEL', KEYS[1]) end
    return {'collected', id, s}
  end
  return {'waiting', id, redis.call('HGET', prefix .. id, 'deadline_ms')}
end
id = ARGV[2]
redis.call('HSET', prefix .. id, 'binding', ARGV[6], 'shown', ARGV[3], 'created_ms', ARGV[5],
  'deadline_ms', ARGV[8], 'state', ARGV[7], 'binding_key', KEYS[1])
redis.call('PEXPIRE', prefix .. id, ARGV[4])
redis.call('SET', KEYS[1], id, 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[5], id)
return {'waiting', id, ARGV[8]}
";

/// Takes approval ARGV[1] out if it is decided (ARGV[2]: the pending state JSON) or ARGV[3] is
/// 'remove'; returns its state (nil: gone).
const COLLECT_SCRIPT: &str = r"
local k = 'narrowgate:approval:' .. ARGV[1]
local s = redis.call('HGET', k, 'state')
if not s then return false end
if s ~= ARGV[2] or ARGV[3] == 'remove' then
  local bk = redis.call('HGET', k, 'binding_key')
  redis.call('DEL', k)
  redis.call('ZREM', KEYS[1], ARGV[1])
  if bk and redis.call('GET', bk) == ARGV[1] then redis.call('DEL', bk) end
end
return s
";

/// The state of approval ARGV[1] (nil: gone).
const STATE_SCRIPT: &str = r"
return redis.call('HGET', 'narrowgate:approval:' .. ARGV[1], 'state')
";

/// Decides approval ARGV[1]: ARGV[2] the new state, ARGV[3] the pending state, ARGV[4] the
/// approver. Returns {'unknown'}, {'decided'}, {'own'} or {'ok', binding, shown, created ms,
/// deadline ms}.
const DECIDE_SCRIPT: &str = r"
local k = 'narrowgate:approval:' .. ARGV[1]
local b = redis.call('HGET', k, 'binding')
if not b then return {'unknown'} end
if cjson.decode(b).caller == ARGV[4] then return {'own'} end
if redis.call('HGET', k, 'state') ~= ARGV[3] then return {'decided'} end
redis.call('HSET', k, 'state', ARGV[2])
local v = redis.call('HMGET', k, 'shown', 'created_ms', 'deadline_ms')
return {'ok', b, v[1], v[2], v[3]}
";

/// Every live approval: {id, binding, shown, created ms, deadline ms, state}, oldest first;
/// ids whose approval expired leave the index.
const LIST_SCRIPT: &str = r"
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local v = redis.call('HMGET', 'narrowgate:approval:' .. id, 'binding', 'shown', 'created_ms',
    'deadline_ms', 'state')
  if v[1] then
    table.insert(out, {id, v[1], v[2], v[3], v[4], v[5]})
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
";

pub struct RedisApprovals {
    state: RedisState,
    attach: redis::Script,
    collect: redis::Script,
    read: redis::Script,
    decide: redis::Script,
    list: redis::Script,
    /// `State::Pending` as stored, compared by the scripts.
    pending: String,
}

impl RedisApprovals {
    pub fn new(url: &str) -> RedisApprovals {
        RedisApprovals {
            state: RedisState::new(
                url,
                "every call of an `approval: approver` tool will be refused",
            ),
            attach: redis::Script::new(ATTACH_SCRIPT),
            collect: redis::Script::new(COLLECT_SCRIPT),
            read: redis::Script::new(STATE_SCRIPT),
            decide: redis::Script::new(DECIDE_SCRIPT),
            list: redis::Script::new(LIST_SCRIPT),
            pending: encode(&State::Pending),
        }
    }

    /// Runs a script; a failure drops the connection (the next call reconnects) and is logged.
    async fn run<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, DecideError> {
        match self.state.invoke(invocation).await {
            Ok(value) => Ok(value),
            Err(e) => {
                let message = format!("Redis at {} failed: {e}", self.state.shown_url());
                self.state
                    .failed(&format!("pending approvals: {message}"))
                    .await;
                Err(DecideError::Store(message))
            }
        }
    }

    pub(super) async fn attach(&self, request: &Request<'_>) -> Result<Attached, DecideError> {
        let binding = encode_value(&request.binding);
        let binding_key = format!(
            "narrowgate:approval-binding:{:x}",
            Sha256::digest(binding.as_bytes())
        );
        let now = now_ms();
        let ttl = u64::try_from(request.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let new_id = uuid::Uuid::new_v4().to_string();
        let mut invocation = self.attach.prepare_invoke();
        invocation
            .key(&binding_key)
            .key(INDEX)
            .arg(request.named_id.unwrap_or(""))
            .arg(&new_id)
            .arg(request.shown_arguments.to_string())
            .arg(ttl)
            .arg(now)
            .arg(&binding)
            .arg(&self.pending)
            .arg(now.saturating_add(ttl));
        let answer: Vec<String> = self.run(&invocation).await?;
        let field = |i: usize| answer.get(i).cloned().unwrap_or_default();
        Ok(match field(0).as_str() {
            "unknown" => Attached::Refused(format!(
                "approval {} is unknown: it timed out, was used, or never existed",
                field(1)
            )),
            "other" => Attached::Refused(format!(
                "approval {} was given for another call (caller, tool, contract or arguments \
                 differ); it cannot be used for this one",
                field(1)
            )),
            "collected" => Attached::Collected(field(1), decode(&field(2))),
            _ => Attached::Waiting {
                id: field(1),
                deadline: instant_of(field(2).parse().unwrap_or(now)),
                watcher: Watcher::Redis,
            },
        })
    }

    /// The approval's state after the next poll interval; `None` once it is gone. A Redis
    /// failure reads as still pending: the call's own deadline bounds the wait.
    pub(super) async fn next_state(&self, id: &str) -> Option<State> {
        tokio::time::sleep(POLL_EVERY).await;
        let mut invocation = self.read.prepare_invoke();
        invocation.arg(id);
        match self.run::<Option<String>>(&invocation).await {
            Ok(state) => state.map(|s| decode(&s)),
            Err(_) => Some(State::Pending),
        }
    }

    pub(super) async fn collect(&self, id: &str) -> Option<State> {
        let mut invocation = self.collect.prepare_invoke();
        invocation.key(INDEX).arg(id).arg(&self.pending).arg("");
        let state: Option<String> = self.run(&invocation).await.ok()?;
        state.map(|s| decode(&s))
    }

    pub(super) async fn remove(&self, id: &str) {
        let mut invocation = self.collect.prepare_invoke();
        invocation
            .key(INDEX)
            .arg(id)
            .arg(&self.pending)
            .arg("remove");
        let _: Result<Option<String>, _> = self.run(&invocation).await;
    }

    pub(super) async fn list(&self) -> Result<Vec<Listed>, DecideError> {
        let mut invocation = self.list.prepare_invoke();
        invocation.key(INDEX);
        let rows: Vec<Vec<String>> = self.run(&invocation).await?;
        let now = now_ms();
        Ok(rows
            .iter()
            .filter_map(|row| match row.as_slice() {
                [id, binding, shown, created, deadline, state] => listed(
                    id,
                    binding,
                    shown,
                    created,
                    deadline,
                    decode(state).name(),
                    now,
                ),
                _ => None,
            })
            .collect())
    }

    pub(super) async fn decide(
        &self,
        id: &str,
        approver: &str,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<Listed, DecideError> {
        let approver_name = approver.to_string();
        let state = match decision {
            Decision::Approve => State::Approved {
                approver: approver_name,
                reason,
            },
            Decision::Deny => State::Denied {
                approver: approver_name,
                reason,
            },
        };
        let mut invocation = self.decide.prepare_invoke();
        invocation
            .arg(id)
            .arg(encode(&state))
            .arg(&self.pending)
            .arg(approver);
        let answer: Vec<String> = self.run(&invocation).await?;
        match answer.as_slice() {
            [ok, binding, shown, created, deadline] if ok == "ok" => listed(
                id,
                binding,
                shown,
                created,
                deadline,
                state.name(),
                now_ms(),
            )
            .ok_or_else(|| DecideError::Store(format!("approval {id} is stored unreadably"))),
            [own] if own == "own" => Err(DecideError::OwnCall(approver.to_string())),
            [decided] if decided == "decided" => Err(DecideError::AlreadyDecided(id.to_string())),
            _ => Err(DecideError::Unknown(id.to_string())),
        }
    }
}

/// A stored approval as listed.
fn listed(
    id: &str,
    binding: &str,
    shown: &str,
    created: &str,
    deadline: &str,
    state: &'static str,
    now: u64,
) -> Option<Listed> {
    let binding: Binding = serde_json::from_str(binding).ok()?;
    let created: u64 = created.parse().ok()?;
    let deadline: u64 = deadline.parse().ok()?;
    Some(Listed {
        id: id.to_string(),
        caller: binding.caller,
        tool: binding.tool,
        arguments: serde_json::from_str(shown).unwrap_or(Value::Null),
        age_seconds: now.saturating_sub(created) as f64 / 1000.0,
        expires_in_seconds: deadline.saturating_sub(now) as f64 / 1000.0,
        state,
    })
}

fn encode(state: &State) -> String {
    encode_value(state)
}

fn encode_value<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A stored state; anything unreadable counts as still pending (never as a decision).
fn decode(state: &str) -> State {
    serde_json::from_str(state).unwrap_or(State::Pending)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// This process's instant for the wall-clock time `ms` (replicas' clocks are assumed close).
fn instant_of(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms.saturating_sub(now_ms()))
}
