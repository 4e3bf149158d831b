//! The HTTP face: the MCP endpoint wrapped in small layers, outermost first: admission (the
//! version in force, taken once, and a task of its own for each request: [`admit`]) → Host/Origin
//! checks (DNS-rebinding defence, 403) → body size (413), JSON (400, -32700) and the one parse
//! of the body ([`check_body`]) → authentication (401) and the tool's scopes (403
//! `insufficient_scope`) → session ownership (404 for another caller's session) → the gateway's
//! own answer to plain `tools/call` requests ([`direct`]) → rmcp's Streamable HTTP service for
//! everything else. Each layer reads and adds to the request's [`Admitted`], and refuses with a
//! [`Rejection`].
//! Health endpoints and the RFC 9728 metadata sit beside it, outside those layers. The other
//! face, MCP on stdin/stdout for the one client that launched the gateway, is [`stdio`].

pub mod approvals;
pub mod browser;
pub mod capacity;
pub mod connections;
pub mod guarded;
pub mod health;
pub mod origin;
pub mod request_ids;
pub mod sessions;
pub mod stdio;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt as _;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower_layer::Stack;

use crate::edge::request_ids::RequestIds;
use crate::edge::sessions::SessionOwners;
use crate::mcp::direct;
use crate::mcp::handler::McpHandler;
use crate::policy::resource::{self, METADATA_PATH};
use crate::policy::{AuthError, Caller};
use crate::request::Admitted;
use crate::request::message::{self, Method as JsonRpcMethod, ToolsCall};
use crate::request::rejection::Rejection;
use crate::runtime::Version;
use crate::runtime::live::Live;
use crate::state::shared_sessions::{self, SharedSessions};
use crate::status;
use capacity::Capacity;

const SESSION_HEADER: &str = "mcp-session-id";
/// The state the layers share.
#[derive(Clone)]
struct Layers {
    /// Read once per request, by [`admit`]; every later layer uses the request's [`Admitted`].
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
        // The body's size is checked by `check_body`, against the version in force: rmcp's own
        // limit would stay the one of the configuration the gateway started with.
        .with_max_request_body_bytes(usize::MAX)
        .with_json_response(true)
        .with_cancellation_token(shutdown.child_token());
    let rmcp_sessions = Arc::new(LocalSessionManager::default());
    let handler_live = live.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(McpHandler::new(handler_live.clone())),
        rmcp_sessions.clone(),
        mcp_config,
    );
    let layers = Layers {
        live: live.clone(),
        sessions: Arc::new(SessionOwners::default()),
        request_ids: Arc::new(RequestIds::default()),
        rmcp_sessions,
    };
    let capacity = Capacity::new(layers.sessions.clone(), layers.rmcp_sessions.clone());
    // `route_layer`: the layers wrap the MCP endpoint only; any other path is a plain 404.
    // Outermost first. They are stacked into one layer so that axum boxes the stack once: a
    // `route_layer` per layer boxes each one, and every request then clones each boxed layer
    // with all the boxed layers inside it, an allocation per layer per level (quadratic in the
    // number of layers; about a tenth of the gateway's CPU per call with eight layers).
    let stack = Stack::new(
        middleware::from_fn_with_state(layers.clone(), direct_calls),
        middleware::from_fn_with_state(capacity.clone(), capacity::limit_sessions_and_streams),
    );
    let stack = Stack::new(
        stack,
        middleware::from_fn_with_state(layers.clone(), own_sessions),
    );
    let stack = Stack::new(stack, middleware::from_fn(check_scopes));
    let stack = Stack::new(stack, middleware::from_fn(check_body));
    // Before the body is read: a body is only ever read from an authenticated caller.
    let stack = Stack::new(stack, middleware::from_fn(authenticate));
    let stack = Stack::new(stack, middleware::from_fn(check_host_and_origin));
    let stack = Stack::new(stack, middleware::from_fn_with_state(layers.clone(), admit));
    // The browser routes (the status page): the same first layers, then an authentication
    // that also takes HTTP Basic, for browsers (`status::browser`).
    let browser_layers = Stack::new(
        middleware::from_fn(browser::authenticate),
        middleware::from_fn(check_host_and_origin),
    );
    let browser_layers = Stack::new(
        browser_layers,
        middleware::from_fn_with_state(layers, admit),
    );
    // The approvals API sits with the page: its buttons post there with the browser's
    // credentials, and an approver's CLI or script sends Bearer as usual.
    let browser_routes = Router::new()
        .route("/status", get(status::page))
        .route("/approvals", get(approvals::list))
        .route("/approvals/{id}", post(approvals::decide))
        .route_layer(browser_layers)
        .with_state(live.clone());
    let mcp_routes = Router::new()
        .route_service(&config.path, mcp)
        .route_layer(stack);
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
    // Outermost, for every route: a connection over the connection limits answers health checks
    // only.
    let mut root = Router::new();
    if config.path != "/register" {
        root = root.route("/register", post(no_registration));
    }
    root.route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .with_state(live.clone())
        .merge(metadata.with_state(live))
        .merge(mcp_routes)
        .merge(browser_routes)
        .layer(middleware::from_fn(
            crate::edge::connections::refuse_over_limit,
        ))
}

