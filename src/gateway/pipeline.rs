//! The life of one `tools/call`, in one function ([`Gateway::execute`]): authorise, validate the
//! arguments, call the upstream, validate the result, answer. Each step is a call into the module
//! that owns it; this file only sequences them and decides the [`Outcome`].

use std::time::{Duration, Instant, SystemTime};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, JsonObject, ProtocolVersion,
};
use serde_json::Value;

use super::Gateway;
use super::approvals_step::Reach;
use super::catalog::ExposedTool;
use super::dedupe::{CallKey, Deduped, Recorded};
use crate::contract::digest;
use crate::contract::enforce::{self, OutputSchemas};
use crate::contract::{Approval, ToolContract};
use crate::policy::Caller;
use crate::receipts::{ApprovalRecord, Call, Outcome};
use crate::telemetry::{self, UpstreamAttempt};
use crate::upstream::{CallError, Upstream};

/// The per-call timeout when neither the contract nor the upstream sets one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What the client gets: a result (tool errors included) or a JSON-RPC error.
pub type Answer = Result<CallToolResult, ErrorData>;

/// How a call ended: the answer, plus what its receipt records.
pub struct Executed {
    pub answer: Answer,
    pub outcome: Outcome,
    /// How many times the upstream was called (0: the call never reached it).
    pub attempts: u32,
    /// The answer is a recorded result (`dedupe`), not a new execution.
    pub replayed: bool,
    /// How its approval went, for a tool with `approval`.
    pub approval: Option<Box<ApprovalRecord>>,
}

/// A call answered before anything was sent upstream.
impl From<(Answer, Outcome)> for Executed {
    fn from((answer, outcome): (Answer, Outcome)) -> Executed {
        Executed {
            answer,
            outcome,
            attempts: 0,
            replayed: false,
            approval: None,
        }
    }
}

impl Gateway {
    /// Handles `tools/call` for an authenticated `caller`.
    pub async fn call_tool(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
        protocol: Option<&ProtocolVersion>,
        reach: &Reach,
    ) -> Answer {
        let started = SystemTime::now();
        let clock = Instant::now();
        // Counted until answered, so that a receipt waits to share its commit only when other
        // calls are under way.
        let _under_way = self.receipts.call_started();
        let tool = request.name.to_string();
        // Validated, digested for dedupe and the receipt; `execute` forwards the request's own.
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let executed = self
            .execute(caller, request, &arguments, protocol, reach)
            .await;
        let call = Call {
            caller: &caller.name,
            tool: &tool,
            // Also for a denied call, when the tool exists: the receipt says what was attempted.
            contract: self.contracts.tools.get(&tool).map(AsRef::as_ref),
            arguments: &arguments,
            outcome: executed.outcome,
            attempts: executed.attempts,
            replayed: executed.replayed,
            started,
            duration: clock.elapsed(),
            // The trace of this request's SERVER span (or the client's, or a local id).
            trace_id: telemetry::trace_id(),
            approval: executed.approval.as_deref(),
        };
        telemetry::note_call(&call);
        // The answer waits until its receipt is on disk (SPEC §4.11). A receipt that cannot be
        // written is logged loudly by `record`, and the call is answered all the same.
        let receipt = self.receipts.record(&call).await;
        tracing::info!(
            caller = %caller.name,
            %tool,
            outcome = %executed.outcome,
            receipt = %receipt.as_deref().unwrap_or("-"),
            "tools/call"
        );
        executed.answer
    }

    /// Leaves the receipt of a `tools/call` refused before the pipeline (the HTTP layer's
    /// `insufficient_scope` 403).
    pub async fn record_denied(&self, caller: &Caller, tool: &str, arguments: &Value) {
        let call = Call {
            caller: &caller.name,
            tool,
            contract: self.contracts.tools.get(tool).map(AsRef::as_ref),
            arguments,
            outcome: Outcome::Denied,
            attempts: 0,
            replayed: false,
            started: SystemTime::now(),
            duration: Duration::ZERO,
            trace_id: telemetry::trace_id(),
            approval: None,
        };
        let _ = self.receipts.record(&call).await;
    }

