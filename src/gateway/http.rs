//! The HTTP face: the MCP endpoint wrapped in small layers, outermost first: a task of its own
//! for each request ([`in_own_task`]) → Host/Origin checks (DNS-rebinding defence, 403) → body
//! size (413) and JSON (400, -32700) → authentication (401) and the tool's scopes (403
//! `insufficient_scope`) → session ownership (404 for another caller's session) → the gateway's
//! own answer to plain `tools/call` requests ([`direct`]) → rmcp's Streamable HTTP service for
//! everything else.
//! Health endpoints and the RFC 9728 metadata sit beside it, outside those layers.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::direct;
use super::health;
use super::live::Live;
use super::request_ids::{self, RequestIds};
use super::server::McpHandler;
use super::sessions::{SessionOwners, requested_version};
use crate::policy::resource::{self, METADATA_PATH};
use crate::policy::{AuthError, Caller};

const SESSION_HEADER: &str = "mcp-session-id";
/// The state the layers share.
#[derive(Clone)]
struct Layers {
    /// Each layer reads the version in force per request, so reloads apply to new requests.
    live: Arc<Live>,
    sessions: Arc<SessionOwners>,
    /// The request ids in flight in each session (a reused one is refused).
    request_ids: Arc<RequestIds>,
    /// rmcp's sessions, which the direct path checks before answering in one.
    rmcp_sessions: Arc<LocalSessionManager>,
}

/// Builds the whole HTTP application.
pub fn router(live: Arc<Live>, shutdown: CancellationToken) -> Router {
    let gateway = live.current();
    let config = &gateway.config;
    let mcp_config = StreamableHttpServerConfig::default()
        // Host and Origin are checked by our own outer layer, before authentication.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(
            usize::try_from(config.max_request_bytes.0).unwrap_or(usize::MAX),
        )
        .with_json_response(true)
        .with_cancellation_token(shutdown.child_token());
    let handler = McpHandler { live: live.clone() };
    let rmcp_sessions = Arc::new(LocalSessionManager::default());
    let mcp = StreamableHttpService::new(
        move || Ok(handler.clone()),
        rmcp_sessions.clone(),
        mcp_config,
    );
    let layers = Layers {
        live: live.clone(),
        sessions: Arc::new(SessionOwners::default()),
        request_ids: Arc::new(RequestIds::default()),
        rmcp_sessions,
    };
    let mcp_routes = Router::new()
        .route_service(&config.path, mcp)
        .layer(middleware::from_fn_with_state(layers.clone(), direct_calls))
        .layer(middleware::from_fn_with_state(layers.clone(), own_sessions))
        .layer(middleware::from_fn_with_state(layers.clone(), authenticate))
        .layer(middleware::from_fn_with_state(layers.clone(), check_body))
        .layer(middleware::from_fn_with_state(
            layers.clone(),
            check_host_and_origin,
        ))
        .layer(middleware::from_fn(in_own_task));
    // RFC 9728: the root form and the path-inserted form of the MCP endpoint (and of
    // `public_url`'s path, should a proxy publish the gateway under another one).
    let mut metadata_paths = vec![
        METADATA_PATH.to_string(),
        format!("{METADATA_PATH}{}", config.path),
    ];
    if let Some(path) = config
        .public_url
        .as_deref()
        .and_then(|u| u.split_once("://"))
        .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].trim_end_matches('/')))
        .filter(|p| !p.is_empty())
    {
        metadata_paths.push(format!("{METADATA_PATH}{path}"));
    }
    metadata_paths.sort();
    metadata_paths.dedup();
    let mut metadata = Router::new();
    for path in &metadata_paths {
        metadata = metadata.route(path, get(protected_resource_metadata));
    }
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(crate::telemetry::metrics::handler))
        .with_state(live.clone())
        .merge(metadata.with_state(live))
        .merge(mcp_routes)
}