/// `POST /register`: where OAuth clients (mcp-remote, the TypeScript SDK) try Dynamic Client
/// Registration after a 401 when no authorization server is published. The gateway is none:
/// a 404 whose body says so, which those clients show their user in place of a bare 404.
async fn no_registration() -> Response {
    let body = serde_json::json!({"error": "not_found",
        "error_description": "narrowgate registers no OAuth clients here: it takes API keys \
            (Authorization: Bearer <key>) or tokens of the issuer its protected-resource metadata \
            names. A 401 means the key is missing or not known to this gateway: check the key \
            the client sends"});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// The edge of the MCP endpoint. Takes the version in force, once: every later layer and both
/// handlers read it from the request's [`Admitted`], so a reload while the request is under way
/// cannot have it checked by one version and served by another.
///
/// Then serves the request in a task of its own rather than in its connection's task, for two
/// reasons. A call runs to its end even if its client goes away (hyper drops a connection's
/// request futures with it): its upstream call is not cut off halfway and its receipt is
/// written. And hyper hands a request's body over through a channel: read in the connection's
/// own task, taking it wakes that very task, which tokio's multi-thread scheduler treats as a
/// yield and answers by waking another worker thread, two context switches per request for
/// nothing (BENCHMARKS.md: 3.0 instead of 4.3 per call with one client).
async fn admit(State(l): State<Layers>, mut request: Request, next: Next) -> Response {
    let mut admitted = Admitted::new(l.live.current());
    // A call held for an approver stops waiting when its client goes away (this future is
    // dropped with the connection; the spawned task is not), so that the same call sent again
    // can collect the decision. Only when some tool waits for approvers: no cost otherwise.
    let gone = admitted.gateway.any_approver.then(|| {
        let token = tokio_util::sync::CancellationToken::new();
        admitted.client_gone = Some(token.clone());
        token.drop_guard()
    });
    request.extensions_mut().insert(admitted);
    let answer = match tokio::spawn(next.run(request)).await {
        Ok(response) => response,
        Err(_) => Rejection::Internal("the request's task failed").into_response(),
    };
    if let Some(gone) = gone {
        gone.disarm();
    }
    answer
}

/// The request's admission (absent only if [`admit`] is missing from the stack).
fn admitted(request: &Request) -> Result<&Admitted, Rejection> {
    request
        .extensions()
        .get::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))
}

fn admitted_mut(request: &mut Request) -> Result<&mut Admitted, Rejection> {
    request
        .extensions_mut()
        .get_mut::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))
}

