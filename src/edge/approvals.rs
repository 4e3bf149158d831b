//! The approvals API: `GET /approvals` lists the calls held for approvers, `POST
//! /approvals/{id}` with `{"decision": "approve"|"deny", "reason": "…"}` decides one.
//! `narrowgate approvals` is a client of it.
//!
//! Both need an approver's credentials (`Authorization: Bearer`, an API key or an OAuth token,
//! as on the MCP endpoint) whose caller is listed in `approvers`, by name or by `role:NAME`.
//! Without credentials: 401; anyone else: 403; nobody may decide their own call (403); an unknown
//! id: 404; a decided one: 409.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::approvals::{DecideError, Decision as DecisionKind};
use crate::policy::{AuthError, Caller};
use crate::runtime::Version;
use crate::runtime::live::Live;

/// The body of `POST /approvals/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    decision: DecisionKind,
    #[serde(default)]
    reason: Option<String>,
}

/// `GET /approvals`: the pending approvals, oldest first.
pub async fn list(State(live): State<Arc<Live>>, headers: HeaderMap) -> Response {
    let gateway = live.current();
    if let Err(refusal) = approver(&gateway, &headers).await {
        return refusal;
    }
    match gateway.kept.approvals.list().await {
        Ok(listed) => Json(listed).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// `POST /approvals/{id}`: an approver's decision.
pub async fn decide(
    State(live): State<Arc<Live>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let gateway = live.current();
    let approver = match approver(&gateway, &headers).await {
        Ok(approver) => approver,
        Err(refusal) => return refusal,
    };
    let decision: Decision = match serde_json::from_slice(&body) {
        Ok(decision) => decision,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "the body must be {{\"decision\": \"approve\"|\"deny\", \"reason\": \"…\"}}: {e}"
                ),
            );
        }
    };
    let decided = gateway
        .kept
        .approvals
        .decide(&id, &approver.name, decision.decision, decision.reason)
        .await;
    match decided {
        Ok(decided) => Json(decided).into_response(),
        Err(e) => {
            let status = match e {
                DecideError::Unknown(_) => StatusCode::NOT_FOUND,
                DecideError::OwnCall(_) => StatusCode::FORBIDDEN,
                DecideError::AlreadyDecided(_) => StatusCode::CONFLICT,
                DecideError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            error(status, e.to_string())
        }
    }
}

/// The caller behind the request's credentials, if it is an approver; else the 401 or 403 to
/// answer. Public for any other page that decides approvals.
pub async fn approver(gateway: &Version, headers: &HeaderMap) -> Result<Arc<Caller>, Response> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // The anonymous caller decides nothing: an approval needs someone to answer for it.
    let Some(authorization) = authorization else {
        return Err(unauthorized(AuthError::Missing));
    };
    let caller = gateway
        .authenticator
        .authenticate(Some(authorization))
        .await
        .map_err(unauthorized)?;
    if !caller.is_approver(&gateway.config.approvers) {
        return Err(error(
            StatusCode::FORBIDDEN,
            format!(
                "`{}` is not an approver (the configuration's `approvers` lists who is)",
                caller.name
            ),
        ));
    }
    Ok(caller)
}

fn unauthorized(e: AuthError) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, e.to_string());
    // A key that was sent but is bad says so, as on the MCP endpoint.
    let challenge = match e {
        AuthError::Missing => header::HeaderValue::from_static("Bearer"),
        _ => header::HeaderValue::from_str(&crate::policy::resource::invalid_token(&e.to_string()))
            .unwrap_or_else(|_| header::HeaderValue::from_static("Bearer")),
    };
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, challenge);
    response
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}