/// Serves each MCP request in a task of its own rather than in its connection's task, for two
/// reasons. A call runs to its end even if its client goes away (hyper drops a connection's
/// request futures with it): its upstream call is not cut off halfway and its receipt is
/// written. And hyper hands a request's body over through a channel: read in the connection's
/// own task, taking it wakes that very task, which tokio's multi-thread scheduler treats as a
/// yield and answers by waking another worker thread, two context switches per request for
/// nothing (BENCHMARKS.md: 3.0 instead of 4.3 per call with one client).
async fn in_own_task(request: Request, next: Next) -> Response {
    match tokio::spawn(next.run(request)).await {
        Ok(response) => response,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// RFC 9728 protected-resource metadata when `oauth` is set, else 404.
async fn protected_resource_metadata(State(live): State<Arc<Live>>) -> Response {
    match &live.current().resource {
        Some(r) => axum::Json(r.document()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Reads a POST body whole before anything else looks at it: 413 when it exceeds
/// `max_request_bytes`, 400 when it breaks off (bad chunked framing, a client gone mid-body), and
/// 400 with JSON-RPC -32700 when it is not JSON at all (rmcp alone would answer 415). An oversized
/// body with a declared length is drained, up to a bound, so the client reads the 413 instead of a
/// reset connection.
async fn check_body(State(l): State<Layers>, request: Request, next: Next) -> Response {
    const DRAIN_AT_MOST: u64 = 64 << 20;
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let limit = l.live.current().config.max_request_bytes.0;
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: the request body exceeds max_request_bytes ({limit} bytes)"
            ),
        )
            .into_response()
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (parts, body) = request.into_parts();
    if let Some(length) = declared
        && length > limit
    {
        if length <= DRAIN_AT_MOST {
            let _ = axum::body::to_bytes(body, usize::MAX).await;
        }
        return too_large();
    }
    let bytes = match axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX)).await
    {
        Ok(bytes) => bytes,
        Err(e) if over_limit(&e) => return too_large(),
        Err(e) => {
            let message = format!("Bad Request: the request body could not be read ({e})");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        let error = serde_json::json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": format!("Parse error: the body is not valid JSON ({e})")}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// Whether reading a body failed on its length limit rather than on the body itself.
fn over_limit(error: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// 403 for a Host not in `allowed_hosts` or an Origin not in `allowed_origins`.
async fn check_host_and_origin(State(l): State<Layers>, request: Request, next: Next) -> Response {
    let gateway = l.live.current();
    let config = &gateway.config;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if !host.is_some_and(|h| host_allowed(&config.allowed_hosts, h)) {
        return (
            StatusCode::FORBIDDEN,
            "Forbidden: Host header is not allowed",
        )
            .into_response();
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| origin_allowed(&config.allowed_origins, o));
        if !ok {
            return (StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed").into_response();
        }
    }
    next.run(request).await
}

/// `host` is a Host header (`name[:port]`); entries without a port match any port.
fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
        None => host
            .rsplit_once(':')
            .map_or(host.clone(), |(n, _)| n.to_string()),
    };
    allowed.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        let entry = entry.trim_start_matches('[').replace(']', "");
        entry == "*" || entry == name || entry == host.replace(['[', ']'], "")
    })
}

/// `origin` matches an entry exactly, or an entry ending in `:*` with any port.
fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    allowed.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        match entry.strip_suffix(":*") {
            Some(prefix) => {
                origin == prefix
                    || origin
                        .strip_prefix(prefix)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .is_some_and(|port| port.chars().all(|c| c.is_ascii_digit()))
            }
            None => entry.trim_end_matches('/') == origin,
        }
    })
}

/// 401 with a `WWW-Authenticate: Bearer` challenge unless the request carries a known caller's
/// credentials (an API key or a valid JWT); then 403 `insufficient_scope` for a `tools/call` of a
/// tool this caller may use but lacks the `scopes` for, so the client can step up its token.
async fn authenticate(State(l): State<Layers>, request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|h| h.to_str().unwrap_or(""));
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let gateway = l.live.current();
    let caller = match gateway.authenticator.authenticate(header).await {
        Ok(caller) => caller,
        Err(e) => return unauthorized(&gateway, host.as_deref(), &e),
    };
    let mut request = request;
    if gateway.any_scopes && request.method() == Method::POST {
        // `check_body` has buffered the body already: reading it again is a copy-free move.
        let limit = usize::try_from(gateway.config.max_request_bytes.0).unwrap_or(usize::MAX);
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        };
        if let Some((response, tool, arguments)) =
            step_up(&gateway, host.as_deref(), &caller, &bytes)
        {
            // Every tools/call leaves a receipt, this refusal included.
            gateway.record_denied(&caller, &tool, &arguments).await;
            return response;
        }
        request = Request::from_parts(parts, axum::body::Body::from(bytes));
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