    /// The call pipeline. Protocol errors are `Err`; everything a model should read, rejections
    /// included, is a tool error in `Ok`.
    async fn execute(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
        arguments: &Value,
        protocol: Option<&ProtocolVersion>,
        reach: &Reach,
    ) -> Executed {
        // 1. Authorise: a tool that is not the caller's gets the same answer as one that does
        //    not exist, so callers cannot probe for tools.
        let catalog = self.catalog();
        let Some(tool) = catalog
            .exposed(&request.name)
            .filter(|_| caller.may_use(&request.name))
        else {
            return (Err(unknown_tool(&request.name)), Outcome::Denied).into();
        };
        let contract = &tool.contract;
        let upstream_schemas = tool.upstream_schemas.as_ref();

        // 2. Validate the arguments against the contract and the upstream's own schema.
        if let Err(rejection) = enforce::check_arguments(
            &contract.input_validator,
            upstream_schemas.map(|s| s.input.as_ref()),
            arguments,
        ) {
            return (
                rejected_input(rejection.to_string(), protocol),
                Outcome::RejectedInput,
            )
                .into();
        }

        // 2b. Admit: the tool's scopes (the HTTP layer already answers 403 for them; checked again
        //     so no path skips them), then the rate limits. Nothing has reached the upstream yet.
        let missing = caller.missing_scopes(&contract.scopes);
        if !missing.is_empty() {
            let message = format!(
                "insufficient scope: `{}` requires the scope(s) {}",
                contract.name,
                missing.join(" ")
            );
            return (Ok(tool_error(message)), Outcome::Denied).into();
        }
        if let Err(refusal) = self.limits.admit(caller, contract).await {
            return (Ok(refusal.into_result()), Outcome::RateLimited).into();
        }

        // 2c. Approval (`approval: user | approver`): nothing is forwarded unless approved.
        //     Boxed, future and record: they would otherwise sit in every call's future.
        let approval = match contract.approval {
            Approval::None => None,
            _ => {
                let named_id = reach.approval_id.as_deref();
                match Box::pin(self.approve(caller, contract, arguments, named_id, reach)).await {
                    Ok(record) => Some(Box::new(record)),
                    Err((record, message)) => {
                        return Executed {
                            approval: Some(Box::new(record)),
                            ..(Ok(tool_error(message)), Outcome::Denied).into()
                        };
                    }
                }
            }
        };
        // 3. Call the upstream and validate its result; a tool with `dedupe` answers a repeat
        //    inside the window from the record instead of running it again.
        let mut executed = match contract.dedupe {
            None => self.call_upstream(tool, request.arguments).await,
            Some(window) => {
                let key = CallKey {
                    caller: caller.name.clone(),
                    tool: contract.name.clone(),
                    arguments: digest::sha256_of(arguments),
                };
                // How long the call can take: a duplicate on another replica waits about that
                // long.
                let longest_run =
                    Upstream::longest_call(self.timeout_of(contract), retries_of(contract));
                let run = async {
                    let executed = self.call_upstream(tool, request.arguments).await;
                    // Only what reached the upstream is recorded: a call that never left may
                    // run again.
                    let recorded = match (&executed.answer, executed.attempts) {
                        (Ok(result), 1..) => Some(Recorded {
                            result: result.clone(),
                            outcome: Some(executed.outcome),
                        }),
                        _ => None,
                    };
                    (executed, recorded)
                };
                // Boxed: only `dedupe` tools take this path, and its state (a second upstream
                // call, Redis) would otherwise sit in every call's future.
                match Box::pin(self.dedupe.run(key, window, longest_run, run)).await {
                    Deduped::Ran(executed) => executed,
                    Deduped::Replayed(recorded) => Executed {
                        answer: Ok(recorded.result),
                        outcome: recorded.outcome.unwrap_or(Outcome::Ok),
                        attempts: 0,
                        replayed: true,
                        approval: None,
                    },
                    Deduped::NotRun(answer) => (
                        Ok(answer.result),
                        answer.outcome.unwrap_or(Outcome::Unknown),
                    )
                        .into(),
                }
            }
        };
        executed.approval = approval;
        executed
    }

