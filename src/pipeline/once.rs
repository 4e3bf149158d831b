//! Step 3 of a `tools/call`, for `dedupe` tools and calls named by an idempotency key: the
//! upstream at most once per key inside its window; a repeat, or a duplicate in flight, gets the
//! recorded answer (docs/semantics.md, "Dedupe" and "Idempotency keys").

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, JsonObject, RequestMetaObject};
use serde_json::Value;

use super::{Executed, idempotency};
use crate::contract::digest;
use crate::policy::Caller;
use crate::receipts::Outcome;
use crate::runtime::Version;
use crate::runtime::catalog::ExposedTool;
use crate::state::dedupe::{CallKey, Deduped, Recorded};
use crate::upstream::call_relay::CallRelay;

impl Version {
    /// Step 3 of [`execute`](Self::execute): the upstream, at most once per key for `dedupe`
    /// tools and keyed calls.
    pub(super) async fn deduplicated(
        &self,
        caller: &Caller,
        tool: &ExposedTool,
        request: CallToolRequestParams,
        arguments: &Value,
        idempotency_key: Option<String>,
        relay: Option<&Arc<CallRelay>>,
    ) -> Executed {
        let contract = &tool.contract;

        // 3. Call the upstream and validate its result; a tool with `dedupe`, or a call named by
        //    an idempotency key, answers a repeat inside the window from the record instead of
        //    running it again.
        if idempotency_key.is_none() && contract.dedupe.is_none() {
            return self
                .call_upstream(tool, request.arguments, request.meta, relay)
                .await;
        }
        let by_arguments = CallKey {
            caller: caller.name.clone(),
            tool: contract.name.clone(),
            arguments: digest::sha256_of(arguments),
            idempotency_key: None,
        };
        let (Some(key), dedupe) = (idempotency_key, contract.dedupe) else {
            let window = contract.dedupe.unwrap_or_default();
            return self
                .once(
                    tool,
                    by_arguments,
                    window,
                    request.arguments,
                    request.meta,
                    relay,
                )
                .await;
        };
        let by_key = CallKey {
            idempotency_key: Some(key),
            ..by_arguments.clone()
        };
        let run = async {
            let executed = match dedupe {
                // A `dedupe` tool keeps its own promise under a key too: the identical call, keyed
                // or not, runs once in its window.
                Some(window) => {
                    Box::pin(self.once(
                        tool,
                        by_arguments,
                        window,
                        request.arguments,
                        request.meta,
                        relay,
                    ))
                    .await
                }
                None => {
                    self.call_upstream(tool, request.arguments, request.meta, relay)
                        .await
                }
            };
            let recorded = recorded_of(&executed);
            (executed, recorded)
        };
        let window = dedupe.unwrap_or(idempotency::DEFAULT_WINDOW);
        let longest_run = self.longest_run(contract);
        // Boxed: only keyed calls take this path (see `once`).
        answered(Box::pin(self.kept.dedupe.run(by_key, window, longest_run, run)).await)
    }

    /// Runs the call at most once per `key` inside `window`: a repeat, or a duplicate in flight,
    /// gets the recorded answer.
    pub(super) async fn once(
        &self,
        tool: &ExposedTool,
        key: CallKey,
        window: Duration,
        arguments: Option<JsonObject>,
        meta: Option<RequestMetaObject>,
        relay: Option<&Arc<CallRelay>>,
    ) -> Executed {
        let run = async {
            let executed = self.call_upstream(tool, arguments, meta, relay).await;
            let recorded = recorded_of(&executed);
            (executed, recorded)
        };
        let longest_run = self.longest_run(&tool.contract);
        // Boxed: only `dedupe` tools and keyed calls take this path, and its state (a second
        // upstream call, Redis) would otherwise sit in every call's future.
        answered(Box::pin(self.kept.dedupe.run(key, window, longest_run, run)).await)
    }
}

/// What a call leaves for its repeats: only what reached the upstream (a call that never left may
/// run again), or a recorded answer it replayed.
fn recorded_of(executed: &Executed) -> Option<Recorded> {
    match (&executed.answer, executed.attempts, executed.replayed) {
        (Ok(result), 1.., _) | (Ok(result), _, true) => Some(Recorded {
            result: result.clone(),
            outcome: Some(executed.outcome),
        }),
        _ => None,
    }
}

/// A deduplicated call's [`Executed`]: its own, or a replay (attempts 0), or the tool error of
/// one that was not run.
fn answered(deduped: Deduped<Executed>) -> Executed {
    match deduped {
        Deduped::Ran(executed) => executed,
        Deduped::Replayed(recorded) => Executed {
            answer: Ok(recorded.result),
            outcome: recorded.outcome.unwrap_or(Outcome::Ok),
            attempts: 0,
            replayed: true,
            reason: None,
            approval: None,
            asked: None,
            cached: false,
        },
        Deduped::NotRun(answer) => (
            Ok(answer.result),
            answer.outcome.unwrap_or(Outcome::Unknown),
        )
            .into(),
    }
}
