//! The user approvals asked through MRTR (`approval: user` on a 2026-07-28 stateless request).
//!
//! A stateless request has no stream on which the gateway could send the client an
//! `elicitation/create`, so the gateway answers the call with an `InputRequiredResult` carrying
//! the question and a `requestState`, and the client sends the call again with the user's answer
//! and that state. The state is the id of a record kept here: the binding the question was asked
//! for (caller, tool, contract digest, arguments digest), for at most the tool's
//! `approval_timeout`. The answering call is accepted only if its state names a record this
//! gateway (or, with `state: redis://…`, any replica) holds, for the same binding; the record is
//! taken as it is read, so an answer is used once. Nothing in the state itself is trusted: it
//! is an unguessable handle, never data.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::approvals::Binding;
use crate::config::StateBackend;
use crate::state::RedisState;

/// Questions held at most, in memory: beyond it the oldest expired ones are dropped first, and
/// when none has expired a new question is refused (fail closed) rather than the store growing.
const MAX_IN_MEMORY: usize = 10_000;

/// Stores a question. KEYS[1]: its key; ARGV[1]: the binding (JSON); ARGV[2]: lifetime (ms).
const ASK_SCRIPT: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
";

/// Takes a question: its binding, removed as it is read. KEYS[1]: its key.
const TAKE_SCRIPT: &str = r"
local v = redis.call('GET', KEYS[1])
if v then redis.call('DEL', KEYS[1]) end
return v
";

/// Where the questions are kept.
pub enum Questions {
    Memory(Mutex<HashMap<String, (Binding, Instant)>>),
    Redis(Box<RedisQuestions>),
}

pub struct RedisQuestions {
    state: RedisState,
    ask: redis::Script,
    take: redis::Script,
}

impl Questions {
    pub fn new(state: &StateBackend) -> Questions {
        match state {
            StateBackend::Memory => Questions::Memory(Mutex::default()),
            StateBackend::Redis(url) => Questions::Redis(Box::new(RedisQuestions {
                state: RedisState::new(
                    url,
                    "a user's approval cannot be asked on 2026-07-28 stateless requests",
                ),
                ask: redis::Script::new(ASK_SCRIPT),
                take: redis::Script::new(TAKE_SCRIPT),
            })),
        }
    }

    /// Keeps a question about `binding` for `lifetime`; its id (the `requestState`).
    pub async fn ask(&self, binding: &Binding, lifetime: Duration) -> Result<String, String> {
        let id = uuid::Uuid::new_v4().to_string();
        match self {
            Questions::Memory(held) => {
                let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
                if held.len() >= MAX_IN_MEMORY {
                    held.retain(|_, (_, until)| *until > Instant::now());
                }
                if held.len() >= MAX_IN_MEMORY {
                    return Err(format!(
                        "{MAX_IN_MEMORY} questions are waiting for their answers already"
                    ));
                }
                held.insert(id.clone(), (binding.clone(), Instant::now() + lifetime));
            }
            Questions::Redis(r) => {
                let binding = serde_json::to_string(binding).map_err(|e| e.to_string())?;
                let lifetime_ms = u64::try_from(lifetime.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1);
                let mut invocation = r.ask.key(key_of(&id));
                invocation.arg(binding).arg(lifetime_ms);
                r.run::<i64>(&invocation).await?;
            }
        }
        Ok(id)
    }

    /// Takes the question `id`: its binding if this store holds it and it has not expired
    /// (`None`: never asked here, expired, or already answered).
    pub async fn take(&self, id: &str) -> Result<Option<Binding>, String> {
        match self {
            Questions::Memory(held) => {
                let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
                Ok(held
                    .remove(id)
                    .filter(|(_, until)| *until > Instant::now())
                    .map(|(binding, _)| binding))
            }
            Questions::Redis(r) => {
                // An id is a UUID: anything else was never ours (and is no Redis key to build).
                if uuid::Uuid::parse_str(id).is_err() {
                    return Ok(None);
                }
                let invocation = r.take.key(key_of(id));
                let stored: Option<String> = r.run(&invocation).await?;
                Ok(stored.and_then(|s| serde_json::from_str(&s).ok()))
            }
        }
    }
}

impl RedisQuestions {
    async fn run<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, String> {
        self.state.invoke(invocation).await.map_err(|e| {
            let message = format!("Redis at {} failed: {e}", self.state.shown_url());
            self.state
                .log_failure(&format!("user approvals (2026-07-28): {message}"));
            message
        })
    }
}

fn key_of(id: &str) -> String {
    format!("narrowgate:approval-question:{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(arguments_digest: &str) -> Binding {
        Binding {
            caller: "alice".into(),
            tool: "refund".into(),
            contract_digest: "sha256:c".into(),
            arguments_digest: arguments_digest.into(),
        }
    }

    /// Proves: a question is answered once (taken as it is read), an unknown or expired id is
    /// nobody's, and the binding comes back as it was asked.
    #[tokio::test]
    async fn a_question_is_taken_once_and_expires() {
        let questions = Questions::new(&StateBackend::Memory);
        let id = questions
            .ask(&binding("a"), Duration::from_secs(60))
            .await
            .expect("asked");
        assert_eq!(questions.take(&id).await, Ok(Some(binding("a"))));
        assert_eq!(questions.take(&id).await, Ok(None), "used once");
        assert_eq!(questions.take("made-up").await, Ok(None));
        let expired = questions
            .ask(&binding("b"), Duration::ZERO)
            .await
            .expect("asked");
        assert_eq!(questions.take(&expired).await, Ok(None), "expired");
    }
}
