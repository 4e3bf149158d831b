//! Every answer the HTTP layers give instead of serving a request, in one place: its status,
//! headers and body. A layer returns `Err(Rejection)`; what the client reads is decided here.
//! (JSON-RPC errors of requests that are served come from the handlers, not from here.)

use std::borrow::Cow;

/// The challenge that makes a browser ask for credentials (`edge::browser`).
pub const BASIC_CHALLENGE: &str = "Basic realm=\"narrowgate\", charset=\"UTF-8\"";

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// What a 503 for too many sessions or streams tells the client to wait, in seconds (sessions
/// free up as clients delete them or leave them idle).
const RETRY_AFTER_SECONDS: u32 = 5;

/// Why a layer refused a request. The `Display` text is what the client reads in the body of the
/// plain-text refusals, and what the log says for the others.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// 403: the `Host` header is not in `allowed_hosts` (DNS-rebinding defence).
    #[error("Forbidden: Host header is not allowed")]
    HostNotAllowed,
    /// 403: the `Origin` header is not in `allowed_origins`.
    #[error("Forbidden: Origin is not allowed")]
    OriginNotAllowed,
    /// 413: the body is larger than `max_request_bytes`.
    #[error("Payload Too Large: the request body exceeds max_request_bytes ({limit} bytes)")]
    TooLarge { limit: u64 },
    /// 400: the body broke off (bad chunked framing, a client gone mid-body).
    #[error("Bad Request: the request body could not be read ({0})")]
    BodyUnreadable(axum::Error),
    /// 408: the body did not arrive within `http.body_timeout`.
    #[error(
        "Request Timeout: the request body did not arrive within http.body_timeout ({} ms)",
        timeout.as_millis()
    )]
    BodyTimeout { timeout: std::time::Duration },
    /// 503 with `Retry-After`: the caller, or all callers together, hold as many MCP sessions as
    /// `http.max_sessions_per_caller` / `http.max_sessions` allow.
    #[error(
        "Service Unavailable: too many MCP sessions ({0}); close unused sessions (DELETE) or \
         retry later"
    )]
    TooManySessions(&'static str),
    /// 503 with `Retry-After`: as many SSE streams are open as `http.max_streams_per_caller` /
    /// `http.max_streams` allow.
    #[error("Service Unavailable: too many open SSE streams ({0}); retry later")]
    TooManyStreams(&'static str),
    /// 400 with JSON-RPC -32700: the body is not JSON at all (rmcp alone would answer 415).
    #[error("Parse error: the body is not valid JSON ({0})")]
    NotJson(serde_json::Error),
    /// 401 with a `WWW-Authenticate` challenge and an OAuth error body.
    #[error("{description}")]
    Unauthorized {
        description: Cow<'static, str>,
        challenge: String,
    },
    /// 401 without a body: a request reached a layer that needs its caller without one (only a
    /// misordered layer stack could do that).
    #[error("the request was not authenticated")]
    Unauthenticated,
    /// 403 `insufficient_scope` with its challenge: the caller may use the tool but its token
    /// lacks the tool's scopes, so the client can step up.
    #[error("{description}")]
    InsufficientScope {
        description: String,
        challenge: String,
    },
    /// 404: an unknown session, or another caller's (told apart from neither, so session ids
    /// cannot be probed).
    #[error("Not Found: Session not found")]
    SessionNotFound,
    /// 400 with JSON-RPC -32600 (id null, so it is not taken for the answer of the request that
    /// holds the id): a request in a session reuses the id of one still in flight.
    #[error(
        "Invalid Request: request id already in use: another request with this id is in flight \
         in this session (JSON-RPC ids must be unique until answered)"
    )]
    RequestIdInUse,
    /// 500 without a body.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// 401 on a browser route (the status page): no or bad credentials. Challenges `Basic` (so a
    /// browser asks for them) and `Bearer`.
    #[error("Unauthorized: {0}")]
    SignIn(&'static str),
    /// 403 on a browser route: a request that changes something, under the Basic credentials a
    /// browser sends by itself, not from the gateway's own page (cross-site request forgery).
    #[error(
        "Forbidden: {0} (under Basic credentials, only the gateway's own pages may change \
         anything)"
    )]
    CrossSite(&'static str),
    /// 403 on a browser route: the caller may not see what it asked for.
    #[error("Forbidden: {0}")]
    NotForCaller(&'static str),
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        match self {
            Rejection::HostNotAllowed | Rejection::OriginNotAllowed => {
                (StatusCode::FORBIDDEN, self.to_string()).into_response()
            }
            Rejection::TooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, self.to_string()).into_response()
            }
            Rejection::BodyTimeout { .. } => {
                (StatusCode::REQUEST_TIMEOUT, self.to_string()).into_response()
            }
            Rejection::TooManySessions(_) | Rejection::TooManyStreams(_) => {
                let mut response =
                    (StatusCode::SERVICE_UNAVAILABLE, self.to_string()).into_response();
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
                response
            }
            Rejection::BodyUnreadable(_) => {
                (StatusCode::BAD_REQUEST, self.to_string()).into_response()
            }
            Rejection::NotJson(_) => {
                let error = serde_json::json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": self.to_string()}});
                (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
            }
            Rejection::RequestIdInUse => {
                let error = serde_json::json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32600, "message": self.to_string()}});
                (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
            }
            Rejection::Unauthorized {
                description,
                challenge,
            } => challenge_response(
                StatusCode::UNAUTHORIZED,
                "invalid_token",
                &description,
                &challenge,
                "Bearer",
            ),
            Rejection::Unauthenticated => StatusCode::UNAUTHORIZED.into_response(),
            Rejection::InsufficientScope {
                description,
                challenge,
            } => challenge_response(
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                &description,
                &challenge,
                "Bearer error=\"insufficient_scope\"",
            ),
            Rejection::SessionNotFound => (StatusCode::NOT_FOUND, self.to_string()).into_response(),
            Rejection::SignIn(_) => {
                let mut response = (StatusCode::UNAUTHORIZED, self.to_string()).into_response();
                let headers = response.headers_mut();
                headers.append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(BASIC_CHALLENGE),
                );
                headers.append(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            Rejection::CrossSite(_) | Rejection::NotForCaller(_) => {
                (StatusCode::FORBIDDEN, self.to_string()).into_response()
            }
            Rejection::Internal(what) => {
                tracing::error!("request answered 500: {what}");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: each refusal keeps the status, content type and body the layers answered with
    /// before they shared this type (the integration tests pin the rest end to end).
    #[tokio::test]
    async fn refusals_answer_as_before() {
        async fn parts(r: Rejection) -> (StatusCode, Option<String>, Option<String>, String) {
            let response = r.into_response();
            let header = |name| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
                    .map(str::to_string)
            };
            let (status, content_type, challenge) = (
                response.status(),
                header(header::CONTENT_TYPE),
                header(header::WWW_AUTHENTICATE),
            );
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            (status, content_type, challenge, body)
        }
        let text = Some("text/plain; charset=utf-8".to_string());
        assert_eq!(
            parts(Rejection::TooLarge { limit: 10 }).await,
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                text.clone(),
                None,
                "Payload Too Large: the request body exceeds max_request_bytes (10 bytes)"
                    .to_string()
            )
        );
        assert_eq!(
            parts(Rejection::HostNotAllowed).await,
            (
                StatusCode::FORBIDDEN,
                text.clone(),
                None,
                "Forbidden: Host header is not allowed".to_string()
            )
        );
        let (status, content_type, challenge, body) = parts(Rejection::Unauthorized {
            description: "no".into(),
            challenge: "Bearer\n".to_string(),
        })
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(content_type.as_deref(), Some("application/json"));
        assert_eq!(
            challenge.as_deref(),
            Some("Bearer"),
            "the fallback challenge"
        );
        assert_eq!(
            body,
            r#"{"error":"invalid_token","error_description":"no"}"#
        );
        let (status, _, _, body) = parts(Rejection::NotJson(
            serde_json::from_str::<serde_json::Value>("{").expect_err("not JSON"),
        ))
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            body.contains("-32700") && body.contains("Parse error"),
            "{body}"
        );
        assert_eq!(
            parts(Rejection::Internal("x")).await,
            (StatusCode::INTERNAL_SERVER_ERROR, None, None, String::new())
        );
    }
}
