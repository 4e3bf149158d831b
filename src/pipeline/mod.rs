//! The life of one `tools/call`, in one function ([`Version::execute`]): authorise, validate the
//! arguments, call the upstream, validate the result, answer. Each step is a call into the module
//! that owns it; this file only sequences them and decides the [`Outcome`].

mod cache;
pub mod failure;
pub mod idempotency;
mod once;
pub mod preconditions;
mod recovery;
mod search;
mod upstream_call;

use std::time::{Duration, Instant, SystemTime};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, InputRequiredResult,
    ProtocolVersion, ResultType,
};
use serde_json::Value;

use crate::approvals::step::Reach;
use crate::contract::Approval;
use crate::contract::enforce;
use crate::contract::errors::ErrorType;
use crate::contract::fixed::Who;
use crate::discovery;
use crate::policy::Caller;
use crate::receipts::{ApprovalRecord, Call, Outcome};
use crate::runtime::Version;
use crate::telemetry;
use failure::{Failure, rejected_input};
use idempotency::BadKey;

pub use failure::unknown_tool;

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
}
