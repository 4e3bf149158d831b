//! Where both entry paths (rmcp's handler in `server`, and the direct path) hand a `tools/call`
//! to the pipeline: inside its SERVER span, with what the request carries beside its arguments
//! read once (the forwarded `_meta`, the idempotency key, how the call can reach its client),
//! and with the two ways a 2026-07-28 stateless call is answered by a question rather than a
//! result (MRTR): the user's approval (`approvals_step`) and the upstream's own requests of the
//! client (`relay::parked`).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData};
use rmcp::service::Peer;
use tokio_util::sync::CancellationToken;

use crate::approvals::step::{APPROVAL_ID_META, Mrtr, Reach};
use crate::contract::Approval;
use crate::contract::digest::sha256_of;
use crate::mrtr::parked::{self, Binding, Question};
use crate::request::Admitted;
use crate::runtime::Version;
use crate::telemetry::{self, Inbound};
use crate::upstream::call_relay::CallRelay;

/// How a stateless call is parked when its upstream asks the client something
/// (`relay::parked`): the questions its relay sends, the token that cancels it, and this
/// request's own cancellation.
pub struct Parking {
    pub questions: tokio::sync::mpsc::Receiver<Question>,
    pub cancel: CancellationToken,
    pub client_gone: Option<CancellationToken>,
}

/// Answers one `tools/call` inside its SERVER span: for rmcp's handler (`server`), and for the
/// gateway's own direct path (`direct`, which has no peer and never parks).
pub(crate) async fn answer_tools_call(
    gateway: &Arc<Version>,
    request: CallToolRequestParams,
    inbound: Inbound<'_>,
    peer: Option<&Peer<RoleServer>>,
    parking: Option<Parking>,
    relay: Option<Arc<CallRelay>>,
) -> Result<CallToolResponse, ErrorData> {
    // Span names stay a bounded set: a name that is no exposed tool is the client's text.
    let catalog = gateway.catalog();
    let exposed = catalog.exposed(&request.name);
    let tool = exposed.is_some().then(|| request.name.clone());
    let caller = Admitted::of(inbound.parts)
        .ok_or_else(|| ErrorData::invalid_request("request was not admitted", None))
        .and_then(|a| {
            a.caller
                .clone()
                .ok_or_else(|| ErrorData::invalid_request("request is not authenticated", None))
        });
    let protocol = inbound.protocol.clone();
    // The client's own `_meta` keys go upstream (`relay::meta`), bounded.
    let forwarded_meta = crate::mcp::relay::meta::forwarded(inbound.meta);
    let idempotency_key = crate::pipeline::idempotency::key_of(inbound.meta);
    let stateless = protocol.as_ref().is_some_and(|v| !v.has_initialize());
    // Only a tool that asks for approval reaches its client while it runs.
    let reach = match exposed {
        Some(t) if t.contract.approval != Approval::None => Reach {
            peer: peer.cloned(),
            client_gone: Admitted::of(inbound.parts).and_then(|a| a.client_gone.clone()),
            approval_id: inbound
                .meta
                .get(APPROVAL_ID_META)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            // A 2026-07-28 request has no stream for a question: it travels as MRTR.
            mrtr: (t.contract.approval == Approval::User && stateless).then(|| {
                Mrtr::new(
                    inbound
                        .meta
                        .get("io.modelcontextprotocol/clientCapabilities")
                        .and_then(|c| c.get("elicitation"))
                        .is_some(),
                    request.input_responses.clone(),
                    request.request_state.clone(),
                )
            }),
            ui_client: false,
            relay: None,
        },
        _ => Reach::default(),
    };
    let mut reach = reach;
    // The upstream's progress, logs and requests of the client go to this call's client, and
    // go along wherever the call is parked.
    reach.relay = relay;
    if exposed.is_some_and(|t| t.contract.ui.as_ref().is_some_and(|u| u.app_only())) {
        let peer_info = peer.and_then(|p| p.peer_info());
        reach.ui_client = crate::contract::ui::client_declares_ui(
            peer_info.as_ref().map(|i| &i.capabilities),
            inbound.meta,
        );
    }
    // What a call sent again with a state held by another replica is passed on with
    // (`relay::holders`): the client's request id and `_meta` as it sent them.
    let pass_on = (stateless && request.request_state.is_some())
        .then_some(inbound.parts)
        .filter(|parts| {
            parts.is_none_or(|p| !p.headers.contains_key(crate::mrtr::holders::PASSED_ON))
        })
        .map(|parts| (inbound.id.clone(), inbound.meta.clone(), parts));
    // How long a parked call's record is kept: as long as the call may run.
    let lifetime = parking
        .as_ref()
        .and(exposed)
        .map(|t| gateway.longest_run(&t.contract));
    drop(catalog);
    telemetry::serve("tools/call", tool.as_deref(), inbound, async || {
        let caller = caller?;
        let mut request = request;
        request.meta = forwarded_meta?;
        let binding = || Binding {
            caller: caller.name.clone(),
            tool: request.name.to_string(),
            arguments_digest: sha256_of(&serde_json::Value::Object(
                request.arguments.clone().unwrap_or_default(),
            )),
        };
        // A call sent again with the answers to the questions of a call parked here goes on
        // with that call; one parked on another replica is passed on to it. A state that is
        // none of these nor an approval question (which the approval step checks) was never
        // this gateway's: refused, never run as a new call.
        if let Some(state) = request.request_state.as_deref().filter(|_| stateless) {
            if gateway.kept.parked.holds(state) {
                let gone = parking.and_then(|p| p.client_gone);
                // Boxed, like the other rare paths below: every layer above moves this future
                // whole (`direct`'s test of its size).
                return Box::pin(gateway.kept.parked.resume(
                    state,
                    &binding(),
                    request.input_responses.take(),
                    gone,
                ))
                .await;
            }
            if let (Some(holders), Some((id, meta, Some(parts)))) =
                (gateway.kept.parked.holders(), &pass_on)
                && let Some(holder) = Box::pin(holders.holder(state)).await
            {
                let mut params = request.clone();
                params.meta = Some(meta.clone());
                return Box::pin(holders.pass_on(&holder, parts, id, &params)).await;
            }
            if reach.mrtr.is_none() {
                return Err(parked::unknown_state());
            }
        }
        let Some(parking) = parking else {
            return answered(gateway, &caller, request, protocol, idempotency_key, &reach).await;
        };
        let binding = binding();
        let call = {
            let (gateway, caller) = (gateway.clone(), caller.clone());
            let call = async move {
                answered(
                    &gateway,
                    &caller,
                    request,
                    protocol,
                    idempotency_key,
                    &reach,
                )
                .await
            };
            Box::pin(call) as parked::Call
        };
        Box::pin(gateway.kept.parked.run(
            binding,
            call,
            parking.questions,
            parking.cancel,
            parking.client_gone,
            lifetime.unwrap_or_default(),
        ))
        .await
    })
    .await
}

/// The pipeline's answer as the client gets it: its result, or the user's approval question
/// (MRTR).
async fn answered(
    gateway: &Version,
    caller: &crate::policy::Caller,
    request: CallToolRequestParams,
    protocol: Option<rmcp::model::ProtocolVersion>,
    idempotency_key: Result<Option<String>, crate::pipeline::idempotency::BadKey>,
    reach: &Reach,
) -> Result<CallToolResponse, ErrorData> {
    gateway
        .call_tool(caller, request, protocol.as_ref(), idempotency_key, reach)
        .await
}