/// RFC 9728 protected-resource metadata when `oauth` is set, else 404.
async fn protected_resource_metadata(State(live): State<Arc<Live>>) -> Response {
    match &live.current().resource {
        Some(r) => axum::Json(r.document()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Reads a POST body whole before anything else looks at it, and parses it once for the layers
/// after (into the request's [`Admitted`]): 413 when it exceeds `max_request_bytes` (of the
/// request's version: the one limit, rmcp's own is off), 400 when it breaks off (bad chunked
/// framing, a client gone mid-body), and 400 with JSON-RPC -32700 when it is not JSON at all
/// (rmcp alone would answer 415). An oversized body with a declared length is drained (read and
/// dropped, never kept), up to a bound, so the client reads the 413 instead of a reset
/// connection. The whole body must arrive within `http.body_timeout`, else 408. Only bodies of
/// authenticated callers get here.
async fn check_body(request: Request, next: Next) -> Result<Response, Rejection> {
    const DRAIN_AT_MOST: u64 = 64 << 20;
    if request.method() != Method::POST {
        return Ok(next.run(request).await);
    }
    let gateway = &admitted(&request)?.gateway;
    let (limit, timeout) = (
        gateway.config.max_request_bytes.0,
        gateway.config.http.body_timeout.0,
    );
    // Read of a `tools/call`'s parameters what the layers after will use, no more.
    let calls = if gateway.config.direct_calls
        && direct::lifecycle_of(request.method(), request.headers()).is_some()
    {
        message::CallParams::Whole
    } else if gateway.any_scopes {
        message::CallParams::Name
    } else {
        message::CallParams::Skip
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
            let mut body = body;
            let drain = async { while let Some(Ok(_)) = body.frame().await {} };
            let _ = tokio::time::timeout(timeout, drain).await;
        }
        return Err(Rejection::TooLarge { limit });
    }
    let read = axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX));
    let bytes = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| Rejection::BodyTimeout { timeout })?
        .map_err(|e| match over_limit(&e) {
            true => Rejection::TooLarge { limit },
            false => Rejection::BodyUnreadable(e),
        })?;
    let parsed = message::Body::parse(&bytes, calls).map_err(Rejection::NotJson)?;
    let mut request = Request::from_parts(parts, axum::body::Body::from(bytes));
    admitted_mut(&mut request)?.body = Some(parsed);
    Ok(next.run(request).await)
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
async fn check_host_and_origin(request: Request, next: Next) -> Result<Response, Rejection> {
    let config = &admitted(&request)?.gateway.config;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if !host.is_some_and(|h| origin::host_allowed(&config.allowed_hosts, h)) {
        return Err(Rejection::HostNotAllowed);
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| {
            origin::origin_allowed(&config.allowed_origins, o)
                || host.is_some_and(|h| origin::same_origin(o, h))
        });
        if !ok {
            return Err(Rejection::OriginNotAllowed);
        }
    }
    Ok(next.run(request).await)
}

/// 401 with a `WWW-Authenticate: Bearer` challenge unless the request carries a known caller's
/// credentials (an API key or a valid JWT). From the headers alone, before the body is read: an
/// unauthenticated client never makes the gateway hold a body.
async fn authenticate(request: Request, next: Next) -> Result<Response, Rejection> {
    // Worked on in parts: a request's body cannot be shared across the awaits below.
    let (mut parts, body) = request.into_parts();
    let admitted = parts
        .extensions
        .get::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))?;
    let gateway = &admitted.gateway;
    let headers = &parts.headers;
    let header = headers
        .get(header::AUTHORIZATION)
        .map(|h| h.to_str().unwrap_or(""));
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let caller = match gateway.authenticator.authenticate(header).await {
        Ok(caller) => caller,
        Err(e) => return Err(unauthorized(gateway, host, &e)),
    };
    if let Some(admitted) = parts.extensions.get_mut::<Admitted>() {
        admitted.caller = Some(caller);
    }
    Ok(next.run(Request::from_parts(parts, body)).await)
}

