//! A `tools/call` sent through rmcp's client ([`Peer`]): every call to a stdio upstream, and
//! the calls the forwarder declines on an HTTP one.
//!
//! On a 2026-07-28 connection the call says its log level in its own `_meta` (there is no
//! `logging/setLevel`; rmcp adds the protocol version and the client's identity itself), and an
//! upstream that needs the client's input answers with an `InputRequiredResult`: the call is
//! sent again with the calling client's answers, as the forwarder does (`mrtr`, same bounds),
//! within the attempt's timeout. Each round is a request of its own: its progress goes to the
//! client, the upstream's requests and logs are told to be its call's (`inflight`), and a round
//! given up on (the client cancelled, or a timeout) is cancelled upstream with
//! `notifications/cancelled`, which a stdio upstream gets on either protocol.

use std::sync::Arc;

use rmcp::RoleClient;
#[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28, whose upstreams log
use rmcp::model::LoggingLevel;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};

use super::{CallError, Upstream, call_relay, inflight, listen, mrtr};

impl Upstream {
    /// Sends the call on `peer` until the upstream answers it with a result (or an error),
    /// answering its `InputRequiredResult`s on a 2026-07-28 connection. `relay` is the client
    /// behind the call (none on the gateway's direct path: an upstream's questions then end
    /// the call with a tool error saying so).
    pub(super) async fn call_by_peer(
        &self,
        peer: &Peer<RoleClient>,
        mut params: CallToolRequestParams,
        relay: Option<&Arc<call_relay::CallRelay>>,
        entered: &inflight::Entered<'_>,
    ) -> Result<CallToolResult, CallError> {
        let modern = listen::is_modern(peer);
        if modern {
            ask_for_every_log(&mut params);
        }
        let mut round = 0;
        loop {
            // A legacy upstream has no further rounds: its call takes the parameters.
            let sent = if modern {
                params.clone()
            } else {
                std::mem::take(&mut params)
            };
            let answer = match relay {
                Some(relay) => Box::pin(self.round_relayed(peer, sent, relay, entered)).await,
                // Boxed: rmcp's request future is large. Cancelled upstream when dropped.
                None => Box::pin(peer.call_tool_once(sent)).await,
            };
            let required = match answer {
                Ok(CallToolResponse::Complete(result)) => return Ok(result),
                Ok(CallToolResponse::InputRequired(required)) if modern => required,
                Ok(_) | Err(ServiceError::UnexpectedResponse) => {
                    return Err(CallError::Malformed(self.name.clone()));
                }
                Err(ServiceError::McpError(e)) => return Err(CallError::Protocol(e)),
                Err(e) => {
                    // The transport's own text names rmcp internals: log it, answer plainly.
                    tracing::warn!(upstream = %self.name, error = %e, "call failed: connection lost");
                    return Err(CallError::ConnectionLost(self.name.clone()));
                }
            };
            let Some(required) = mrtr::InputRequired::of(&required) else {
                return Err(CallError::Malformed(self.name.clone()));
            };
            round += 1;
            if let Err(failed) =
                mrtr::answer_round(&self.name, required, round, relay.cloned(), &mut params).await
            {
                return Ok(failed);
            }
        }
    }

    /// One round with a client behind it (`relay`): rmcp gives the request a progress token of
    /// its own, which is routed to the client for as long as the round runs when it asked for
    /// progress, and the request's id is noted (`entered`) so that requests the upstream sends
    /// on its answer stream reach the client. A round given up on is cancelled upstream, as
    /// rmcp's `call_tool` would.
    async fn round_relayed(
        &self,
        peer: &Peer<RoleClient>,
        params: CallToolRequestParams,
        relay: &Arc<call_relay::CallRelay>,
        entered: &inflight::Entered<'_>,
    ) -> Result<CallToolResponse, ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        entered.sent_as(handle.id.clone());
        let _route = relay.progress_token.is_some().then(|| {
            self.progress
                .route(handle.progress_token.clone(), relay.clone())
        });
        let mut cancel = call_relay::CancelUnlessAnswered::new(peer.clone(), handle.id.clone());
        let answer = handle.await_response().await;
        cancel.answered();
        // rmcp hands each notification to a task of its own, so progress the upstream sent
        // just before its answer may still be on its way: give those tasks a turn before the
        // route goes (progress after the answer is dropped, as MCP wants).
        tokio::task::yield_now().await;
        match answer? {
            ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
            ServerResult::InputRequiredResult(required) => {
                Ok(CallToolResponse::InputRequired(required))
            }
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }
}

/// Asks for every level of log message in the call's own `_meta`, as a legacy upstream is asked
/// once per connection (`call_relay::ask_for_every_log`): each client hears only what its own level
/// lets through.
#[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28, whose upstreams log
fn ask_for_every_log(params: &mut CallToolRequestParams) {
    params
        .meta
        .get_or_insert_with(RequestMetaObject::new)
        .set_log_level(LoggingLevel::Debug);
}
