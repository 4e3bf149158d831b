//! The life of one `tools/call`, in one function: authorise, validate arguments, call the
//! upstream, validate the result, answer. Each step is a call into the module that owns it.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, ProtocolVersion,
};
use serde_json::Value;

use super::Gateway;
use crate::contract::enforce::{self, OutputSchemas};
use crate::policy::Caller;
use crate::upstream::CallError;

/// The per-call timeout when neither the contract nor the upstream sets one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl Gateway {
    /// Handles `tools/call` for an authenticated `caller`. Protocol errors are `Err`; everything a
    /// model should read (including rejections) is a tool error in `Ok`.
    pub async fn call_tool(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
        protocol: Option<&ProtocolVersion>,
    ) -> Result<CallToolResult, ErrorData> {
        // 1. Authorise: a tool that is not the caller's gets the same answer as one that does
        //    not exist, so callers cannot probe for tools.
        let catalog = self.catalog();
        let tool = catalog
            .exposed(&request.name)
            .filter(|_| caller.may_use(&request.name))
            .ok_or_else(|| unknown_tool(&request.name))?;
        let contract = &tool.contract;
        let upstream_schemas = tool.upstream_schemas.as_ref();

        // 2. Validate the arguments against the contract and the upstream's own schema.
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        if let Err(rejection) = enforce::check_arguments(
            &contract.input_validator,
            upstream_schemas.map(|s| s.input.as_ref()),
            &arguments,
        ) {
            return rejected_input(rejection.to_string(), protocol);
        }

        // 3. Call the upstream under the contract's timeout, never with the caller's credentials.
        let upstream = self
            .upstreams
            .get(&contract.upstream)
            .ok_or_else(|| ErrorData::internal_error("upstream vanished from the gateway", None))?;
        if upstream_schemas.is_none() {
            return Ok(tool_error(
                CallError::Unavailable(upstream.name.clone()).to_string(),
            ));
        }
        let timeout = contract
            .timeout
            .or(upstream.default_timeout)
            .unwrap_or(DEFAULT_TIMEOUT);
        let mut forwarded = CallToolRequestParams::new(contract.upstream_tool.clone());
        forwarded.arguments = request.arguments;
        let result = match upstream.call(forwarded, timeout).await {
            Ok(result) => result,
            Err(e) => return Ok(tool_error(e.to_string())),
        };

        // 4. Validate the result before the client sees any of it.
        let schemas = OutputSchemas {
            contract: contract.output_validator.as_deref(),
            upstream: upstream_schemas.and_then(|s| s.output.as_deref()),
            max_bytes: usize::try_from(self.config.max_result_bytes.0).unwrap_or(usize::MAX),
        };
        match enforce::check_result(result, &schemas) {
            Ok(result) => Ok(result),
            Err(rejection) => Ok(tool_error(rejection.to_string())),
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
fn rejected_input(
    message: String,
    protocol: Option<&ProtocolVersion>,
) -> Result<CallToolResult, ErrorData> {
    match protocol {
        Some(v) if *v >= ProtocolVersion::V_2025_11_25 => Ok(tool_error(message)),
        _ => Err(ErrorData::invalid_params(message, None)),
    }
}
