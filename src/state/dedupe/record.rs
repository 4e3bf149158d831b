//! The vocabulary both dedupe backends share: what identifies a call, what is recorded of it,
//! how a deduplicated call was answered, and the answers made up when it was not run.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::receipts::Outcome;

/// A call's answer as recorded for replays: the result and how the call ended.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub result: CallToolResult,
    pub outcome: Option<Outcome>,
}

/// What identifies "the same call": the caller, the tool, and either the canonical arguments
/// (`dedupe`) or the client's idempotency key, which then names the request whatever its
/// arguments (a repeat with other arguments is refused, not run).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub caller: String,
    pub tool: String,
    /// Digest of the canonical arguments.
    pub arguments: String,
    /// The client's `narrowgate/idempotencyKey`, when it sent one.
    pub idempotency_key: Option<String>,
}

impl CallKey {
    /// Whether a call recorded (or running) with arguments digest `recorded` may answer this one.
    /// Always, when the arguments are the identity; with an idempotency key, only for the same
    /// arguments.
    pub fn same_request(&self, recorded: Option<&str>) -> bool {
        self.idempotency_key.is_none() || recorded.is_none_or(|r| r == self.arguments)
    }
}

/// The answer to a repeat of an idempotency key with other arguments: nothing is run.
pub fn key_reused() -> Recorded {
    Recorded {
        result: CallToolResult::error(vec![ContentBlock::text(
            "the idempotency key was used for another request (other arguments) by this caller \
             and tool; send a new key for a new request",
        )]),
        outcome: Some(Outcome::RejectedInput),
    }
}

/// The answer to a call the in-memory records have no room for: refused before running (outcome
/// `rate_limited`: the gateway is at capacity, the client may retry).
pub fn no_room(held: usize) -> Recorded {
    Recorded {
        result: CallToolResult::error(vec![ContentBlock::text(format!(
            "the gateway holds {held} recorded calls (dedupe windows and idempotency keys, \
             `state: memory`), as many as it keeps: this call was not performed; retry once \
             older records expire"
        ))]),
        outcome: Some(Outcome::RateLimited),
    }
}

/// How a deduplicated call was answered.
pub enum Deduped<T> {
    /// This call ran; `T` is what the runner returned.
    Ran(T),
    /// An identical call ran (or was running): this is its recorded answer, marked replayed.
    Replayed(Recorded),
    /// This call did not run and there is no recorded answer to replay: an identical call's
    /// effect is unknown, or the shared records cannot be reached. The tool error to answer,
    /// with its outcome; the receipt shows neither an attempt nor a replay.
    NotRun(Recorded),
}

/// The answer of a call that was not run because an identical call's effect is unknown:
/// running it could make the effect happen twice, so it says so instead (outcome `unknown`).
pub fn effect_unknown(what_happened: &str) -> Recorded {
    Recorded {
        result: CallToolResult::error(vec![ContentBlock::text(format!(
            "{what_happened}; its effect is unknown, so it was not repeated"
        ))]),
        outcome: Some(Outcome::Unknown),
    }
}

/// Marks a recorded result as replayed: `_meta: {"narrowgate/replayed": true}`.
pub fn replayed(mut recorded: Recorded) -> Recorded {
    let mut meta = recorded.result.meta.take().unwrap_or_default();
    meta.0
        .insert("narrowgate/replayed".into(), Value::Bool(true));
    recorded.result.meta = Some(meta);
    recorded
}
