//! The gateway's own path for the commonest request of all: a plain `tools/call`, stateless
//! (2026-07-28) or in a session (2025-06-18, 2025-11-25).
//!
//! rmcp serves a request by handing it to a service task (a one-shot one per stateless request,
//! the session's worker otherwise), which spawns the handler, whose answer comes back through
//! channels: most of what the gateway spent per call beyond the pipeline itself (BENCHMARKS.md).
//! Here the request, parsed once by the HTTP layer, is answered in one task by the same
//! [`answer_tools_call`] rmcp's handler uses, with the JSON body rmcp's `json_response` mode
//! writes (in a session the answer is JSON rather than a one-event SSE stream: clients must
//! accept both). It runs only on the MCP `path` (the layers wrap that route alone), and not at
//! all with `direct_calls: false`.
//!
//! Only requests rmcp would accept as they are take this path. Common to both: `Content-Type`
//! JSON, an `Accept` naming JSON and SSE without parameters, a body that is one `tools/call`
//! request (no `inputResponses`/`requestState`), whatever its tool (a tool that does not exist or
//! is not the caller's gets the same answer on the same path, so the content type tells nothing);
//! stateless, a tool that maps no argument to a header. Stateless: no session, exactly one `MCP-Protocol-Version: 2026-07-28`,
//! `Mcp-Method: tools/call` and a plain `Mcp-Name` equal to the tool's name, no `Mcp-Param-*`,
//! `_meta` with the protocol version and client capabilities. In a session: one session id
//! that rmcp still holds and that the HTTP layer knows (its owner checked) and has seen rmcp
//! handle within [`SESSION_TOUCH`], and one `MCP-Protocol-Version` equal to the version the
//! session's `initialize` asked for, with no per-request version in `_meta`. Never a call that
//! needs a stream or a round trip to its client: progress, a session logging level, a tool with
//! `approval: user`, or a stateless call whose client declared `sampling`, `elicitation` or
//! `roots` for a tool that relays them (its upstream may ask, and then the call is parked:
//! `relay::parked`). Everything else,
//! errors included, goes to rmcp unchanged, so its answers stay the reference.

use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, ErrorData, ProtocolVersion, RequestId,
    ServerResult,
};
use serde::Serialize;

use crate::mcp::tools_call::answer_tools_call;
use crate::request::Admitted;
use crate::request::message::{self, Message, Method, ToolsCall};
use crate::runtime::Version;
use crate::runtime::catalog::Catalog;
use crate::telemetry::Inbound;

/// rmcp closes a session after 5 minutes without activity it sees. Requests answered here are
/// not seen by it, so a session's request goes through rmcp when rmcp has not handled one of
/// its requests for this long: an active session never expires under its client.
pub const SESSION_TOUCH: Duration = Duration::from_secs(60);

/// The session versions answered here: those whose clients send `MCP-Protocol-Version`.
static SESSION_VERSIONS: [ProtocolVersion; 2] =
    [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25];

/// Which kind of request a qualifying one is, and so its protocol version.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Lifecycle {
    Stateless,
    Session(&'static ProtocolVersion),
}

impl Lifecycle {
    fn version(self) -> ProtocolVersion {
        match self {
            Lifecycle::Stateless => ProtocolVersion::V_2026_07_28,
            Lifecycle::Session(version) => version.clone(),
        }
    }
}

/// Answers `request` if it qualifies; hands it back otherwise. `session_version` is the
/// version the request's session was opened with, if the session may be answered here (see the
/// module's documentation). The request's version, caller and parsed body come from its
/// [`Admitted`], filled by the layers before this one.
pub async fn answer(
    session_version: impl std::future::Future<Output = Option<String>>,
    request: Request,
) -> Result<Response, Request> {
    let Some(lifecycle) = lifecycle_of(request.method(), request.headers()) else {
        return Err(request);
    };
    // rmcp's handler sees a session's version as its `initialize` asked for it; a request
    // naming another (rmcp only checks that the header names a known one) is left to rmcp.
    if lifecycle != Lifecycle::Stateless
        && session_version.await.as_deref() != Some(lifecycle.version().as_str())
    {
        return Err(request);
    }
    let (mut parts, body) = request.into_parts();
    let Some(admitted) = parts.extensions.get_mut::<Admitted>() else {
        return Err(Request::from_parts(parts, body));
    };
    let Some(call) = DirectCall::take(lifecycle, &parts.headers, admitted) else {
        return Err(Request::from_parts(parts, body));
    };
    let gateway = admitted.gateway.clone();
    // Already in a task of its own (`http::admit`): a client that goes away does not stop the
    // call halfway (its upstream call completes and its receipt is written).
    Ok(call.answer(&gateway, &parts).await)
}

