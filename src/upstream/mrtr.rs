//! Multi round-trip requests (MRTR) from a 2026-07-28 upstream.
//!
//! Such an upstream sends no requests of its own to the client: when a `tools/call` needs
//! something only the client has (an elicitation, a sampled message, the roots), it answers
//! with an `InputRequiredResult` (`inputRequests`, `requestState`), and the client sends the
//! call again with `inputResponses` and the same `requestState`. The gateway is that client:
//! the forwarder ([`super::forward`]) asks each request of the calling client through the same
//! relay a legacy upstream's requests take (`call_relay::ask`: the contract's `relay:` policy, the
//! client's capabilities, the `requestedSchema` check), and sends the call again, at most
//! [`MAX_ROUNDS`] times, within the call's own timeout (the rounds run inside the attempt).
//!
//! A request the client does not answer (refused by the contract, not declared by the client,
//! no client behind the call, an error from the client) ends the call with a tool error saying
//! which and why. MRTR gives no way to send the upstream an error in place of a response, and a
//! server missing a response asks for it again (2026-07-28, "Error Handling"): sending the call
//! without it would only ask the user again, round after round.
//!
//! The upstream's `requestState` only ever goes back to the upstream: never to the client, nor
//! into the log; the client's own MRTR fields are removed before each attempt (`clear`, in
//! `Upstream::attempt`: they are the gateway's answers to give, not the client's).

use std::collections::BTreeMap;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, InputRequiredResult, InputResponses,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::call_relay::{self, CallRelay};

/// The most `InputRequiredResult`s one call may get before it fails (rmcp's own client allows
/// 10; a gateway in the middle allows a little less of its client's patience).
pub const MAX_ROUNDS: u32 = 8;

/// The most input requests one round may carry: each may become a question to the user.
pub const MAX_REQUESTS_PER_ROUND: usize = 16;

/// An upstream's `InputRequiredResult`, read as raw JSON: the requests' parameters go to the
/// client as the upstream wrote them.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequired {
    #[serde(default)]
    input_requests: Option<BTreeMap<String, InputRequest>>,
    #[serde(default)]
    request_state: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InputRequest {
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

impl InputRequired {
    /// `result` as an `InputRequiredResult`, if it says it is one (`resultType`).
    pub fn read(result: &str) -> Option<InputRequired> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Tagged {
            result_type: String,
            #[serde(flatten)]
            required: InputRequired,
        }
        match serde_json::from_str::<Tagged>(result) {
            Ok(tagged) if tagged.result_type == "input_required" => Some(tagged.required),
            _ => None,
        }
    }

    /// The `InputRequiredResult` rmcp read (a call sent through its client: `by_peer`), as
    /// the forwarder reads one from the wire. `None` if it does not read back, which rmcp's
    /// own reading rules out.
    pub fn of(result: &InputRequiredResult) -> Option<InputRequired> {
        let json = serde_json::to_string(result).ok()?;
        InputRequired::read(&json)
    }
}

/// Removes what a client put in the MRTR fields of its call: only the gateway answers the
/// upstream's input requests.
pub fn clear(params: &mut CallToolRequestParams) {
    params.input_responses = None;
    params.request_state = None;
}

