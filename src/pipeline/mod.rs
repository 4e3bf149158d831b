//! The life of one `tools/call`, in one function ([`Version::execute`]): authorise, validate the
//! arguments, call the upstream, validate the result, answer. Each step is a call into the module
//! that owns it; this file only sequences them and decides the [`Outcome`].

mod cache;
pub mod failure;
pub mod idempotency;
pub mod preconditions;
mod recovery;
mod search;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, InputRequiredResult,
    JsonObject, ProtocolVersion, RequestMetaObject, ResultType,
};
use serde_json::Value;

use crate::approvals::step::Reach;
use crate::contract::digest;
use crate::contract::enforce::{self, OutputSchemas};
use crate::contract::errors::ErrorType;
use crate::contract::fixed::Who;
use crate::contract::{Approval, ToolContract};
use crate::discovery;
use crate::policy::Caller;
use crate::receipts::{ApprovalRecord, Call, Outcome};
use crate::runtime::Version;
use crate::runtime::catalog::ExposedTool;
use crate::state::dedupe::{CallKey, Deduped, Recorded};
use crate::telemetry::{self, UpstreamAttempt};
use crate::upstream::call_relay::CallRelay;
use crate::upstream::{CallError, Upstream};
use failure::{Failure, rejected_input};
use idempotency::BadKey;

pub use failure::unknown_tool;

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
    /// Why the call was refused, in words, for the receipt (the precondition that denied it).
    pub reason: Option<String>,
    /// How its approval went, for a tool with `approval` (boxed: most calls have none).
    pub approval: Option<Box<ApprovalRecord>>,
    /// The user's approval question that answers the call instead of a result (MRTR, on a
    /// 2026-07-28 stateless request): the call is not over, and leaves no receipt yet.
    pub asked: Option<Box<InputRequiredResult>>,
    /// The answer came from the result cache (`cache:`).
    pub cached: bool,
}

/// A call answered before anything was sent upstream.
impl From<(Answer, Outcome)> for Executed {
    fn from((answer, outcome): (Answer, Outcome)) -> Executed {
        Executed {
            answer,
            outcome,
            attempts: 0,
            replayed: false,
            reason: None,
            approval: None,
            asked: None,
            cached: false,
        }
    }
}

impl Version {
    /// Handles `tools/call` for an authenticated `caller`. `idempotency_key` is the request's
    /// `narrowgate/idempotencyKey`, as read from its `_meta` (refused if malformed).
    pub fn call_tool<'a>(
        &'a self,
        caller: &'a Caller,
        request: CallToolRequestParams,
        protocol: Option<&'a ProtocolVersion>,
        idempotency_key: Result<Option<String>, BadKey>,
        reach: &'a Reach,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + 'a {
        // Not an `async fn` around the call: its future would hold a second copy of `request`.
        self.call_tool_recovering(caller, request, protocol, idempotency_key, reach, true)
    }

