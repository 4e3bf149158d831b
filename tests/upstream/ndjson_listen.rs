//! `--listen-ndjson`: `subscriptions/listen` answered as the conformance suite's reference server
//! answers it, not as the 2026-07-28 transport says: a body of newline-delimited JSON
//! (`Content-Type: application/json`, chunked) whose first line acknowledges only the list
//! changes asked for (never resource subscriptions), then kept open, carrying nothing more.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Map, Value, json};

/// The largest listen request read (it is a filter and `_meta`).
const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Answers a 2026-07-28 `subscriptions/listen` itself; passes every other request on.
pub async fn answer(request: Request, next: Next) -> Response {
    let is_listen = request
        .headers()
        .get("mcp-method")
        .is_some_and(|m| m.as_bytes() == b"subscriptions/listen");
    if !is_listen {
        return next.run(request).await;
    }
    let body = axum::body::to_bytes(request.into_body(), MAX_REQUEST_BYTES)
        .await
        .unwrap_or_default();
    let listen: Value = serde_json::from_slice(&body).unwrap_or_default();
    let requested = &listen["params"]["notifications"];
    let mut acknowledged = Map::new();
    for key in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if requested[key] == true {
            acknowledged.insert(key.to_string(), json!(true));
        }
    }
    let id = listen.get("id").cloned().unwrap_or(Value::Null);
    let subscription = match &id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": subscription},
            "notifications": acknowledged,
        }
    });
    let line = format!("{ack}\n");
    Response::builder()
        .header("content-type", "application/json")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(AckThenOpen(Some(Bytes::from(line)))))
        .unwrap_or_default()
}

/// The acknowledgment, then a body that never ends (until the client goes).
struct AckThenOpen(Option<Bytes>);

impl futures_core::Stream for AckThenOpen {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.0.take() {
            Some(line) => Poll::Ready(Some(Ok(line))),
            None => Poll::Pending,
        }
    }
}