fn unauthorized(gateway: &Gateway, host: Option<&str>, e: &AuthError) -> Response {
    // The reason is logged, never the credentials.
    tracing::info!(reason = %e, "request refused: 401");
    let description = match e {
        AuthError::Missing => {
            "this gateway requires credentials: send Authorization: Bearer <key or token>"
        }
        AuthError::Invalid => "the credentials presented are not valid",
        AuthError::Token(t) => t.client_text(),
    };
    let challenge = match &gateway.resource {
        Some(r) => r.unauthorized(host, (*e != AuthError::Missing).then_some(description)),
        None => "Bearer".to_string(),
    };
    challenge_response(
        StatusCode::UNAUTHORIZED,
        "invalid_token",
        description,
        &challenge,
        "Bearer",
    )
}

/// A 401 or 403 with an OAuth error body and its `WWW-Authenticate` challenge (`fallback` if the
/// challenge cannot be a header value).
fn challenge_response(
    status: StatusCode,
    error: &str,
    description: &str,
    challenge: &str,
    fallback: &'static str,
) -> Response {
    let mut response = (
        status,
        axum::Json(serde_json::json!({"error": error, "error_description": description})),
    )
        .into_response();
    let value =
        HeaderValue::from_str(challenge).unwrap_or_else(|_| HeaderValue::from_static(fallback));
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, value);
    response
}

/// Just enough of a JSON-RPC message to see which tool a `tools/call` is for.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<PeekParams<'a>>,
}

/// (The arguments are read again only for a refusal's receipt: most calls are not refused.)
#[derive(serde::Deserialize)]
struct PeekParams<'a> {
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
}

/// The 403 for the first `tools/call` in `body` whose tool the caller may use (by the same
/// [`Caller::may_use`] as everywhere) but lacks scopes for. Tools the caller may not use are
/// left to the MCP layer, which answers them exactly like unknown tools.
/// Also returns the tool's name and arguments, for the receipt of the refusal.
fn step_up(
    gateway: &Gateway,
    host: Option<&str>,
    caller: &Caller,
    body: &[u8],
) -> Option<(Response, String, serde_json::Value)> {
    let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let messages: Vec<Peek<'_>> = match batch {
        true => serde_json::from_slice(body).ok()?,
        false => vec![serde_json::from_slice(body).ok()?],
    };
    let catalog = gateway.catalog();
    for (index, message) in messages.iter().enumerate() {
        if message.method.as_deref() != Some("tools/call") {
            continue;
        }
        let Some(name) = message.params.as_ref().and_then(|p| p.name.as_deref()) else {
            continue;
        };
        let Some(tool) = catalog.exposed(name).filter(|_| caller.may_use(name)) else {
            continue;
        };
        let required = &tool.contract.scopes;
        let missing = caller.missing_scopes(required);
        if missing.is_empty() {
            continue;
        }
        tracing::info!(caller = %caller.name, tool = %name, missing = %missing.join(" "), "request refused: 403 insufficient_scope");
        let description = format!(
            "the tool {name} requires the scope(s) {}",
            required.join(" ")
        );
        let challenge =
            resource::insufficient_scope(gateway.resource.as_deref(), host, required, &description);
        let response = challenge_response(
            StatusCode::FORBIDDEN,
            "insufficient_scope",
            &description,
            &challenge,
            "Bearer error=\"insufficient_scope\"",
        );
        let parsed: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let message = if batch { &parsed[index] } else { &parsed };
        let arguments = match &message["params"]["arguments"] {
            serde_json::Value::Null => serde_json::json!({}),
            arguments => arguments.clone(),
        };
        return Some((response, name.to_string(), arguments));
    }
    None
}