    /// [`call_tool`](Self::call_tool); `recover`: a failure may be recovered from by the tool's
    /// `on_error` (not for a fallback's own call: one recovery per call, never a chain).
    async fn call_tool_recovering(
        &self,
        caller: &Caller,
        mut request: CallToolRequestParams,
        protocol: Option<&ProtocolVersion>,
        idempotency_key: Result<Option<String>, BadKey>,
        reach: &Reach,
        recover: bool,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = SystemTime::now();
        let clock = Instant::now();
        // Counted until answered, so that a receipt waits to share its commit only when other
        // calls are under way.
        let _under_way = self.kept.receipts.call_started();
        // 0. A searching caller's meta-tools (`discovery`): `call_tool` is the named tool's own
        //    call from here on (its receipt and span name that tool); `search_tools` is answered
        //    by the gateway.
        let searching = caller.searches();
        let mut unusable_call = None;
        if searching && request.name == discovery::CALL_TOOL {
            match discovery::CallArgs::parse(request.arguments.take()) {
                Ok(call) => {
                    request.name = call.name.into();
                    request.arguments = call.arguments;
                }
                Err(message) => unusable_call = Some(message),
            }
        }
        // The name as the client sent it may be anything: logs and the receipt get it escaped
        // and bounded (a valid name unchanged).
        let tool = crate::policy::names::shown_tool(&request.name).into_owned();
        // Validated, digested for dedupe and the receipt; `execute` forwards the request's own,
        // and sets both to what goes upstream when the tool has `fixed` arguments.
        let mut arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        // A fallback takes the client's arguments, as sent: kept only for tools that have one.
        let contract = self.contracts.tools.get(&tool);
        let on_error = contract
            .and_then(|c| c.on_error.as_ref())
            .filter(|_| recover);
        let as_sent = on_error.map(|_| Box::new((request.arguments.clone(), request.meta.clone())));
        let mut executed = if let Some(message) = unusable_call {
            let failure = Failure::new(ErrorType::InvalidArguments, message);
            (Ok(failure.into_result()), Outcome::RejectedInput).into()
        } else if searching && request.name == discovery::SEARCH_TOOLS {
            self.search_tools(caller, request.arguments.as_ref(), reach)
        } else {
            self.execute(
                caller,
                request,
                &mut arguments,
                protocol,
                idempotency_key,
                reach,
            )
            .await
        };
        // A call answered with the user's approval question (MRTR) is not over: the call sent
        // again with the answer writes the receipt.
        if let Some(asked) = executed.asked {
            tracing::info!(caller = %caller.name, %tool, "tools/call: the user's approval asked (input required)");
            return Ok(CallToolResponse::InputRequired(*asked));
        }
        // Every tool error carries its type (the dedupe records' refusals get theirs here).
        if let Ok(result) = &mut executed.answer {
            failure::ensure_typed(result, executed.outcome);
        }
        let error_type = match &executed.answer {
            Ok(result) => failure::type_of(result),
            Err(error) => failure::type_of_protocol_error(error)
                .or((executed.outcome == Outcome::Denied).then_some("denied")),
        }
        .map(str::to_string);
        // 5. Recover (`on_error`): a covered failure answers from the fallback tool, or with
        //    the tool's degraded text.
        let mut answer = executed.answer.map(CallToolResponse::Complete);
        let mut fallback = None;
        if let (Some(on_error), Some(error_type), Some(as_sent)) =
            (on_error, error_type.as_deref(), as_sent)
            && on_error.covers(error_type)
        {
            let (arguments, meta) = *as_sent;
            if let Some((taken, recovered)) =
                Box::pin(self.recover(caller, on_error, &answer, arguments, meta, protocol, reach))
                    .await
            {
                fallback = Some(taken);
                answer = recovered;
            }
        }
        let call = Call {
            caller: &caller.name,
            tool: &tool,
            // Also for a denied call, when the tool exists: the receipt says what was attempted.
            contract: contract.map(AsRef::as_ref),
            arguments: &arguments,
            outcome: executed.outcome,
            attempts: executed.attempts,
            replayed: executed.replayed,
            reason: executed.reason.as_deref(),
            started,
            duration: clock.elapsed(),
            // The trace of this request's SERVER span (or the client's, or a local id).
            trace_id: telemetry::trace_id(),
            approval: executed.approval.as_deref(),
            error_type: error_type.as_deref(),
            fallback: fallback.as_deref(),
            cached: executed.cached,
        };
        telemetry::note_call(&call);
        // The answer waits until its receipt is on disk (docs/semantics.md). A receipt that cannot be
        // written is logged loudly by `record`, and the call is answered all the same.
        let receipt = self.kept.receipts.record(&call).await;
        tracing::info!(
            caller = %caller.name,
            %tool,
            outcome = %executed.outcome,
            receipt = %receipt.as_deref().unwrap_or("-"),
            "tools/call"
        );
        answer.map(|response| match response {
            CallToolResponse::Complete(mut result) => {
                // Results relayed from older upstreams lack `resultType`, which 2026-07-28
                // clients require; rmcp strips it again for older clients.
                result.result_type = Some(ResultType::COMPLETE);
                CallToolResponse::Complete(result)
            }
            other => other,
        })
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
            reason: None,
            started: SystemTime::now(),
            duration: Duration::ZERO,
            trace_id: telemetry::trace_id(),
            approval: None,
            error_type: Some(ErrorType::Denied.as_str()),
            fallback: None,
            cached: false,
        };
        let _ = self.kept.receipts.record(&call).await;
    }

    /// The call pipeline. Protocol errors are `Err`; everything a model should read, rejections
    /// included, is a tool error in `Ok`.
    async fn execute(
        &self,
        caller: &Caller,
        mut request: CallToolRequestParams,
        arguments: &mut Value,
        protocol: Option<&ProtocolVersion>,
        idempotency_key: Result<Option<String>, BadKey>,
        reach: &Reach,
    ) -> Executed {
        // 1. Authorise: a tool that is not the caller's gets the same answer as one that does
        //    not exist, so callers cannot probe for tools.
        let catalog = self.catalog();
        //    An app-only tool (MCP Apps) exists only for clients of the UI extension.
        let Some(tool) = catalog
            .exposed(&request.name)
            .filter(|_| caller.may_use(&request.name))
            .filter(|t| reach.ui_client || !t.contract.ui.as_ref().is_some_and(|u| u.app_only()))
        else {
            return (Err(unknown_tool(&request.name)), Outcome::Denied).into();
        };
        let contract = &tool.contract;
        let upstream_schemas = tool.upstream_schemas.as_ref();

        // 2. Validate the arguments against the contract, set the ones it fixes, and validate
        //    what goes upstream against the upstream's own schema.
        let who = Who {
            name: &caller.name,
            roles: &caller.roles,
            claims: &caller.claims,
        };
        match enforce::arguments_to_send(
            contract,
            upstream_schemas.map(|s| s.input.as_ref()),
            arguments,
            &who,
        ) {
            Ok(None) => {}
            Ok(Some(sent)) => {
                request.arguments = sent.as_object().cloned();
                *arguments = sent;
            }
            Err(rejection) => {
                return (
                    rejected_input(rejection.to_string(), protocol),
                    Outcome::RejectedInput,
                )
                    .into();
            }
        }
        let arguments: &Value = arguments;

        let idempotency_key = match idempotency_key {
            Ok(key) => key,
            Err(bad) => {
                return (
                    Ok(Failure::new(ErrorType::InvalidArguments, bad.to_string()).into_result()),
                    Outcome::RejectedInput,
                )
                    .into();
            }
        };

        // 2a. Preconditions (`when`): nothing to do for a tool without them.
        if let Err(denied) = preconditions::check(contract, caller, arguments) {
            return Executed {
                reason: Some(denied.reason),
                ..(
                    Ok(Failure::new(ErrorType::Denied, denied.message).into_result()),
                    Outcome::Denied,
                )
                    .into()
            };
        }

        // 2b. The tool's scopes (the HTTP layer already answers 403 for them; checked again so
        //     no path skips them). Nothing has reached the upstream yet.
        let missing = caller.missing_scopes(&contract.scopes);
        if !missing.is_empty() {
            let message = format!(
                "insufficient scope: `{}` requires the scope(s) {}",
                contract.name,
                missing.join(" ")
            );
            return (
                Ok(Failure::new(ErrorType::Denied, message).into_result()),
                Outcome::Denied,
            )
                .into();
        }
        // 2c. Approval (`approval: user | approver`, `approvals_step`): nothing is forwarded
        //     unless approved. Boxed: its future would otherwise sit in every call's future.
        let (approval, approved_because) = match contract.approval {
            Approval::None => (None, None),
            _ => match Box::pin(
                self.kept
                    .approvals
                    .approve(caller, contract, arguments, reach),
            )
            .await
            {
                Ok(granted) => (Some(Box::new(granted.record)), granted.reason),
                Err(refused) => {
                    let error_type = match refused.record.decision {
                        "timeout" => ErrorType::ApprovalTimeout,
                        // The approvals store cannot be reached: nothing was decided.
                        "unavailable" => ErrorType::Unavailable,
                        _ => ErrorType::ApprovalDenied,
                    };
                    let answer = Failure::new(error_type, refused.message).into_result();
                    return Executed {
                        reason: Some(refused.reason),
                        approval: Some(Box::new(refused.record)),
                        asked: refused.asked,
                        ..(Ok(answer), Outcome::Denied).into()
                    };
                }
            },
        };
        // 2d. The rate limits.
        let relay = reach.relay.as_ref();
        let mut executed = match self.kept.limits.admit(caller, contract).await {
            Err(refusal) => (
                Ok(Failure::of_refusal(&refusal).into_result()),
                Outcome::RateLimited,
            )
                .into(),
            // 2e. The result cache (`cache:`): an identical read inside the window is answered
            //     from it, after the limits (a cached answer is still a call). Boxed: only
            //     `cache:` tools take this path.
            Ok(()) => match contract.cache {
                Some(window) => {
                    Box::pin(self.cached(
                        window,
                        caller,
                        tool,
                        request,
                        arguments,
                        idempotency_key,
                        relay,
                    ))
                    .await
                }
                // 3. The upstream.
                None => {
                    self.deduplicated(caller, tool, request, arguments, idempotency_key, relay)
                        .await
                }
            },
        };
        executed.approval = approval;
        // The approver's reason, for the record (a refusal after approval keeps its own).
        executed.reason = executed.reason.or(approved_because);
        executed
    }

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
    async fn once(
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

    /// How long a call can take: a duplicate on another replica waits about that long.
    pub(crate) fn longest_run(&self, contract: &ToolContract) -> Duration {
        Upstream::longest_call(self.timeout_of(contract), retries_of(contract))
    }

    /// Steps 3 and 4 of [`execute`](Self::execute): call the upstream under the contract's
    /// timeout (retrying only what is safe to repeat), with the gateway's own credentials, never
    /// the caller's; then validate the result before the client sees any of it.
    /// `meta` is the client's `_meta` as forwarded (`relay::meta`), or `None`.
    async fn call_upstream(
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
    fn error_text_bytes(&self) -> usize {
        usize::try_from(self.config.error_text_bytes.0).unwrap_or(usize::MAX)
    }

    /// A call's timeout: the contract's, else its upstream's, else [`DEFAULT_TIMEOUT`].
    fn timeout_of(&self, contract: &ToolContract) -> Duration {
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