    /// Steps 3 and 4 of [`execute`](Self::execute): call the upstream under the contract's
    /// timeout (retrying only what is safe to repeat), with the gateway's own credentials, never
    /// the caller's; then validate the result before the client sees any of it.
    async fn call_upstream(&self, tool: &ExposedTool, arguments: Option<JsonObject>) -> Executed {
        let contract = &tool.contract;
        let upstream_schemas = tool.upstream_schemas.as_ref();
        let (Some(upstream), Some(_)) = (self.upstreams.get(&contract.upstream), upstream_schemas)
        else {
            let unavailable = CallError::Unavailable(contract.upstream.clone());
            return (
                Ok(tool_error(unavailable.to_string())),
                Outcome::UpstreamError,
            )
                .into();
        };
        let mut forwarded = CallToolRequestParams::new(contract.upstream_tool.clone());
        forwarded.arguments = arguments;
        let attempted = upstream
            .call_with_retries::<UpstreamAttempt>(
                forwarded,
                self.timeout_of(contract),
                retries_of(contract),
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
            approval: None,
        };
        let result = match attempted.result {
            Ok(result) => result,
            Err(e) => {
                let outcome = match (&e, contract.idempotent) {
                    (CallError::Timeout(_), true) => Outcome::Timeout,
                    // Sent, but we cannot know whether it took effect.
                    (CallError::Timeout(_) | CallError::ConnectionLost(_), false) => {
                        Outcome::Unknown
                    }
                    _ => Outcome::UpstreamError,
                };
                let message = match (&e, outcome) {
                    (_, Outcome::Unknown) => {
                        format!("{e}; the call may or may not have taken effect")
                    }
                    // The upstream's message is its own text, of any length: bounded and
                    // escaped like a tool error's (the error's `data` is never passed on).
                    (CallError::Protocol(error), _) => enforce::bounded_text(
                        &format!("upstream answered with a protocol error {}: ", error.code.0),
                        &error.message,
                        self.error_text_bytes(),
                    ),
                    _ => e.to_string(),
                };
                return executed(Ok(tool_error(message)), outcome);
            }
        };
        let schemas = OutputSchemas {
            contract: contract.output_validator.as_deref(),
            upstream: upstream_schemas.and_then(|s| s.output.as_deref()),
            max_bytes: usize::try_from(self.config.max_result_bytes.0).unwrap_or(usize::MAX),
            error_text_bytes: self.error_text_bytes(),
        };
        match enforce::check_result(result, &schemas) {
            Ok(result) if result.is_error == Some(true) => executed(Ok(result), Outcome::ToolError),
            Ok(result) => executed(Ok(result), Outcome::Ok),
            Err(rejection) => executed(
                Ok(tool_error(rejection.to_string())),
                Outcome::RejectedOutput,
            ),
        }
    }

    /// `error_text_bytes`, as a length.
    fn error_text_bytes(&self) -> usize {
        usize::try_from(self.config.error_text_bytes.0).unwrap_or(usize::MAX)
    }

    /// A call's timeout: the contract's, else its upstream's, else [`DEFAULT_TIMEOUT`].
    fn timeout_of(&self, contract: &ToolContract) -> Duration {
        contract
            .timeout
            .or_else(|| {
                self.upstreams
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

/// JSON-RPC -32602 `Unknown tool: NAME` (SPEC §4.4).
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool: {name}"), None)
}

fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Out-of-contract arguments: a tool error from 2025-11-25 on (so models can correct themselves),
/// JSON-RPC -32602 for older protocol revisions (SPEC §4.3).
fn rejected_input(message: String, protocol: Option<&ProtocolVersion>) -> Answer {
    match protocol {
        Some(v) if *v >= ProtocolVersion::V_2025_11_25 => Ok(tool_error(message)),
        _ => Err(ErrorData::invalid_params(message, None)),
    }
}
