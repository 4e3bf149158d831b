//! Steps 3 and 4 of a `tools/call`: the upstream under the contract's timeout (retrying only
//! what is safe to repeat), then its result checked against both schemas before the client sees
//! any of it; every way it can fail becomes a typed failure.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, JsonObject, RequestMetaObject};

use super::Executed;
use super::failure::{self, Failure};
use crate::contract::ToolContract;
use crate::contract::enforce::{self, OutputSchemas};
use crate::contract::errors::ErrorType;
use crate::receipts::Outcome;
use crate::runtime::Version;
use crate::runtime::catalog::ExposedTool;
use crate::telemetry::UpstreamAttempt;
use crate::upstream::call_relay::CallRelay;
use crate::upstream::{CallError, Upstream};

/// The per-call timeout when neither the contract nor the upstream sets one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl Version {
    /// How long a call can take: a duplicate on another replica waits about that long.
    pub(crate) fn longest_run(&self, contract: &ToolContract) -> Duration {
        Upstream::longest_call(self.timeout_of(contract), retries_of(contract))
    }

    /// Steps 3 and 4 of [`execute`](Self::execute): call the upstream under the contract's
    /// timeout (retrying only what is safe to repeat), with the gateway's own credentials, never
    /// the caller's; then validate the result before the client sees any of it.
    /// `meta` is the client's `_meta` as forwarded (`relay::meta`), or `None`.
    pub(super) async fn call_upstream(
        &self,
        tool: &ExposedTool,
        arguments: Option<JsonObject>,
        meta: Option<RequestMetaObject>,
        relay: Option<&Arc<CallRelay>>,
    ) -> Executed {
        let contract = &tool.contract;
        let upstream_schemas = tool.upstream_schemas.as_ref();
        let (Some(upstream), Some(_)) = (
            self.kept.upstreams.get(&contract.upstream),
            upstream_schemas,
        ) else {
            let unavailable = CallError::Unavailable(contract.upstream.clone());
            return (
                Ok(Failure::new(ErrorType::Unavailable, unavailable.to_string()).into_result()),
                Outcome::UpstreamError,
            )
                .into();
        };
        let mut forwarded = CallToolRequestParams::new(contract.upstream_tool.clone());
        forwarded.arguments = arguments;
        forwarded.meta = meta;
        let attempted = upstream
            .call_with_retries::<UpstreamAttempt>(
                forwarded,
                self.timeout_of(contract),
                retries_of(contract),
                relay,
            )
            .await;
        // An unavailable upstream answers before anything is sent.
        let attempts = match attempted.result {
            Err(CallError::Unavailable(_)) => attempted.attempts - 1,
            _ => attempted.attempts,
        };
        let executed = |answer, outcome| Executed {
            answer,
            outcome,
            attempts,
            replayed: false,
            reason: None,
            approval: None,
            asked: None,
            cached: false,
        };
        let result = match attempted.result {
            Ok(result) => result,
            Err(e) => {
                let outcome = match (&e, contract.idempotent) {
                    (CallError::Timeout(_), true) => Outcome::Timeout,
                    // Sent, but no valid answer came back: it may have taken effect.
                    (
                        CallError::Timeout(_)
                        | CallError::ConnectionLost(_)
                        | CallError::Cancelled
                        | CallError::Malformed(_),
                        false,
                    ) => Outcome::Unknown,
                    _ => Outcome::UpstreamError,
                };
                let message = match (&e, outcome) {
                    (_, Outcome::Unknown) => format!("{e}; {EFFECT_UNKNOWN}"),
                    // The upstream's message is its own text, of any length: bounded and
                    // escaped like a tool error's (the error's `data` is never passed on).
                    (CallError::Protocol(error), _) => enforce::bounded_text(
                        &format!("upstream answered with a protocol error {}: ", error.code.0),
                        &error.message,
                        self.error_text_bytes(),
                    ),
                    _ => e.to_string(),
                };
                let error_type = match (&e, outcome) {
                    (_, Outcome::Unknown) => ErrorType::UnknownOutcome,
                    (_, Outcome::Timeout) => ErrorType::Timeout,
                    (CallError::Unavailable(_), _) => ErrorType::Unavailable,
                    _ => ErrorType::UpstreamError,
                };
                return executed(Ok(Failure::new(error_type, message).into_result()), outcome);
            }
        };
        let schemas = OutputSchemas {
            contract: contract.output_validator.as_deref(),
            upstream: upstream_schemas.and_then(|s| s.output.as_deref()),
            max_bytes: usize::try_from(self.config.max_result_bytes.0).unwrap_or(usize::MAX),
            error_text_bytes: self.error_text_bytes(),
            content: &contract.content,
        };
        match enforce::check_result(result, &schemas) {
            Ok(mut result) if result.is_error == Some(true) => {
                failure::type_upstream_error(&mut result, &contract.errors);
                executed(Ok(result), Outcome::ToolError)
            }
            Ok(result) => executed(Ok(result), Outcome::Ok),
            Err(rejection) => executed(
                Ok(Failure::new(ErrorType::InvalidResult, rejection.to_string()).into_result()),
                Outcome::RejectedOutput,
            ),
        }
    }

    /// `error_text_bytes`, as a length.
    pub(super) fn error_text_bytes(&self) -> usize {
        usize::try_from(self.config.error_text_bytes.0).unwrap_or(usize::MAX)
    }

    /// A call's timeout: the contract's, else its upstream's, else [`DEFAULT_TIMEOUT`].
    pub(super) fn timeout_of(&self, contract: &ToolContract) -> Duration {
        contract
            .timeout
            .or_else(|| {
                self.kept
                    .upstreams
                    .get(&contract.upstream)
                    .and_then(|u| u.default_timeout)
            })
            .unwrap_or(DEFAULT_TIMEOUT)
    }
}

/// How often a failed call may be retried: retrying is only safe when repeating the call cannot
/// do harm.
fn retries_of(contract: &ToolContract) -> u32 {
    if contract.idempotent {
        contract.retries
    } else {
        0
    }
}

/// What a client is told of a call that reached the upstream without a valid answer: a model
/// that reads "failed" retries, and a write would then happen twice.
pub const EFFECT_UNKNOWN: &str = "the call was sent to the upstream, which gave no valid answer, \
    so its effect is unknown: it may or may not have taken effect. Do not retry it blindly; \
    first check whether it took effect";
