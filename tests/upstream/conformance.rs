//! The tools that the official MCP conformance suite's server scenarios call, under the names it
//! expects (`test_simple_text`, `test_sampling`, ...). They make the demo upstream a complete
//! conformance fixture, so `tests/conformance/run.sh` can run every scenario straight against it
//! and then through the gateway: whatever fails only through the gateway is the gateway's.
//!
//! Written from the scenario descriptions of `@modelcontextprotocol/conformance` 0.1.16; each
//! result carries what the scenario checks (content types, mimeTypes, at least three log or
//! progress notifications, a `sampling/createMessage` or `elicitation/create` request sent back to
//! the caller during the call).

// Sampling and logging are deprecated by SEP-2577 (2026-07-28) in rmcp, and are still what
// 2025-11-25 clients, and the conformance suite, use.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
    JsonObject, LoggingLevel, ProgressNotificationParam, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::ask;
use crate::handler::DemoUpstream;

/// A 1x1 red pixel, PNG, base64: the smallest image the image scenarios accept.
pub const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file holding one 8-bit mono sample at 8 kHz, base64 (RIFF header + one data byte).
pub const ONE_SAMPLE_WAV: &str = "UklGRiUAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQEAAACA";
/// The pause between the notifications of the logging and progress tools: long enough that
/// they travel as separate events while the call is still open, as the scenarios intend.
const STEP: Duration = Duration::from_millis(50);

/// Builds an rmcp model value from its MCP wire form. The inputs are this file's constants, so
/// a failure is a bug in the fixture, reported to the caller as an internal error.
pub fn wire<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|error| {
        ErrorData::internal_error(format!("demo-upstream fixture bug: {error}"), None)
    })
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

fn no_params() -> Arc<JsonObject> {
    object(json!({"type": "object", "properties": {}}))
}

fn one_string(name: &str, description: &str) -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name]
    }))
}

/// The conformance tools, in list order (after the demo's own tools).
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new("test_simple_text", "Returns one text block.", no_params()),
        Tool::new(
            "test_image_content",
            "Returns a 1x1 PNG image.",
            no_params(),
        ),
        Tool::new(
            "test_audio_content",
            "Returns a one-sample WAV clip.",
            no_params(),
        ),
        Tool::new(
            "test_embedded_resource",
            "Returns an embedded text resource.",
            no_params(),
        ),
        Tool::new(
            "test_multiple_content_types",
            "Returns text, an image and an embedded resource.",
            no_params(),
        ),
        Tool::new(
            "test_tool_with_logging",
            "Sends three info log messages while it runs.",
            no_params(),
        ),
        Tool::new(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100 when the call has a progressToken.",
            no_params(),
        ),
        Tool::new(
            "test_error_handling",
            "Always returns a tool error.",
            no_params(),
        ),
        Tool::new(
            "test_sampling",
            "Asks the caller's model (sampling/createMessage) and returns its answer.",
            one_string("prompt", "The prompt to send to the model"),
        ),
        Tool::new(
            "test_elicitation",
            "Asks the caller's user (elicitation/create) for a username and an email.",
            one_string("message", "The message to show the user"),
        ),
        Tool::new(
            "test_elicitation_sep1034_defaults",
            "Elicits five fields that each carry a default value (SEP-1034).",
            no_params(),
        ),
        Tool::new(
            "test_elicitation_sep1330_enums",
            "Elicits the five enum shapes of SEP-1330.",
            no_params(),
        ),
        Tool::new(
            "test_reconnection",
            "Over Streamable HTTP with a session, closes the call's SSE stream, then answers: the client gets the answer by reconnecting with Last-Event-ID (SEP-1699).",
            no_params(),
        ),
        Tool::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            object(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"}
                },
                "additionalProperties": false
            })),
        ),
    ]
}