/// 403 `insufficient_scope` for a `tools/call` of a tool the authenticated caller may use but
/// lacks the `scopes` for, so the client can step up its token (needs the body: after
/// [`check_body`]).
async fn check_scopes(request: Request, next: Next) -> Result<Response, Rejection> {
    // Worked on in parts: a refusal's receipt may read the body again.
    let (parts, body) = request.into_parts();
    let admitted = parts
        .extensions
        .get::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))?;
    let gateway = &admitted.gateway;
    let caller = admitted.caller.clone().ok_or(Rejection::Unauthenticated)?;
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    if gateway.any_scopes
        && let Some(parsed) = &admitted.body
        && let Some((refusal, index, call)) = step_up(gateway, host, &caller, parsed)
    {
        // Every tools/call leaves a receipt, this refusal included.
        let arguments = match call {
            ToolsCall::Params(p) => Value::Object(p.arguments.clone().unwrap_or_default()),
            // Not read with the name: read from the body again (refusals are rare).
            _ => {
                let bytes = axum::body::to_bytes(body, usize::MAX).await;
                message::arguments_at(&bytes.unwrap_or_default(), index)
            }
        };
        let tool = call.name().unwrap_or_default();
        gateway.record_denied(&caller, tool, &arguments).await;
        return Err(refusal);
    }
    Ok(next.run(Request::from_parts(parts, body)).await)
}

fn unauthorized(gateway: &Version, host: Option<&str>, e: &AuthError) -> Rejection {
    // The reason is logged, never the credentials.
    tracing::info!(reason = %e, "request refused: 401");
    let description = match e {
        AuthError::Missing => {
            "this gateway requires credentials: send Authorization: Bearer <key or token>"
        }
        AuthError::Invalid => {
            "the key presented is not known to this gateway: check the key your client sends as Authorization: Bearer <key>"
        }
        AuthError::Token(t) => t.client_text(),
    };
    // A credential that was sent but is bad says so (`invalid_token`), with or without OAuth,
    // so that a client tells a wrong key from a missing login and does not start a sign-in.
    let challenge = match &gateway.resource {
        Some(r) => r.unauthorized(host, (*e != AuthError::Missing).then_some(description)),
        None if *e == AuthError::Missing => "Bearer".to_string(),
        None => crate::policy::resource::invalid_token(description),
    };
    Rejection::Unauthorized {
        description: description.into(),
        challenge,
    }
}

/// The 403 for the first `tools/call` in `body` whose tool the caller may use (by the same
/// [`Caller::may_use`] as everywhere) but lacks scopes for, with that call and its index in the
/// body (for the receipt of the refusal). Tools the caller may not use are left to the MCP layer,
/// which answers them exactly like unknown tools.
fn step_up<'b>(
    gateway: &Version,
    host: Option<&str>,
    caller: &Caller,
    body: &'b message::Body,
) -> Option<(Rejection, usize, &'b ToolsCall)> {
    let catalog = gateway.catalog();
    body.messages()
        .iter()
        .enumerate()
        .find_map(|(index, message)| {
            let JsonRpcMethod::ToolsCall(call) = &message.method else {
                return None;
            };
            let name = call.name()?;
            let tool = catalog.exposed(name).filter(|_| caller.may_use(name))?;
            let required = &tool.contract.scopes;
            let missing = caller.missing_scopes(required);
            if missing.is_empty() {
                return None;
            }
            tracing::info!(caller = %caller.name, tool = %name, missing = %missing.join(" "), "request refused: 403 insufficient_scope");
            let description = format!(
                "the tool {name} requires the scope(s) {}",
                required.join(" ")
            );
            let challenge = resource::insufficient_scope(
                gateway.resource.as_deref(),
                host,
                required,
                &description,
            );
            let refusal = Rejection::InsufficientScope {
                description,
                challenge,
            };
            Some((refusal, index, call))
        })
}

