//! The life of one `tools/call`, in one function ([`Gateway::execute`]): authorise, validate the
//! arguments, call the upstream, validate the result, answer. Each step is a call into the module
//! that owns it; this file only sequences them and decides the [`Outcome`].

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, ProtocolVersion,
};
use serde_json::Value;

use super::Gateway;
use crate::contract::enforce::{self, OutputSchemas};
use crate::policy::Caller;
use crate::receipts::Outcome;
use crate::upstream::CallError;

/// The per-call timeout when neither the contract nor the upstream sets one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What the client gets: a result (tool errors included) or a JSON-RPC error.
pub type Answer = Result<CallToolResult, ErrorData>;

impl Gateway {
    /// Handles `tools/call` for an authenticated `caller`.
    pub async fn call_tool(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
        protocol: Option<&ProtocolVersion>,
    ) -> Answer {
        let tool = request.name.to_string();
        let (answer, outcome) = self.execute(caller, request, protocol).await;
        tracing::info!(caller = %caller.name, %tool, outcome = %outcome, "tools/call");
        answer
    }

    /// The call pipeline. Protocol errors are `Err`; everything a model should read, rejections
    /// included, is a tool error in `Ok`.
    async fn execute(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
        protocol: Option<&ProtocolVersion>,
    ) -> (Answer, Outcome) {
        // 1. Authorise: a tool that is not the caller's gets the same answer as one that does
        //    not exist, so callers cannot probe for tools.
        let catalog = self.catalog();
        let Some(tool) = catalog
            .exposed(&request.name)
            .filter(|_| caller.may_use(&request.name))
        else {
            return (Err(unknown_tool(&request.name)), Outcome::Denied);
        };
        let contract = &tool.contract;
        let upstream_schemas = tool.upstream_schemas.as_ref();

        // 2. Validate the arguments against the contract and the upstream's own schema.
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        if let Err(rejection) = enforce::check_arguments(
            &contract.input_validator,
            upstream_schemas.map(|s| s.input.as_ref()),
            &arguments,
        ) {
            return (
                rejected_input(rejection.to_string(), protocol),
                Outcome::RejectedInput,
            );
        }

        // 3. Call the upstream under the contract's timeout, with the gateway's own credentials
        //    (never the caller's).
        let Some(upstream) = self.upstreams.get(&contract.upstream) else {
            return (
                Ok(tool_error(format!(
                    "upstream {} unavailable",
                    contract.upstream
                ))),
                Outcome::UpstreamError,
            );
        };
        if upstream_schemas.is_none() {
            let unavailable = CallError::Unavailable(upstream.name.clone());
            return (
                Ok(tool_error(unavailable.to_string())),
                Outcome::UpstreamError,
            );
        }
        let timeout = contract
            .timeout
            .or(upstream.default_timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        let mut forwarded = CallToolRequestParams::new(contract.upstream_tool.clone());
        forwarded.arguments = request.arguments;
        let result = match upstream.call(forwarded, timeout).await {
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
                let message = match outcome {
                    Outcome::Unknown => format!("{e}; the call may or may not have taken effect"),
                    _ => e.to_string(),
                };
                return (Ok(tool_error(message)), outcome);
            }
        };

        // 4. Validate the result before the client sees any of it.
        let schemas = OutputSchemas {
            contract: contract.output_validator.as_deref(),
            upstream: upstream_schemas.and_then(|s| s.output.as_deref()),
            max_bytes: usize::try_from(self.config.max_result_bytes.0).unwrap_or(usize::MAX),
        };
        match enforce::check_result(result, &schemas) {
            Ok(result) if result.is_error == Some(true) => (Ok(result), Outcome::ToolError),
            Ok(result) => (Ok(result), Outcome::Ok),
            Err(rejection) => (
                Ok(tool_error(rejection.to_string())),
                Outcome::RejectedOutput,
            ),
        }
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