/// Runs a conformance tool; `None` when `name` is not one of them.
pub async fn call(
    server: &DemoUpstream,
    request: &CallToolRequestParams,
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    let name = request.name.as_ref();
    // The reference server's 2026-07-28 path runs its tools on a client of its own that answers
    // every request to the client with -32601: they can ask nobody anything.
    if server.modern_declares_less_now(context) && name.starts_with("test_elicitation") {
        return Some(Ok(text(
            "Elicitation not supported or error: MCP error -32601: Method not found",
        )
        .into()));
    }
    if server.modern_declares_less_now(context) && name == "test_sampling" {
        return Some(Ok(text(
            "Sampling not supported or error: MCP error -32601: Method not found",
        )
        .into()));
    }
    let result = match name {
        "test_simple_text" => Ok(text("This is a simple text response for testing.")),
        "test_image_content" => Ok(CallToolResult::success(vec![ContentBlock::image(
            RED_PIXEL_PNG,
            "image/png",
        )])),
        "test_audio_content" => Ok(CallToolResult::success(vec![ContentBlock::audio(
            ONE_SAMPLE_WAV,
            "audio/wav",
        )])),
        "test_embedded_resource" => wire(json!({"content": [{
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }
        }]})),
        "test_multiple_content_types" => wire(json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": r#"{"test":"data","value":123}"#
            }}
        ]})),
        "test_tool_with_logging" => Ok(with_logging(server, context).await),
        "test_tool_with_progress" => with_progress(context).await,
        "test_error_handling" => Ok(CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )])),
        "test_sampling" => return Some(sampling(request, args, context).await),
        "test_elicitation" => match string_arg(args, "message") {
            Ok(message) => {
                let form = elicitation_form(message);
                return Some(elicit(request, context, "User response", form).await);
            }
            Err(error) => Ok(error),
        },
        "test_elicitation_sep1034_defaults" => {
            let form = defaults_form();
            return Some(elicit(request, context, "Elicitation completed", form).await);
        }
        "test_elicitation_sep1330_enums" => {
            let form = enums_form();
            return Some(elicit(request, context, "Elicitation completed", form).await);
        }
        "test_reconnection" => Ok(reconnection(server, context).await),
        "json_schema_2020_12_tool" => {
            Ok(text(format!("Received: {}", Value::Object(args.clone()))))
        }
        _ => return None,
    };
    Some(result.map(Into::into))
}

/// Closes this call's SSE stream (when served over HTTP with sessions), then answers once the
/// client has had time to reconnect; the answer waits in rmcp's cache for the resume either way.
async fn reconnection(
    server: &DemoUpstream,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let session = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|value| value.to_str().ok());
    let closed = match (server.sessions(), session) {
        (Some(sessions), Some(session)) => {
            match sessions
                .close_request_stream(session, &context.id.to_string())
                .await
            {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, "test_reconnection could not close its SSE stream");
                    false
                }
            }
        }
        _ => false,
    };
    tokio::time::sleep(STEP * 4).await;
    text(if closed {
        "Reconnection test completed: this answer arrived after the SSE stream was closed."
    } else {
        "Reconnection test completed (no SSE session here, so the stream stayed open)."
    })
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// A required string argument, or the tool error to answer with.
fn string_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, CallToolResult> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| {
        CallToolResult::error(vec![ContentBlock::text(format!(
            "missing required string argument '{key}'"
        ))])
    })
}

/// Three info messages, 50 ms apart, each sent only if the session's level lets info through.
async fn with_logging(
    server: &DemoUpstream,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let steps = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (index, step) in steps.into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        server.log(context, LoggingLevel::Info, step).await;
    }
    text("Tool with logging executed successfully")
}

async fn with_progress(context: &RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
    let token = context.meta.get_progress_token();
    for (index, progress) in [0, 50, 100].into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        if let Some(token) = &token {
            let param: ProgressNotificationParam = wire(json!({
                "progressToken": token,
                "progress": progress,
                "total": 100,
                "message": format!("step {} of 3", index + 1)
            }))?;
            if let Err(error) = context.peer.notify_progress(param).await {
                tracing::warn!(%error, "could not send notifications/progress");
            }
        }
    }
    Ok(text(match token {
        Some(_) => "Progress test completed: reported 0, 50 and 100 of 100",
        None => "Progress test completed without a progressToken: nothing reported",
    }))
}

/// Whether the client declared a capability (at `initialize`, or in the request's `_meta` on
/// 2026-07-28; unknown clients: no).
fn client_declared(context: &RequestContext<RoleServer>, sampling: bool) -> bool {
    context.client_capabilities().is_some_and(|capabilities| {
        if sampling {
            capabilities.sampling.is_some()
        } else {
            capabilities.elicitation.is_some()
        }
    })
}