/// A session belongs to the caller who opened it: anyone else gets the same 404 as an unknown
/// session, so session ids cannot be probed either. A session id with no known owner is 404 too
/// (fail closed).
async fn own_sessions(State(l): State<Layers>, request: Request, next: Next) -> Response {
    let Some(caller) = request.extensions().get::<Arc<Caller>>().cloned() else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let presented = session_id(request.headers());
    if let Some(session) = &presented
        && !l.sessions.admits(session, &caller.name)
    {
        tracing::warn!(caller = %caller.name, "request refused: session unknown or another caller's");
        return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    }
    let is_delete = request.method() == Method::DELETE;
    // A request without a session may open one: keep its body (a cheap handle on the buffer
    // `check_body` made) to read the version an `initialize` asks for. Requests that name
    // another method in `Mcp-Method` (2026-07-28 ones) cannot.
    let names_another_method = request
        .headers()
        .get("mcp-method")
        .is_some_and(|m| m != "initialize");
    // A POST in a session holds its request ids in flight until answered: a request reusing one
    // is refused, as rmcp would send one of the two answers to the other's sender.
    let opens = presented.is_none() && !names_another_method;
    let (request, opening, held) =
        if request.method() == Method::POST && (opens || presented.is_some()) {
            let limit =
                usize::try_from(l.live.current().config.max_request_bytes.0).unwrap_or(usize::MAX);
            let (parts, body) = request.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
                return StatusCode::PAYLOAD_TOO_LARGE.into_response();
            };
            let held = match &presented {
                Some(session) => match l.request_ids.hold(session, &bytes) {
                    Some(held) => Some(held),
                    None => return request_ids::id_in_use(),
                },
                None => None,
            };
            let request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
            (request, opens.then_some(bytes), held)
        } else {
            (request, None, None)
        };
    let mut response = next.run(request).await;
    if let Some(held) = held {
        response = held.until_sent(response);
    }
    match (&presented, session_id(response.headers())) {
        (None, Some(created)) => {
            let version = opening.as_deref().and_then(requested_version);
            l.sessions.record(&created, &caller.name, version);
        }
        (Some(session), _) if is_delete && response.status().is_success() => {
            l.sessions.forget(session);
            // rmcp answers 202; the SDKs' own servers answer 200, and the Python SDK's client
            // logs "Session termination failed: 202" for anything else.
            *response.status_mut() = StatusCode::OK;
        }
        _ => {}
    }
    response
}

/// Plain `tools/call` requests are answered by the gateway itself ([`direct`]); the rest go to
/// rmcp, which is told of every request of a session it handles.
async fn direct_calls(State(l): State<Layers>, request: Request, next: Next) -> Response {
    let session = session_id(request.headers());
    let session_version = async {
        let id = session.as_deref()?;
        let version = l
            .sessions
            .version_if_recently_handled(id, direct::SESSION_TOUCH)?;
        let held = l.rmcp_sessions.has_session(&id.into()).await;
        held.unwrap_or(false).then_some(version)
    };
    match direct::answer(l.live.current(), session_version, request).await {
        Ok(response) => response,
        Err(request) => {
            let response = next.run(request).await;
            // Only a request rmcp served reaches the session and resets its idle timer.
            if let Some(id) = &session
                && response.status().is_success()
            {
                l.sessions.handled_by_rmcp(id);
            }
            response
        }
    }
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hosts_match_by_name_with_any_port() {
        let allowed = list(&["localhost", "127.0.0.1", "::1"]);
        assert!(host_allowed(&allowed, "localhost:8080"));
        assert!(host_allowed(&allowed, "LOCALHOST"));
        assert!(host_allowed(&allowed, "[::1]:80"));
        assert!(!host_allowed(&allowed, "evil.example.com"));
        assert!(!host_allowed(&allowed, "localhost.evil.com:80"));
        assert!(host_allowed(&list(&["*"]), "anything:1"));
        assert!(host_allowed(
            &list(&["gw.example.com:443"]),
            "gw.example.com:443"
        ));
    }

    #[test]
    fn origins_match_exactly_or_with_a_port_wildcard() {
        let allowed = list(&["https://app.example.com", "http://localhost:*"]);
        assert!(origin_allowed(&allowed, "https://app.example.com"));
        assert!(origin_allowed(&allowed, "http://localhost:6274"));
        assert!(!origin_allowed(&allowed, "http://localhost.evil.com:1"));
        assert!(!origin_allowed(&allowed, "https://evil.example.com"));
        assert!(!origin_allowed(&[], "http://localhost"));
    }

    /// A body that breaks off with an error, as hyper's does on bad chunked framing.
    struct Broken;

    impl futures_core::Stream for Broken {
        type Item = Result<axum::body::Bytes, std::io::Error>;
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Ready(Some(Err(std::io::Error::other("invalid chunk size"))))
        }
    }

    /// Proves: a body over the limit is told from a body that breaks off (413 vs 400); the
    /// gateway test sends the latter for real, this one covers the chunked body over the limit.
    #[tokio::test]
    async fn a_body_over_the_limit_is_told_from_a_broken_one() {
        let over = axum::body::to_bytes(axum::body::Body::from(vec![b'x'; 100]), 10).await;
        assert!(over_limit(&over.expect_err("over the limit")));
        let broken = axum::body::to_bytes(axum::body::Body::from_stream(Broken), 10).await;
        assert!(!over_limit(&broken.expect_err("broken")));
    }
}