/// Answers one round: asks the calling client (`call`) each of the upstream's requests and
/// sets up `params` for the next round (`inputResponses`, the upstream's `requestState`). A
/// tool error when a request goes unanswered, or the call has had its [`MAX_ROUNDS`].
pub async fn answer_round(
    upstream: &str,
    required: InputRequired,
    round: u32,
    call: Option<std::sync::Arc<CallRelay>>,
    params: &mut CallToolRequestParams,
) -> Result<(), CallToolResult> {
    if round > MAX_ROUNDS {
        return Err(tool_error(format!(
            "upstream {upstream} still asked for more input after {MAX_ROUNDS} rounds: the call \
             was given up"
        )));
    }
    let requests = required.input_requests.unwrap_or_default();
    if requests.len() > MAX_REQUESTS_PER_ROUND {
        return Err(tool_error(format!(
            "upstream {upstream} asked {} questions at once to complete this call (the gateway \
             relays at most {MAX_REQUESTS_PER_ROUND})",
            requests.len()
        )));
    }
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let method = request.method;
        if !call_relay::ASKS.contains(&method.as_str()) {
            return Err(tool_error(format!(
                "upstream {upstream} asked for `{}` to complete this call, which is not a \
                 request a client answers",
                crate::policy::names::shown_tool(&method)
            )));
        }
        let params = request.params.unwrap_or_else(|| json!({}));
        match call_relay::ask(call.clone(), &method, params).await {
            Ok(response) => {
                responses.insert(key, response);
            }
            Err(error) => {
                return Err(tool_error(format!(
                    "upstream {upstream} needs an answer to {method} to complete this call, and \
                     got none: {}",
                    error.message
                )));
            }
        }
    }
    params.input_responses = (!responses.is_empty()).then_some(responses);
    params.request_state = required.request_state;
    Ok(())
}

fn tool_error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: an `InputRequiredResult` is told from a tool result by its `resultType` only,
    /// with its requests' parameters as the upstream wrote them.
    #[test]
    fn an_input_required_result_is_read_by_its_result_type() {
        let required = InputRequired::read(
            r#"{"resultType":"input_required","requestState":"s1","inputRequests":{"a":{"method":"roots/list"}}}"#,
        )
        .expect("input required");
        assert_eq!(required.request_state.as_deref(), Some("s1"));
        let requests = required.input_requests.expect("requests");
        assert_eq!(requests["a"].method, "roots/list");
        assert!(InputRequired::read(r#"{"resultType":"complete","content":[]}"#).is_none());
        assert!(InputRequired::read(r#"{"content":[]}"#).is_none());
    }

    /// Proves: a request with no client behind the call, one that is not a client's to answer,
    /// too many rounds and too many requests each end the call with a tool error, and the
    /// upstream's `requestState` goes nowhere but `params`.
    #[tokio::test]
    async fn unanswerable_rounds_end_in_a_tool_error() {
        let read = |text: &str| InputRequired::read(text).expect("input required");
        let mut params = CallToolRequestParams::new("t");
        let unanswered = answer_round(
            "demo",
            read(
                r#"{"resultType":"input_required","requestState":"secret-state","inputRequests":{"a":{"method":"roots/list"}}}"#,
            ),
            1,
            None,
            &mut params,
        )
        .await
        .expect_err("no client");
        let text = serde_json::to_string(&unanswered).expect("json");
        assert!(text.contains("roots/list is not relayed"), "{text}");
        assert!(!text.contains("secret-state"), "{text}");
        assert!(params.request_state.is_none());

        let odd =
            r#"{"resultType":"input_required","inputRequests":{"a":{"method":"tools/call"}}}"#;
        let refused = answer_round("demo", read(odd), 1, None, &mut params)
            .await
            .expect_err("not an ask");
        assert!(
            serde_json::to_string(&refused)
                .expect("json")
                .contains("not a request a client answers")
        );

        let state_only = r#"{"resultType":"input_required","requestState":"again"}"#;
        answer_round("demo", read(state_only), MAX_ROUNDS, None, &mut params)
            .await
            .expect("a round with nothing to ask");
        assert_eq!(params.request_state.as_deref(), Some("again"));
        assert!(params.input_responses.is_none());
        let over = answer_round("demo", read(state_only), MAX_ROUNDS + 1, None, &mut params)
            .await
            .expect_err("too many rounds");
        assert!(
            serde_json::to_string(&over)
                .expect("json")
                .contains("after 8 rounds")
        );

        let many: serde_json::Map<String, Value> = (0..=MAX_REQUESTS_PER_ROUND)
            .map(|n| (format!("r{n}"), json!({"method": "roots/list"})))
            .collect();
        let many = json!({"resultType": "input_required", "inputRequests": many}).to_string();
        let flood = answer_round("demo", read(&many), 1, None, &mut params)
            .await
            .expect_err("too many requests");
        assert!(
            serde_json::to_string(&flood)
                .expect("json")
                .contains("questions at once")
        );
    }
}