/// The kind of request the headers describe, if they qualify (the body is checked by
/// [`DirectCall::take`]).
pub(crate) fn lifecycle_of(method: &http::Method, headers: &HeaderMap) -> Option<Lifecycle> {
    let only = |name: &str| {
        let mut values = headers.get_all(name).iter();
        let first = values.next()?;
        values.next().is_none().then_some(first)
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
    if method != http::Method::POST
        || !content_type_is_json
        || !accepts("application/json")
        || !accepts("text/event-stream")
    {
        return None;
    }
    let version = only("mcp-protocol-version")?;
    if headers.contains_key("mcp-session-id") {
        only("mcp-session-id")?;
        let known = SESSION_VERSIONS.iter().find(|v| version == v.as_str())?;
        return Some(Lifecycle::Session(known));
    }
    let stateless = version == ProtocolVersion::V_2026_07_28.as_str()
        && only("mcp-method").is_some_and(|m| m == "tools/call")
        && only("mcp-name").is_some()
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"));
    stateless.then_some(Lifecycle::Stateless)
}

/// Entry point for fuzz/: whether this path would answer a request with these `method`,
/// `headers` and `body` against `catalog` (a session's request taken to be at the version its
/// session was opened with), parsed and decided as `check_body` and [`answer`] do.
#[doc(hidden)]
pub fn qualifies(
    catalog: &Catalog,
    method: &http::Method,
    headers: &HeaderMap,
    body: &[u8],
) -> bool {
    let Some(lifecycle) = lifecycle_of(method, headers) else {
        return false;
    };
    message::Body::parse(body, message::CallParams::Whole)
        .is_ok_and(|parsed| DirectCall::qualifies(lifecycle, headers, &parsed, || catalog))
}

/// A `tools/call` this path answers.
struct DirectCall {
    lifecycle: Lifecycle,
    id: RequestId,
    params: CallToolRequestParams,
}

impl DirectCall {
    /// The call in the request's parsed body, taken out of it, if this path may answer it (see
    /// the module's documentation); else the body is left as it is.
    fn take(
        lifecycle: Lifecycle,
        headers: &HeaderMap,
        admitted: &mut Admitted,
    ) -> Option<DirectCall> {
        let body = admitted.body.as_ref()?;
        // A call whose client wants progress or logging on its stream is left to rmcp, which
        // keeps the stream open for them.
        let wants_stream = match body {
            message::Body::One(Message {
                method: Method::ToolsCall(ToolsCall::Params(params)),
                ..
            }) => {
                crate::mcp::relay::wants_stream(
                    params.meta.as_ref(),
                    headers.get("mcp-session-id").and_then(|v| v.to_str().ok()),
                    &admitted.gateway.kept.log_levels,
                )
                // An upstream's request of a stateless client parks the call (MRTR), which
                // rmcp's path does.
                || (lifecycle == Lifecycle::Stateless
                    && crate::mcp::relay::may_ask(params.meta.as_ref())
                    && admitted.gateway.catalog().exposed(&params.name).is_some_and(|tool| {
                        tool.contract.relay != crate::contract::relay_policy::RelayPolicy::REFUSED
                    }))
                // Who may call an app-only tool (MCP Apps) depends on the client's declared
                // extensions, which rmcp's peer knows.
                || (admitted.gateway.contracts.any_app_only
                    && admitted.gateway.catalog().exposed(&params.name).is_some_and(|tool| {
                        tool.contract.ui.as_ref().is_some_and(|u| u.app_only())
                    }))
                // A user's approval is asked on the call's own stream, through rmcp's peer.
                || (admitted.gateway.any_user_approval
                    && admitted.gateway.catalog().exposed(&params.name).is_some_and(|tool| {
                        tool.contract.approval == crate::contract::Approval::User
                    }))
            }
            _ => false,
        };
        let qualifies = !wants_stream
            && Self::qualifies(lifecycle, headers, body, || admitted.gateway.catalog());
        if !qualifies {
            return None;
        }
        let Some(message::Body::One(Message {
            id: Some(id),
            method: Method::ToolsCall(ToolsCall::Params(params)),
            ..
        })) = admitted.body.take()
        else {
            return None;
        };
        Some(DirectCall {
            lifecycle,
            id,
            params,
        })
    }

    /// Whether this path may answer the one `tools/call` in `body` (see the module's
    /// documentation). `catalog` is asked for only when the answer depends on the tool.
    fn qualifies<C: std::ops::Deref<Target = Catalog>>(
        lifecycle: Lifecycle,
        headers: &HeaderMap,
        body: &message::Body,
        catalog: impl FnOnce() -> C,
    ) -> bool {
        let message::Body::One(Message {
            jsonrpc_2: true,
            id: Some(_),
            method: Method::ToolsCall(ToolsCall::Params(params)),
            ..
        }) = body
        else {
            return false;
        };
        let meta_version = params.meta.as_ref().and_then(|m| m.protocol_version());
        let lifecycle_holds = match lifecycle {
            Lifecycle::Stateless => {
                headers
                    .get("mcp-name")
                    .is_some_and(|n| n.as_bytes() == params.name.as_bytes())
                    && meta_version == Some(ProtocolVersion::V_2026_07_28)
                    && params.meta.as_ref().is_some_and(|m| {
                        m.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                            .is_empty()
                    })
            }
            // A per-request version would make rmcp serve the request statelessly.
            Lifecycle::Session(_) => meta_version.is_none(),
        };
        lifecycle_holds
            && params.input_responses.is_none()
            && params.request_state.is_none()
            // Whether the tool exists, or is the caller's, must not change the path (nor so the
            // content type of the answer): a name that is no published tool qualifies too, and is
            // answered `Unknown tool` exactly like a tool the caller may not use. Only a stateless
            // call of a tool that maps arguments to headers is left to rmcp.
            && (lifecycle != Lifecycle::Stateless
                || catalog()
                    .exposed(&params.name)
                    .is_none_or(|tool| !tool.param_headers))
    }

    /// Runs the call and writes its JSON-RPC answer as rmcp would.
    async fn answer(
        self,
        gateway: &std::sync::Arc<Version>,
        parts: &http::request::Parts,
    ) -> Response {
        let DirectCall {
            lifecycle,
            id,
            mut params,
        } = self;
        tracing::debug!(tool = %crate::policy::names::shown_tool(&params.name), ?lifecycle, "tools/call answered without rmcp");
        // rmcp hands the handler the request's `_meta` apart from its parameters; so does this.
        let meta = params.meta.take().unwrap_or_default();
        let inbound = Inbound {
            id: &id,
            meta: &meta,
            parts: Some(parts),
            protocol: Some(lifecycle.version()),
            caller: Admitted::of(Some(parts))
                .and_then(|a| a.caller.as_deref())
                .map(|c| c.name.as_str()),
        };
        // The direct path leaves tools that may ask their client (`approval: user`) to rmcp, so
        // its answers are always complete.
        let answer = answer_tools_call(gateway, params, inbound, None, None, None)
            .await
            .and_then(|answer| match answer {
                CallToolResponse::Complete(result) => Ok(result),
                _ => Err(ErrorData::internal_error(
                    "the direct path got an answer it cannot send",
                    None,
                )),
            });
        let (status, reply) = match answer {
            Ok(result) => {
                // What rmcp's handler does to a result before it answers.
                let mut result = ServerResult::CallToolResult(result);
                match lifecycle {
                    Lifecycle::Stateless => result.fill_missing_cache_hints(),
                    Lifecycle::Session(_) => {
                        result.strip_result_type_for_legacy_peer();
                        result.strip_non_object_output_for_legacy_peer();
                    }
                }
                (StatusCode::OK, Reply::result(&id, result))
            }
            Err(error) => {
                // Older revisions keep JSON-RPC errors in HTTP 200.
                let status = match lifecycle {
                    Lifecycle::Stateless => status_of(&error),
                    Lifecycle::Session(_) => StatusCode::OK,
                };
                (status, Reply::error(&id, error))
            }
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
    result: Option<ServerResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorData>,
}

impl<'a> Reply<'a> {
    fn result(id: &'a RequestId, result: ServerResult) -> Reply<'a> {
        Reply {
            jsonrpc: "2.0",
            id,
            result: Some(result),
            error: None,
        }
    }
    fn error(id: &'a RequestId, error: ErrorData) -> Reply<'a> {
        Reply {
            jsonrpc: "2.0",
            id,
            result: None,
            error: Some(error),
        }
    }
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
        let post = http::Method::POST;
        assert_eq!(
            lifecycle_of(&post, &qualifying()),
            Some(Lifecycle::Stateless)
        );
        let mut charset = qualifying();
        charset.insert(
            "content-type",
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert_eq!(lifecycle_of(&post, &charset), Some(Lifecycle::Stateless));

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
            assert_eq!(
                lifecycle_of(&post, &headers),
                None,
                "{name}: {value} (appended: {append})"
            );
        }
        let mut without_name = qualifying();
        without_name.remove("mcp-name");
        assert_eq!(lifecycle_of(&post, &without_name), None);
        assert_eq!(lifecycle_of(&http::Method::GET, &qualifying()), None);
    }

    /// Proves: a session's request qualifies at the versions whose clients send the header
    /// (not 2025-03-26, nor without it), with one session id.
    #[test]
    fn session_calls_qualify_at_the_versions_that_send_the_header() {
        let post = http::Method::POST;
        let session = |version: Option<&'static str>| {
            let mut headers = qualifying();
            headers.remove("mcp-method");
            headers.remove("mcp-name");
            headers.remove("mcp-protocol-version");
            headers.insert("mcp-session-id", HeaderValue::from_static("s-1"));
            if let Some(v) = version {
                headers.insert("mcp-protocol-version", HeaderValue::from_static(v));
            }
            headers
        };
        assert_eq!(
            lifecycle_of(&post, &session(Some("2025-11-25"))),
            Some(Lifecycle::Session(&SESSION_VERSIONS[1]))
        );
        assert_eq!(
            lifecycle_of(&post, &session(Some("2025-06-18"))),
            Some(Lifecycle::Session(&SESSION_VERSIONS[0]))
        );
        assert_eq!(lifecycle_of(&post, &session(Some("2025-03-26"))), None);
        assert_eq!(lifecycle_of(&post, &session(Some("2026-07-28"))), None);
        assert_eq!(lifecycle_of(&post, &session(None)), None);
        let mut twice = session(Some("2025-11-25"));
        twice.append("mcp-session-id", HeaderValue::from_static("s-2"));
        assert_eq!(lifecycle_of(&post, &twice), None);
    }

    /// Proves: a body with invalid UTF-8, even inside a field the path ignores, is left to rmcp
    /// (which refuses it as not JSON), while the same body in valid UTF-8 is taken. Found by
    /// fuzz/ (`jsonrpc_direct`): serde_json skips ignored fields without checking their text.
    #[test]
    fn a_body_with_invalid_utf8_is_left_to_rmcp() {
        let mut contracts = crate::contract::ContractSet::default();
        let text =
            "upstream: demo\ntools:\n  echo:\n    privilege: read\n    input: {type: object}\n";
        contracts
            .add_yaml(std::path::Path::new("demo.yaml"), text)
            .expect("a valid contract");
        let snapshot = crate::upstream::Snapshot {
            status: crate::upstream::Status::Starting,
            tools: Default::default(),
            protocol: None,
        };
        let upstreams = std::collections::BTreeMap::from([("demo".to_string(), snapshot)]);
        let catalog = Catalog::build(&contracts, &upstreams);
        let body = |key: &[u8]| {
            let mut body = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},"extra":{""#.to_vec();
            body.extend_from_slice(key);
            body.extend_from_slice(br#"":1}}}"#);
            body
        };
        let mut session = qualifying();
        session.remove("mcp-method");
        session.remove("mcp-name");
        session.insert("mcp-session-id", HeaderValue::from_static("s-1"));
        session.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        let post = http::Method::POST;
        assert!(qualifies(&catalog, &post, &session, &body(b"key")));
        assert!(!qualifies(&catalog, &post, &session, &body(b"k\xe5y")));
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

    /// Proves: the future of one `tools/call` stays small. Every layer above it (axum's
    /// middleware, the request's task) moves it whole, so its size is copied several times per
    /// call. In a release build it was 48 KB before telemetry's `serve` took a closure and the
    /// rare paths (dedupe, Redis limits, rmcp's client) were boxed, 6.5 KB after; in this test's
    /// debug build 24 KB without either, 12 KB with only the boxing, 6.5 KB with both. 8.5 KB
    /// since the upstream call gained 2026-07-28 forwarding and MRTR rounds (`call_tool`'s own
    /// future 5.6 KB, the upstream call's 3.8 KB; the rare paths, parking and MRTR rounds
    /// included, are boxed), which the benchmark showed cost no CPU per call.
    #[tokio::test]
    async fn a_tools_call_future_stays_small() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("narrowgate.yaml");
        std::fs::write(&config, "upstreams: {}\ncallers: []\n").expect("config");
        let config = crate::config::Config::load(&config).expect("a valid config");
        let gateway =
            Version::new(config, crate::contract::ContractSet::default()).expect("a gateway");
        let id = RequestId::Number(1);
        let meta = rmcp::model::RequestMetaObject::default();
        let inbound = Inbound {
            id: &id,
            meta: &meta,
            parts: None,
            protocol: None,
            caller: None,
        };
        let call = answer_tools_call(
            &gateway,
            CallToolRequestParams::new("echo"),
            inbound,
            None,
            None,
            None,
        );
        let size = std::mem::size_of_val(&call);
        assert!(size <= 9 * 1024, "a tools/call future of {size} bytes");
    }
}
