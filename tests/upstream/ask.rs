//! How the demo's tools ask the client something during a call (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`), in whichever way the call's protocol has:
//! - before 2026-07-28, a request to the client on the session, answered while the call waits;
//! - from 2026-07-28 on (no requests from server to client), multi round-trip requests: the
//!   call ends with an `InputRequiredResult` carrying the request under [`KEY`] and a
//!   `requestState`, and the client calls again with the answer in `inputResponses` and the same
//!   `requestState`, which is checked (a client that does not echo it gets a tool error).
//!
//! `asks_rounds` (2026-07-28 only) asks for a confirmation `rounds` times, one round each, the
//! count carried in `requestState`: how many rounds a client drives.

// Sampling and roots are deprecated by SEP-2577 (2026-07-28) in rmcp, and are still what
// 2025-11-25 clients answer.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock,
    CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult, InputRequest,
    InputRequests, InputRequiredResult, ListRootsRequest, ListRootsResult, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::conformance::wire;

/// `--asks-on-standalone`: in a session, the tools ask on the session's standalone stream
/// (`GET`) rather than on the call's own answer stream, as the conformance suite's reference
/// server at 0.1.16 does (both are allowed before 2026-07-28). Set once, at start.
pub static ON_STANDALONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The key of the one request a tool asks per round.
pub const KEY: &str = "ask";

/// What asking the client came to.
pub enum Asked {
    /// The client's answer, or why there is none (a text for the tool's error).
    Answer(Result<ClientResult, String>),
    /// 2026-07-28: the call ends with this; the client calls again with the answer.
    InputRequired(InputRequiredResult),
}

/// Whether the call came on a protocol without `initialize` (2026-07-28 or later).
pub fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

/// Asks the client `asked` for the call `request` of tool `tool`, as the protocol has it.
pub async fn ask(
    tool: &str,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    asked: ServerRequest,
) -> Asked {
    if !is_modern(context) {
        if ON_STANDALONE.load(std::sync::atomic::Ordering::Relaxed) {
            // rmcp sends a request on the call's stream only from the call's own task.
            let peer = context.peer.clone();
            let sent = tokio::spawn(async move { peer.send_request(asked).await }).await;
            return Asked::Answer(match sent {
                Ok(answer) => answer.map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            });
        }
        return Asked::Answer(
            context
                .peer
                .send_request(asked)
                .await
                .map_err(|error| error.to_string()),
        );
    }
    let state = format!("demo-upstream:{tool}");
    let answer = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(KEY));
    match answer {
        None => Asked::InputRequired(input_required(asked, state)),
        Some(_) if request.request_state.as_deref() != Some(state.as_str()) => Asked::Answer(Err(
            format!("the client did not echo requestState (expected {state:?})"),
        )),
        Some(answer) => Asked::Answer(client_result(&asked, answer.clone())),
    }
}

/// An `InputRequiredResult` with `asked` under [`KEY`] and `state`.
fn input_required(asked: ServerRequest, state: String) -> InputRequiredResult {
    let request = match asked {
        ServerRequest::CreateMessageRequest(r) => InputRequest::CreateMessage(r),
        ServerRequest::ElicitRequest(r) => InputRequest::Elicitation(r),
        ServerRequest::ListRootsRequest(r) => InputRequest::ListRoots(r),
        // The demo asks nothing else; a state-only result makes the client call again.
        _ => return InputRequiredResult::from_request_state(state),
    };
    let mut requests = InputRequests::new();
    requests.insert(KEY.to_string(), request);
    InputRequiredResult::new(Some(requests), Some(state))
}

/// The client's answer in `inputResponses`, read as the result of what was asked.
fn client_result(asked: &ServerRequest, answer: Value) -> Result<ClientResult, String> {
    let read = |e: serde_json::Error| format!("the client's input response is malformed: {e}");
    Ok(match asked {
        ServerRequest::CreateMessageRequest(_) => ClientResult::CreateMessageResult(Box::new(
            serde_json::from_value::<CreateMessageResult>(answer).map_err(read)?,
        )),
        ServerRequest::ElicitRequest(_) => ClientResult::ElicitResult(
            serde_json::from_value::<ElicitResult>(answer).map_err(read)?,
        ),
        ServerRequest::ListRootsRequest(_) => ClientResult::ListRootsResult(
            serde_json::from_value::<ListRootsResult>(answer).map_err(read)?,
        ),
        _ => return Err("the demo asked nothing of that kind".into()),
    })
}

/// `sampling/createMessage` with `params` (wire form).
pub fn sampling_request(params: Value) -> Result<ServerRequest, ErrorData> {
    Ok(ServerRequest::CreateMessageRequest(
        CreateMessageRequest::new(wire(params)?),
    ))
}

/// `elicitation/create` with `params` (wire form).
pub fn elicitation_request(params: Value) -> Result<ServerRequest, ErrorData> {
    Ok(ServerRequest::ElicitRequest(ElicitRequest::new(wire(
        params,
    )?)))
}

/// `roots/list`.
pub fn roots_request() -> ServerRequest {
    ServerRequest::ListRootsRequest(ListRootsRequest {
        method: Default::default(),
        extensions: Default::default(),
    })
}

/// `asks_rounds`: on 2026-07-28, asks the client to confirm round 1, then round 2, ... up to
/// `rounds` (one `elicitation/create` each, the rounds done so far in `requestState`), then
/// answers with every confirmation's content. Before 2026-07-28, a tool error.
pub fn rounds(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    rounds: u64,
) -> Result<CallToolResponse, ErrorData> {
    if !is_modern(context) {
        return Ok(error(
            "asks_rounds needs MCP 2026-07-28 (multi round-trip requests)",
        ));
    }
    // The state: the answers so far, as a JSON array (the demo trusts its client; a real
    // server would protect it, see rmcp's `RequestStateCodec`).
    let mut answers: Vec<Value> = match request.request_state.as_deref() {
        None => Vec::new(),
        Some(state) => match serde_json::from_str(state) {
            Ok(answers) => answers,
            Err(_) => return Ok(error("asks_rounds: requestState is not the one it sent")),
        },
    };
    if let Some(answer) = request
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(KEY))
    {
        answers.push(answer.get("content").cloned().unwrap_or(Value::Null));
    }
    if answers.len() as u64 >= rounds {
        return Ok(CallToolResult::structured(json!({"answers": answers})).into());
    }
    let round = answers.len() + 1;
    let asked = elicitation_request(json!({
        "mode": "form",
        "message": format!("Confirm round {round} of {rounds}"),
        "requestedSchema": {
            "type": "object",
            "properties": {"username": {"type": "string"}, "email": {"type": "string"}}
        }
    }))?;
    let state = serde_json::to_string(&answers)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(input_required(asked, state).into())
}

fn error(text: &str) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}
