//! Tools that show what reaches an upstream through a gateway, beyond what the conformance suite
//! calls: `list_roots` asks the caller for its roots (`roots/list`, a request from the server to
//! the client during the call), and `echo_meta` returns the request's `_meta` as the upstream
//! received it (which keys a gateway passes on, which it sets itself).

// `roots/list` is deprecated by SEP-2577 (2026-07-28) in rmcp; 2025-11-25 clients still answer it.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use crate::ask;

/// `roots/list` to the caller (`ask`: a request, or an `InputRequiredResult` on 2026-07-28);
/// its roots as `{"roots": [...]}`, or a tool error saying why not.
pub async fn list_roots(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.roots.is_some());
    if !declared {
        return CallToolResult::error(vec![ContentBlock::text(
            "the client did not declare the roots capability",
        )])
        .into();
    }
    let answer = match ask::ask("list_roots", request, context, ask::roots_request()).await {
        ask::Asked::InputRequired(required) => return required.into(),
        ask::Asked::Answer(answer) => answer,
    };
    let result = match answer {
        Ok(ClientResult::ListRootsResult(result)) => {
            CallToolResult::structured(json!({"roots": result.roots}))
        }
        Ok(other) => CallToolResult::error(vec![ContentBlock::text(format!(
            "roots/list got an unexpected answer: {}",
            json!(other)
        ))]),
        Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
            "roots/list failed: {error}"
        ))]),
    };
    result.into()
}

/// The request's `_meta`, as `{"meta": {...}}` (`{}` when it had none).
pub fn echo_meta(context: &RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
    let meta = serde_json::to_value(&context.meta).map_err(|error| {
        ErrorData::internal_error(format!("cannot serialise _meta: {error}"), None)
    })?;
    Ok(CallToolResult::structured(json!({"meta": meta})))
}