async fn sampling(
    request: &CallToolRequestParams,
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let prompt = match string_arg(args, "prompt") {
        Ok(prompt) => prompt,
        Err(error) => return Ok(error.into()),
    };
    if !client_declared(context, true) {
        return Ok(CallToolResult::error(vec![ContentBlock::text(
            "the client did not declare the sampling capability",
        )])
        .into());
    }
    let asked = ask::sampling_request(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }))?;
    let answer = match ask::ask("test_sampling", request, context, asked).await {
        ask::Asked::InputRequired(required) => return Ok(required.into()),
        ask::Asked::Answer(answer) => answer,
    };
    Ok(match answer {
        Ok(ClientResult::CreateMessageResult(result)) => {
            let answer = serde_json::to_value(&result.message.content)
                .ok()
                .and_then(|content| {
                    content
                        .get("text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| "(no text)".to_owned());
            text(format!("LLM response: {answer}"))
        }
        Ok(other) => CallToolResult::error(vec![ContentBlock::text(format!(
            "sampling/createMessage got an unexpected answer: {}",
            json!(other)
        ))]),
        Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
            "sampling/createMessage failed: {error}"
        ))]),
    }
    .into())
}

/// Sends `elicitation/create` with `params` and reports the user's answer as
/// `"{label}: action=..., content={...}"`.
async fn elicit(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    label: &str,
    params: Value,
) -> Result<CallToolResponse, ErrorData> {
    if !client_declared(context, false) {
        return Ok(CallToolResult::error(vec![ContentBlock::text(
            "the client did not declare the elicitation capability",
        )])
        .into());
    }
    let asked = ask::elicitation_request(params)?;
    let answer = match ask::ask(&request.name, request, context, asked).await {
        ask::Asked::InputRequired(required) => return Ok(required.into()),
        ask::Asked::Answer(answer) => answer,
    };
    Ok(match answer {
        Ok(ClientResult::ElicitResult(result)) => {
            let answer = json!(result);
            let action = answer.get("action").cloned().unwrap_or(Value::Null);
            let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
            let action = action
                .as_str()
                .map_or_else(|| action.to_string(), str::to_owned);
            text(format!("{label}: action={action}, content={content}"))
        }
        Ok(other) => CallToolResult::error(vec![ContentBlock::text(format!(
            "elicitation/create got an unexpected answer: {}",
            json!(other)
        ))]),
        Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
            "elicitation/create failed: {error}"
        ))]),
    }
    .into())
}

pub fn elicitation_form(message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }
    })
}

/// SEP-1034: a default for each primitive type.
pub fn defaults_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active"
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            }
        }
    })
}

/// SEP-1330: untitled and titled single-select, the legacy `enumNames` form, and untitled and
/// titled multi-select.
pub fn enums_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please pick from each kind of list",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Untitled single-select",
                    "enum": ["option1", "option2", "option3"]
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Titled single-select",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}
                    ]
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Legacy titled enum",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Untitled multi-select",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Titled multi-select",
                    "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}
                    ]}
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ElicitRequestParams;

    /// Proves the elicitation forms survive rmcp's typed schema (no keyword of SEP-1034 or
    /// SEP-1330 is dropped on the way out), which a plain `wire` call could not show.
    #[test]
    fn elicitation_forms_round_trip_unchanged() {
        for form in [elicitation_form("hi"), defaults_form(), enums_form()] {
            let params: ElicitRequestParams = wire(form.clone()).expect("valid form");
            let back = serde_json::to_value(&params).expect("serialises");
            assert_eq!(back["requestedSchema"], form["requestedSchema"]);
        }
    }

    /// Proves the tool list carries the suite's names (14: its 13 server-scenario tools and the
    /// pending suite's `json_schema_2020_12_tool`).
    #[test]
    fn tool_names_are_the_suites() {
        let names: Vec<_> = tools().iter().map(|t| t.name.to_string()).collect();
        assert!(names.contains(&"test_elicitation_sep1330_enums".to_owned()));
        assert_eq!(names.len(), 14);
    }
}
