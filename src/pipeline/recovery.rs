//! Step 5 of a `tools/call`: recovering from a failure the tool's `on_error` covers
//! (docs/semantics.md, "Fallbacks"), the seeds' "one retry, then degrade": the fallback tool
//! answers instead, through the whole pipeline under its own contract and the caller's
//! allowlist, or the tool's degraded text does.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, JsonObject,
    ProtocolVersion, RequestMetaObject,
};
use serde_json::Value;

use crate::approvals::step::Reach;
use crate::contract::errors::{OnError, Recovery};
use crate::policy::Caller;
use crate::runtime::Version;

/// The `_meta` key of an answer given by a fallback: the tool that gave it.
pub const FALLBACK_META: &str = "narrowgate/fallback";
/// The `_meta` key of an answer that is a tool's degraded text.
pub const DEGRADED_META: &str = "narrowgate/degraded";
/// What a receipt's `fallback` says of a degraded answer.
pub const DEGRADE: &str = "degrade";

impl Version {
    /// The recovery of a call that failed with a type `on_error` covers: what the receipt's
    /// `fallback` records, and the answer instead of `failed`. `None`: no recovery is possible
    /// (the fallback is not there now, or not the caller's), and the failure stands.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn recover(
        &self,
        caller: &Caller,
        on_error: &OnError,
        failed: &Result<CallToolResponse, ErrorData>,
        arguments: Option<JsonObject>,
        meta: Option<RequestMetaObject>,
        protocol: Option<&ProtocolVersion>,
        reach: &Reach,
    ) -> Option<(String, Result<CallToolResponse, ErrorData>)> {
        match &on_error.recovery {
            Recovery::Degrade(text) => Some((DEGRADE.to_string(), Ok(degraded(text, failed)))),
            Recovery::Fallback(other) => {
                // Checked at load; a reload or an allowlist may still have taken it away.
                if self.catalog().exposed(other).is_none() || !caller.may_use(other) {
                    tracing::warn!(caller = %caller.name, fallback = %other,
                        "on_error: the fallback tool is not available to this caller; the failure is answered");
                    return None;
                }
                let mut request = CallToolRequestParams::new(other.clone());
                request.arguments = arguments;
                request.meta = meta;
                let mut answer = self
                    .call_tool_recovering(caller, request, protocol, Ok(None), reach, false)
                    .await;
                if let Ok(CallToolResponse::Complete(result)) = &mut answer {
                    result
                        .meta
                        .get_or_insert_default()
                        .0
                        .insert(FALLBACK_META.into(), Value::String(other.clone()));
                }
                Some((other.clone(), answer))
            }
        }
    }
}

/// A degraded answer: not an error (the tool's documented substitute), its text the operator's,
/// its structured content the failure's error object marked `degraded`, so a program still
/// knows what failed.
fn degraded(text: &str, failed: &Result<CallToolResponse, ErrorData>) -> CallToolResponse {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    let error = match failed {
        Ok(CallToolResponse::Complete(r)) => r.structured_content.clone(),
        Err(e) => e.data.clone(),
        Ok(_) => None,
    };
    if let Some(mut error) = error {
        if let Some(object) = error.get_mut("error").and_then(Value::as_object_mut) {
            object.insert("degraded".into(), Value::Bool(true));
        }
        result.structured_content = Some(error);
    }
    result
        .meta
        .get_or_insert_default()
        .0
        .insert(DEGRADED_META.into(), Value::Bool(true));
    CallToolResponse::Complete(result)
}
