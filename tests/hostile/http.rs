//! Streamable HTTP at `/mcp`, by hand: `POST` of a request answers an SSE stream (the request's
//! own messages, then its answer), `POST` of a notification or response answers 202, `GET` opens
//! the standalone stream, `DELETE` ends nothing (sessions are not checked: any id is accepted).

use std::convert::Infallible;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::{BoxError, Hostile, Stream};

/// Session ids handed out by `initialize`.
static SESSIONS: AtomicU64 = AtomicU64::new(1);

pub async fn serve(state: Arc<Hostile>, host: &str, port: u16) -> Result<(), BoxError> {
    crate::flood::on_start(&state);
    tokio::spawn(state.clone().notify_on_signal());
    let app = axum::Router::new()
        .route("/mcp", axum::routing::post(post).get(get).delete(delete))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .map_err(|error| format!("cannot bind {host}:{port}: {error}"))?;
    let addr = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{addr}/mcp")?;
        stdout.flush()?;
    }
    axum::serve(listener, app).await?;
    Ok(())
}

async fn post(State(state): State<Arc<Hostile>>, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body);
    state.record(&text);
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let is_request = message.get("id").is_some() && message.get("method").is_some();
    if !is_request {
        // A notification or an answer to one of our requests: nothing to say back.
        return StatusCode::ACCEPTED.into_response();
    }
    if message.get("method").and_then(Value::as_str) == Some("initialize") {
        let (tx, _rx) = mpsc::channel(1);
        let answer = state.handle(message, Stream(tx)).await;
        let session = format!("hostile-{}", SESSIONS.fetch_add(1, Ordering::Relaxed));
        let mut response = axum::Json(answer).into_response();
        if let Ok(value) = HeaderValue::from_str(&session) {
            response.headers_mut().insert("mcp-session-id", value);
        }
        return response;
    }
    let (tx, rx) = mpsc::channel(1024);
    let stream = Stream(tx);
    tokio::spawn(async move {
        if let Some(answer) = state.handle(message, stream.clone()).await {
            stream.send(&answer).await;
        }
    });
    sse(rx)
}

async fn get(State(state): State<Arc<Hostile>>) -> Response {
    let (tx, rx) = mpsc::channel(1024);
    state.add_standalone(Stream(tx));
    sse(rx)
}

async fn delete() -> StatusCode {
    StatusCode::OK
}

/// An SSE response carrying each message of `rx` as one event, ending when every sender is gone.
fn sse(rx: mpsc::Receiver<String>) -> Response {
    let mut response = Response::new(Body::from_stream(Events(rx)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

struct Events(mpsc::Receiver<String>);

impl futures_core::Stream for Events {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0
            .poll_recv(cx)
            .map(|message| message.map(|m| Ok(Bytes::from(format!("data: {m}\n\n")))))
    }
}