/// A session belongs to the caller who opened it: anyone else gets the same 404 as an unknown
/// session, so session ids cannot be probed either. A session id with no known owner is 404 too
/// (fail closed). A request in a session holds its JSON-RPC request ids until answered: one
/// reusing an id in flight is refused ([`crate::edge::request_ids`]).
async fn own_sessions(
    State(l): State<Layers>,
    request: Request,
    next: Next,
) -> Result<Response, Rejection> {
    let admitted = admitted(&request)?;
    let caller = admitted.caller.clone().ok_or(Rejection::Unauthenticated)?;
    let presented = session_id(request.headers());
    if let Some(session) = &presented
        && !l.sessions.admits(session, &caller.name)
    {
        tracing::warn!(caller = %caller.name, "request refused: session unknown or another caller's");
        return Err(Rejection::SessionNotFound);
    }
    // A session in use keeps its shared record (`state: redis://…`) from lapsing: renewed at
    // most once a minute, off the request's path.
    let shared = Some(&admitted.gateway.kept.shared_sessions)
        .filter(|s| s.is_shared())
        .cloned();
    if let (Some(shared), Some(session)) = (&shared, &presented)
        && l.sessions
            .renewal_due(session, shared_sessions::RENEW_AFTER)
    {
        shared_record(shared.clone(), session.clone(), caller.name.clone());
    }
    let held = match (&presented, &admitted.body) {
        (Some(session), Some(body)) => Some(
            l.request_ids
                .hold(
                    session,
                    body.messages().iter().filter_map(|m| m.request_id()),
                )
                .ok_or(Rejection::RequestIdInUse)?,
        ),
        _ => None,
    };
    let is_delete = request.method() == Method::DELETE;
    // A request without a session may open one: the version an `initialize` asks for is kept
    // for the direct path. Requests that name another method in `Mcp-Method` (2026-07-28 ones)
    // cannot open one.
    let names_another_method = request
        .headers()
        .get("mcp-method")
        .is_some_and(|m| m != "initialize");
    let opening = match presented.is_none() && !names_another_method {
        true => admitted
            .body
            .as_ref()
            .and_then(|b| b.initialize_version())
            .map(str::to_string),
        false => None,
    };
    let mut response = next.run(request).await;
    if let Some(held) = held {
        response = held.until_sent(response);
    }
    match (&presented, session_id(response.headers())) {
        (None, Some(created)) => {
            l.sessions.record(&created, &caller.name, opening);
            // Recorded before the client learns of the session, so that a next `initialize` on
            // another replica already counts it.
            if let Some(shared) = shared {
                shared.record(&created, &caller.name).await;
            }
        }
        (Some(session), _) if is_delete && response.status().is_success() => {
            l.sessions.forget(session);
            if let Some(shared) = shared {
                let (session, caller) = (session.clone(), caller.name.clone());
                tokio::spawn(async move { shared.remove(&session, &caller).await });
            }
            // rmcp answers 202; the SDKs' own servers answer 200, and the Python SDK's client
            // logs "Session termination failed: 202" for anything else.
            *response.status_mut() = StatusCode::OK;
        }
        _ => {}
    }
    Ok(response)
}

/// Renews `session`'s shared record in the background: the request does not wait on Redis for
/// it (a lost renewal only makes the fleet count the session for less long).
fn shared_record(shared: Arc<SharedSessions>, session: String, caller: String) {
    tokio::spawn(async move { shared.record(&session, &caller).await });
}

/// Plain `tools/call` requests are answered by the gateway itself ([`direct`]) unless
/// `direct_calls` is off; the rest go to rmcp, which is told of every request of a session it
/// handles.
async fn direct_calls(
    State(l): State<Layers>,
    mut request: Request,
    next: Next,
) -> Result<Response, Rejection> {
    let session = session_id(request.headers());
    if admitted(&request)?.gateway.config.direct_calls {
        let session_version = async {
            let id = session.as_deref()?;
            let version = l
                .sessions
                .version_if_recently_handled(id, direct::SESSION_TOUCH)?;
            let held = l.rmcp_sessions.has_session(&id.into()).await;
            held.unwrap_or(false).then_some(version)
        };
        request = match direct::answer(session_version, request).await {
            Ok(response) => return Ok(response),
            Err(request) => request,
        };
    }
    // rmcp reads the body itself: the parsed form is of no more use.
    admitted_mut(&mut request)?.body = None;
    let response = next.run(request).await;
    // Only a request rmcp served reaches the session and resets its idle timer.
    if let Some(id) = &session
        && response.status().is_success()
    {
        l.sessions.handled_by_rmcp(id);
    }
    Ok(response)
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests;
