use super::*;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

fn binding(arguments_digest: &str) -> Binding {
    Binding {
        caller: "alice".into(),
        tool: "ask".into(),
        arguments_digest: arguments_digest.into(),
    }
}

/// A call that asks its client `method` once through `questions`, and answers with the text of
/// what came back (or of the error).
fn asking_call(questions: Questions, method: &'static str) -> Call {
    Box::pin(async move {
        let (answer, answered) = oneshot::channel();
        let params = json!({"message": "who?", "requestedSchema": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}});
        let question = Question {
            method: method.into(),
            params,
            answer,
        };
        if questions.send(question).await.is_err() {
            return Err(ErrorData::internal_error("no one to ask", None));
        }
        let text = match answered.await {
            Ok(Ok(value)) => value.to_string(),
            Ok(Err(error)) => format!("error: {}", error.message),
            Err(_) => "dropped".to_string(),
        };
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text),
        ])))
    })
}

fn text_of(response: Response) -> String {
    match response {
        Ok(CallToolResponse::Complete(result)) => result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect(),
        other => panic!("not a complete result: {other:?}"),
    }
}

/// Runs `call` bound to `binding("a")`, its questions coming on `receiver`.
async fn run_call(
    parked: &ParkedCalls,
    call: Call,
    receiver: mpsc::Receiver<Question>,
) -> Response {
    parked
        .run(
            binding("a"),
            call,
            receiver,
            CancellationToken::new(),
            None,
            Duration::from_secs(5),
        )
        .await
}

/// Runs a call that asks an elicitation, bound to `binding("a")`: its question.
async fn park_asking(parked: &ParkedCalls) -> InputRequiredResult {
    let (sender, receiver) = questions();
    let call = asking_call(sender, "elicitation/create");
    let response = run_call(parked, call, receiver).await;
    match response {
        Ok(CallToolResponse::InputRequired(asked)) => asked,
        other => panic!("not a question: {other:?}"),
    }
}

/// Proves: a call that asks nothing is answered with its result and parks nothing.
#[tokio::test]
async fn a_call_that_asks_nothing_is_answered_as_it_is() {
    let parked = ParkedCalls::default();
    let (_questions, receiver) = questions();
    let call: Call = Box::pin(async {
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("done"),
        ])))
    });
    let answer = run_call(&parked, call, receiver).await;
    assert_eq!(text_of(answer), "done");
    assert!(parked.lock().is_empty());
}

/// Proves: a call whose upstream asks is answered with the question under a fresh state; the
/// answer, sent with that state for the same binding, reaches the waiting request (checked
/// against its `requestedSchema`), and the resumed request gets the call's result. A stranger's
/// binding is refused without costing the owner the call, and the state is good once.
#[tokio::test]
async fn a_parked_call_goes_on_with_its_own_clients_answer_once() {
    let parked = ParkedCalls::default();
    let question = park_asking(&parked).await;
    let state = question.request_state.clone().expect("a state");
    let requests = question.input_requests.expect("requests");
    let request = serde_json::to_value(&requests["upstream-1"]).expect("serializes");
    assert_eq!(request["method"], "elicitation/create", "{request}");

    let responses: InputResponses = [(
        "upstream-1".to_string(),
        json!({"action": "accept", "content": {"name": "ada"}}),
    )]
    .into_iter()
    .collect();
    let stranger = parked
        .resume(&state, &binding("other"), Some(responses.clone()), None)
        .await;
    assert_eq!(
        stranger.expect_err("refused").message,
        unknown_state().message
    );
    let answer = parked
        .resume(&state, &binding("a"), Some(responses.clone()), None)
        .await;
    assert!(text_of(answer).contains("\"ada\""));
    let replay = parked
        .resume(&state, &binding("a"), Some(responses), None)
        .await;
    assert!(replay.is_err(), "used once");
}

/// Proves: an answer that leaves out the request's response, or answers outside its
/// `requestedSchema`, or is no result of the request's kind, goes upstream as an error, never
/// as an answer.
#[tokio::test]
async fn missing_or_malformed_answers_are_errors_upstream() {
    for (responses, expected) in [
        (json!({}), "without a response"),
        (
            json!({"upstream-1": {"action": "accept", "content": {"name": 5}}}),
            "outside the requestedSchema",
        ),
        (json!({"upstream-1": {"roots": "none"}}), "malformed"),
    ] {
        let parked = ParkedCalls::default();
        let question = park_asking(&parked).await;
        let state = question.request_state.expect("a state");
        let responses: InputResponses = serde_json::from_value(responses).expect("responses parse");
        let answer = parked
            .resume(&state, &binding("a"), Some(responses), None)
            .await;
        let text = text_of(answer);
        assert!(
            text.starts_with("error:") && text.contains(expected),
            "{text}"
        );
    }
}
