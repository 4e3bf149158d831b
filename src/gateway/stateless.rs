//! The gateway's own path for the commonest request of all: a well-formed, self-contained
//! 2026-07-28 `tools/call`.
//!
//! rmcp serves a stateless request by building a one-shot transport, spawning a service for it,
//! which spawns the handler, whose answer comes back through two channels: most of what the
//! gateway spent per call beyond the pipeline itself (BENCHMARKS.md). Here the request is parsed
//! once and answered from the same [`answer_tools_call`] rmcp's handler uses, in one task.
//!
//! Only requests rmcp would accept as they are take this path: no session, exactly one
//! `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method: tools/call` and a plain `Mcp-Name` equal to
//! the tool's name, no `Mcp-Param-*` headers (nor a tool that maps arguments to them), `Accept`
//! naming both JSON and SSE without parameters, a JSON body that is one request whose `_meta`
//! carries the protocol version and client capabilities, for a tool the catalog publishes.
//! Everything else, errors included, goes to rmcp unchanged, so its answers stay the reference.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, ErrorData, ProtocolVersion, RequestId,
};
use serde::{Deserialize, Serialize};

use super::Gateway;
use super::live::Live;
use super::server::answer_tools_call;
use crate::telemetry::Inbound;

/// The middleware: answers qualifying requests itself and passes the rest on.
pub async fn answer_tools_calls(
    State(live): State<Arc<Live>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || !headers_qualify(request.headers()) {
        return next.run(request).await;
    }
    let gateway = live.current();
    // `check_body` has buffered the body already: reading it again is a copy-free move.
    let limit = usize::try_from(gateway.config.max_request_bytes.0).unwrap_or(usize::MAX);
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let Some(call) = StatelessCall::take(&parts.headers, &bytes, &gateway) else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    // A task of its own, as under rmcp: a client that goes away does not stop the call halfway
    // (its upstream call completes and its receipt is written).
    let answer = tokio::spawn(async move { call.answer(&gateway, &parts).await });
    answer
        .await
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The headers of a request this path may answer (the body is checked by [`StatelessCall::take`]).
fn headers_qualify(headers: &HeaderMap) -> bool {
    let only = |name: &str, expected: &str| {
        let mut values = headers.get_all(name).iter();
        values.next().is_some_and(|v| v == expected) && values.next().is_none()
    };
    let accepts = |wanted: &str| {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|entry| entry.trim().eq_ignore_ascii_case(wanted))
    };
    let content_type_is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or("");
            essence.trim().eq_ignore_ascii_case("application/json")
        });
    !headers.contains_key("mcp-session-id")
        && only(
            "mcp-protocol-version",
            ProtocolVersion::V_2026_07_28.as_str(),
        )
        && only("mcp-method", "tools/call")
        && headers.get_all("mcp-name").iter().count() == 1
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
        && content_type_is_json
        && accepts("application/json")
        && accepts("text/event-stream")
}

/// One JSON-RPC request, as far as this path reads it.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: CallToolRequestParams,
}

/// A `tools/call` this path answers.
pub struct StatelessCall {
    id: RequestId,
    params: CallToolRequestParams,
}

impl StatelessCall {
    /// The call in `body`, if this path may answer it (see the module's documentation).
    fn take(headers: &HeaderMap, body: &[u8], gateway: &Gateway) -> Option<StatelessCall> {
        let message: Message<'_> = serde_json::from_slice(body).ok()?;
        let params = message.params;
        let meta = params.meta.as_ref()?;
        let name_header = headers.get("mcp-name")?;
        let qualifies = message.jsonrpc == "2.0"
            && message.method == "tools/call"
            && name_header.as_bytes() == params.name.as_bytes()
            && meta.protocol_version() == Some(ProtocolVersion::V_2026_07_28)
            && meta
                .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
            && params.input_responses.is_none()
            && params.request_state.is_none()
            && gateway
                .catalog()
                .exposed(&params.name)
                .is_some_and(|tool| !tool.param_headers);
        qualifies.then_some(StatelessCall {
            id: message.id,
            params,
        })
    }

    /// Runs the call and writes its JSON-RPC answer (as rmcp's `json_response` mode would).
    async fn answer(self, gateway: &Gateway, parts: &http::request::Parts) -> Response {
        let StatelessCall { id, mut params } = self;
        tracing::debug!(tool = %params.name, "tools/call answered without rmcp (stateless path)");
        // rmcp hands the handler the request's `_meta` apart from its parameters; so does this.
        let meta = params.meta.take().unwrap_or_default();
        let inbound = Inbound {
            id: &id,
            meta: &meta,
            parts: Some(parts),
            protocol: Some(ProtocolVersion::V_2026_07_28),
        };
        let answer = answer_tools_call(gateway, params, inbound).await;
        let status = match &answer {
            Ok(_) => StatusCode::OK,
            Err(error) => status_of(error),
        };
        let reply = match &answer {
            Ok(result) => Reply {
                jsonrpc: "2.0",
                id: &id,
                result: Some(result),
                error: None,
            },
            Err(error) => Reply {
                jsonrpc: "2.0",
                id: &id,
                result: None,
                error: Some(error),
            },
        };
        match serde_json::to_vec(&reply) {
            Ok(body) => {
                let mut response = (status, body).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
}

#[derive(Serialize)]
struct Reply<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a CallToolResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorData>,
}

/// The HTTP status rmcp gives a JSON-RPC error on the 2026-07-28 path (its `_meta` being
/// well-formed here).
fn status_of(error: &ErrorData) -> StatusCode {
    match error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qualifying() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        headers
    }

    /// Proves: the plain headers of a 2026-07-28 `tools/call` qualify, and every deviation that
    /// rmcp answers in its own way (a session, another version, duplicated or parameterised
    /// headers, `Mcp-Param-*`, a narrower `Accept`, another content type) sends the request to
    /// rmcp instead.
    #[test]
    fn only_plain_stateless_calls_qualify() {
        assert!(headers_qualify(&qualifying()));
        let mut charset = qualifying();
        charset.insert(
            "content-type",
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(headers_qualify(&charset));

        let deviations: [(&str, &str, bool); 9] = [
            ("mcp-session-id", "abc", false),
            ("mcp-protocol-version", "2025-11-25", false),
            ("mcp-method", "tools/call", true),
            ("mcp-name", "echo", true),
            ("mcp-param-region", "eu", false),
            ("accept", "application/json", false),
            ("accept", "application/json, text/event-stream;q=0.5", false),
            ("accept", "*/*", false),
            ("content-type", "text/plain", false),
        ];
        for (name, value, append) in deviations {
            let mut headers = qualifying();
            if append {
                headers.append(name, HeaderValue::from_static(value));
            } else {
                headers.insert(name, HeaderValue::from_static(value));
            }
            assert!(
                !headers_qualify(&headers),
                "{name}: {value} (appended: {append})"
            );
        }
        let mut without_name = qualifying();
        without_name.remove("mcp-name");
        assert!(!headers_qualify(&without_name));
    }

    /// Proves: JSON-RPC errors get the HTTP statuses rmcp gives them on the 2026-07-28 path.
    #[test]
    fn error_statuses_follow_rmcp() {
        let status = |code| status_of(&ErrorData::new(code, "x", None));
        assert_eq!(status(ErrorCode::INVALID_PARAMS), StatusCode::OK);
        assert_eq!(status(ErrorCode::INTERNAL_ERROR), StatusCode::OK);
        assert_eq!(status(ErrorCode::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status(ErrorCode::HEADER_MISMATCH), StatusCode::BAD_REQUEST);
    }
}
