//! `--asks-on-stream`: on 2026-07-28, the sampling and elicitation tools ask the client with a
//! request on the call's own answer stream (as a session would), not with an
//! `InputRequiredResult`: the call's answer is an SSE stream whose first event is
//! `sampling/createMessage` or `elicitation/create`, the client's answer comes back as a POST of
//! a JSON-RPC response with that request's id, and the tool's result follows on the stream.
//! Some 2026-07-28 servers still ask this way; the conformance suite's scenarios are written for
//! servers that do.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::conformance::{defaults_form, elicitation_form, enums_form};

/// The largest request read.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// How long the client may take to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The requests asked of clients and not answered yet, by id.
#[derive(Clone, Default)]
pub struct Asked {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>,
    next: Arc<AtomicU64>,
}

impl Asked {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Value>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What one tool asks, and how its answer becomes the tool's text.
struct Question {
    method: &'static str,
    params: Value,
    /// The label of an elicitation's answer (`None`: sampling).
    label: Option<&'static str>,
}

fn question(name: &str, arguments: &Value) -> Option<Question> {
    let elicit = |params, label| Question {
        method: "elicitation/create",
        params,
        label: Some(label),
    };
    Some(match name {
        "test_sampling" => Question {
            method: "sampling/createMessage",
            params: json!({
                "messages": [{"role": "user", "content": {"type": "text",
                    "text": arguments["prompt"].as_str().unwrap_or_default()}}],
                "maxTokens": 100
            }),
            label: None,
        },
        "test_elicitation" => elicit(
            elicitation_form(arguments["message"].as_str().unwrap_or_default()),
            "User response",
        ),
        "test_elicitation_sep1034_defaults" => elicit(defaults_form(), "Elicitation completed"),
        "test_elicitation_sep1330_enums" => elicit(enums_form(), "Elicitation completed"),
        _ => return None,
    })
}

/// The tool's text for the client's `answer` (a JSON-RPC response).
fn answer_text(question: &Question, answer: &Value) -> String {
    let Some(result) = answer.get("result") else {
        return format!("the client refused: {}", answer["error"]);
    };
    match question.label {
        None => format!(
            "LLM response: {}",
            result["content"]["text"].as_str().unwrap_or("(no text)")
        ),
        Some(label) => {
            let action = result["action"].as_str().unwrap_or_default();
            let content = result.get("content").cloned().unwrap_or_else(|| json!({}));
            format!("{label}: action={action}, content={content}")
        }
    }
}

/// Serves the asking tools' 2026-07-28 calls and the client's answers; passes everything else
/// on unchanged.
pub async fn answer(asked: Asked, request: Request, next: Next) -> Response {
    let stateless = request
        .headers()
        .get("mcp-protocol-version")
        .is_some_and(|v| v.as_bytes() >= b"2026-07-28".as_slice());
    if !stateless || request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let message: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    // A client's answer to one of ours.
    if message.get("method").is_none()
        && let Some(id) = message["id"].as_str()
        && let Some(waiting) = asked.lock().remove(id)
    {
        let _ = waiting.send(message);
        return StatusCode::ACCEPTED.into_response();
    }
    let asking = (message["method"] == "tools/call")
        .then(|| message["params"]["name"].as_str())
        .flatten()
        .and_then(|name| question(name, &message["params"]["arguments"]));
    let Some(question) = asking else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let call_id = message["id"].clone();
    let id = format!("demo-ask-{}", asked.next.fetch_add(1, Ordering::Relaxed));
    let (sender, receiver) = oneshot::channel();
    asked.lock().insert(id.clone(), sender);
    let ask =
        json!({"jsonrpc": "2.0", "id": id, "method": question.method, "params": question.params});
    let (events, body) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(2);
    let waiting = asked.clone();
    tokio::spawn(async move {
        let event =
            |message: Value| Ok(Bytes::from(format!("event: message\ndata: {message}\n\n")));
        if events.send(event(ask)).await.is_err() {
            waiting.lock().remove(&id);
            return;
        }
        let text = match tokio::time::timeout(ANSWER_WITHIN, receiver).await {
            Ok(Ok(answer)) => answer_text(&question, &answer),
            _ => {
                waiting.lock().remove(&id);
                "the client did not answer".to_string()
            }
        };
        let result = json!({"jsonrpc": "2.0", "id": call_id, "result": {
            "resultType": "complete",
            "content": [{"type": "text", "text": text}]
        }});
        let _ = events.send(event(result)).await;
    });
    let stream = tokio_stream_of(body);
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}

/// The receiver as a stream of body chunks.
fn tokio_stream_of<T>(
    receiver: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_core::Stream<Item = T> {
    struct Chunks<T>(tokio::sync::mpsc::Receiver<T>);
    impl<T> futures_core::Stream for Chunks<T> {
        type Item = T;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            self.0.poll_recv(cx)
        }
    }
    Chunks(receiver)
}
