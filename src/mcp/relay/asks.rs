//! Requests an upstream makes of the client whose call it serves (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`), relayed to that client on the call's own stream, and the
//! client's answer back.
//!
//! A request is relayed only when all of these hold, else the upstream gets a JSON-RPC error
//! naming the reason (never an answer the user did not give):
//! - the tool's contract allows it (`relay:`, all allowed by default);
//! - the client declared the capability (`sampling`, `elicitation` with the request's mode,
//!   `roots`): at `initialize` in a session, in the request's `_meta` on a stateless one;
//! - the call is still running (a request left unanswered when the call ends is an error);
//! - fewer than [`MAX_ASKING`] of the call's requests are waiting for the client (an upstream
//!   must not flood a client's user through the gateway).
//!
//! In a session the request goes to the client on the call's own stream ([`Way::Stream`]). A
//! 2026-07-28 stateless call has no such stream: the call is parked and the request travels
//! back as an `InputRequiredResult` ([`Way::Mrtr`], `parked`).
//!
//! An elicitation the user accepted is checked against the request's `requestedSchema` before
//! it goes upstream: a client that answers outside it is an error upstream, as the tool's own
//! arguments would be.

// Sampling and roots are deprecated by SEP-2577 (2026-07-28); 2025 revisions have them.
#![allow(deprecated)]

use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, CreateMessageRequestParams, ElicitRequest,
    ElicitRequestParams, ErrorCode, ErrorData, GetExtensions, ListRootsRequest, RequestId,
    ServerRequest,
};
use rmcp::service::{OriginatingRequestId, Peer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::contract::relay_policy::RelayPolicy;
use crate::mrtr::parked::{Question, Questions};
use crate::upstream::call_relay::{self, Asked};

/// Requests of one call waiting for the client at once; more are refused.
pub const MAX_ASKING: usize = 4;

/// How a call's client can be asked.
pub enum Way {
    /// On the call's own stream in its session, through rmcp's peer of the request.
    Stream {
        peer: Peer<RoleServer>,
        /// The client's `tools/call`: requests ride its stream.
        origin: RequestId,
    },
    /// A 2026-07-28 stateless call: parked, the request sent back as MRTR (`parked`).
    Mrtr(Questions),
    /// Not at all (why not).
    Not(&'static str),
}

/// What the gateway needs to ask one call's client.
pub struct Asker {
    pub way: Way,
    /// What the client declared it can answer.
    pub capabilities: Option<ClientCapabilities>,
    /// The exposed tool's name and its contract's `relay:`.
    pub tool: String,
    pub policy: RelayPolicy,
    /// Cancelled when the call has its answer (a parked call has its answer only at its end).
    pub ended: CancellationToken,
    /// A permit per request waiting for the client ([`MAX_ASKING`]).
    pub asking: std::sync::Arc<tokio::sync::Semaphore>,
}

/// A request ready to go to the client.
enum Prepared {
    Stream(Box<(Peer<RoleServer>, ServerRequest)>),
    Mrtr(Questions),
}

impl Asker {
    /// Relays `method` with `params` to the client (see the module's documentation).
    pub fn ask(&self, method: &str, params: Value) -> Asked {
        let prepared = self.prepare(method, &params);
        let permit = self.asking.clone().try_acquire_owned();
        let (ended, method) = (self.ended.clone(), method.to_string());
        Box::pin(async move {
            let prepared = prepared?;
            let Ok(_permit) = permit else {
                return Err(refused(
                    &method,
                    &format!("{MAX_ASKING} requests of this call already wait for the client"),
                ));
            };
            let answer = match prepared {
                Prepared::Stream(prepared) => {
                    let (peer, request) = *prepared;
                    let answer = tokio::select! {
                        answer = peer.send_request(request) => answer,
                        () = ended.cancelled() => return Err(refused(&method, "the call ended before the client answered")),
                    };
                    let answer = answer.map_err(|error| match error {
                        rmcp::service::ServiceError::McpError(error) => error,
                        other => refused(&method, &format!("the client did not answer: {other}")),
                    })?;
                    serde_json::to_value(&answer).map_err(|error| {
                        ErrorData::internal_error(
                            format!("the client's answer to {method}: {error}"),
                            None,
                        )
                    })?
                }
                // Parked: the record checks the answer as it hands it over (`parked`).
                Prepared::Mrtr(questions) => {
                    let (answer, answered) = tokio::sync::oneshot::channel();
                    let question = Question {
                        method: method.clone(),
                        params,
                        answer,
                    };
                    if questions.send(question).await.is_err() {
                        return Err(refused(
                            &method,
                            "the call ended before the client answered",
                        ));
                    }
                    return answered.await.unwrap_or_else(|_| {
                        Err(refused(
                            &method,
                            "the client did not come back with an answer in time",
                        ))
                    });
                }
            };
            if method == "elicitation/create" {
                call_relay::check_elicitation(&params, &answer)?;
            }
            Ok(answer)
        })
    }

    /// The request to send, or why it is refused.
    fn prepare(&self, method: &str, params: &Value) -> Result<Prepared, ErrorData> {
        if !self.policy.allows(method) {
            return Err(refused(
                method,
                &format!("the contract of tool `{}` does not relay it", self.tool),
            ));
        }
        let capabilities = self.capabilities.as_ref();
        let declared = |what: &str| {
            capabilities
                .and_then(|c| serde_json::to_value(c).ok())
                .is_some_and(|c| c.get(what).is_some_and(|v| !v.is_null()))
        };
        let malformed = |error: serde_json::Error| {
            ErrorData::invalid_params(format!("{method} with malformed params: {error}"), None)
        };
        let mut request = match method {
            "sampling/createMessage" if declared("sampling") => {
                let params: CreateMessageRequestParams =
                    serde_json::from_value(params.clone()).map_err(malformed)?;
                ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params))
            }
            "elicitation/create" if declared("elicitation") => {
                let params: ElicitRequestParams =
                    serde_json::from_value(params.clone()).map_err(malformed)?;
                if !elicitation_mode_declared(capabilities, &params) {
                    return Err(not_declared(method, "elicitation in this mode"));
                }
                ServerRequest::ElicitRequest(ElicitRequest::new(params))
            }
            "roots/list" if declared("roots") => {
                ServerRequest::ListRootsRequest(ListRootsRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                })
            }
            "sampling/createMessage" => return Err(not_declared(method, "sampling")),
            "elicitation/create" => return Err(not_declared(method, "elicitation")),
            "roots/list" => return Err(not_declared(method, "roots")),
            _ => return Err(crate::upstream::call_relay::not_relayed(method)),
        };
        match &self.way {
            Way::Stream { peer, origin } => {
                // On the call's own stream, not the session's standalone one.
                request
                    .extensions_mut()
                    .insert(OriginatingRequestId(origin.clone()));
                Ok(Prepared::Stream(Box::new((peer.clone(), request))))
            }
            Way::Mrtr(questions) => Ok(Prepared::Mrtr(questions.clone())),
            Way::Not(why) => Err(refused(method, why)),
        }
    }
}

