//! Tools that show what reaches an upstream through a gateway, beyond what the conformance suite
//! calls: `list_roots` asks the caller for its roots (`roots/list`, a request from the server to
//! the client during the call), and `echo_meta` returns the request's `_meta` as the upstream
//! received it (which keys a gateway passes on, which it sets itself).

// `roots/list` is deprecated by SEP-2577 (2026-07-28) in rmcp; 2025-11-25 clients still answer it.
#![allow(deprecated)]

use rmcp::model::{CallToolResult, ClientResult, ContentBlock, ListRootsRequest, ServerRequest};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

/// `roots/list` to the caller; its roots as `{"roots": [...]}`, or a tool error saying why not.
pub async fn list_roots(context: &RequestContext<RoleServer>) -> CallToolResult {
    let declared = context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.roots.is_some());
    if !declared {
        return CallToolResult::error(vec![ContentBlock::text(
            "the client did not declare the roots capability",
        )]);
    }
    let request = ServerRequest::ListRootsRequest(ListRootsRequest {
        method: Default::default(),
        extensions: Default::default(),
    });
    match context.peer.send_request(request).await {
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
    }
}

/// The request's `_meta`, as `{"meta": {...}}` (`{}` when it had none).
pub fn echo_meta(context: &RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
    let meta = serde_json::to_value(&context.meta).map_err(|error| {
        ErrorData::internal_error(format!("cannot serialise _meta: {error}"), None)
    })?;
    Ok(CallToolResult::structured(json!({"meta": meta})))
}