/// Whether the client declared the elicitation mode `params` uses: a bare `elicitation: {}` is
/// form mode only; URL mode must be declared as `url`.
fn elicitation_mode_declared(
    capabilities: Option<&rmcp::model::ClientCapabilities>,
    params: &ElicitRequestParams,
) -> bool {
    let Some(elicitation) = capabilities.and_then(|c| c.elicitation.as_ref()) else {
        return false;
    };
    match params {
        ElicitRequestParams::UrlElicitationParams { .. } => elicitation.url.is_some(),
        _ => elicitation.form.is_some() || elicitation.url.is_none(),
    }
}

/// The error for a request refused for `why`.
fn refused(method: &str, why: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("{method} is not relayed: {why}"),
        None,
    )
}

fn not_declared(method: &str, capability: &str) -> ErrorData {
    refused(
        method,
        &format!("the calling client did not declare the {capability} capability"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> Value {
        json!({"mode": "form", "message": "who?", "requestedSchema": {
            "type": "object",
            "properties": {"email": {"type": "string", "format": "email"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["email"]
        }})
    }

    /// Proves: an accepted answer inside the requested schema passes; one missing a required
    /// field, of the wrong type or format, is refused with the path and rule; a declined or
    /// cancelled answer carries nothing to check.
    #[test]
    fn accepted_elicitations_are_checked_against_the_requested_schema() {
        let ok = json!({"action": "accept", "content": {"email": "a@example.com", "age": 3}});
        assert!(call_relay::check_elicitation(&form(), &ok).is_ok());
        for bad in [
            json!({"action": "accept", "content": {"age": 3}}),
            json!({"action": "accept", "content": {"email": "a@example.com", "age": -1}}),
            json!({"action": "accept", "content": {"email": "not an address"}}),
            json!({"action": "accept"}),
        ] {
            let error =
                call_relay::check_elicitation(&form(), &bad).expect_err("outside the schema");
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert!(
                error.message.contains("requestedSchema"),
                "{}",
                error.message
            );
        }
        for other in ["decline", "cancel"] {
            assert!(call_relay::check_elicitation(&form(), &json!({"action": other})).is_ok());
        }
    }
}
