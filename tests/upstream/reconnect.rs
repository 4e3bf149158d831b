//! SSE polling (SEP-1699) for the `test_reconnection` tool: the server closes the SSE stream of a
//! `tools/call` while the call runs, and the client gets the answer by reconnecting with
//! `GET` + `Last-Event-ID`, from rmcp's per-request message cache.
//!
//! rmcp can close a request's stream ([`LocalSessionHandle::close_sse_stream`]) but needs the
//! session-internal number of the HTTP request, which a tool handler never sees. [`Sessions`] wraps
//! rmcp's [`LocalSessionManager`] and learns that number from the first event of each request's
//! stream (the priming event, whose id is `0/<number>`), keyed by session and JSON-RPC request id.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager,
};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use tokio::sync::Notify;

/// The tool whose stream is closed mid-call.
pub const RECONNECTION_TOOL: &str = "test_reconnection";
/// How long a tool waits for its own stream to be registered (it is, right after the request
/// reached the session; the wait only covers that race).
const REGISTER_WAIT: Duration = Duration::from_secs(2);
/// The reconnection delay the closing priming event asks the client for.
const RETRY: Duration = Duration::from_millis(100);

/// rmcp's in-memory session manager, plus the request-stream numbers that closing a stream needs.
#[derive(Default)]
pub struct Sessions {
    inner: LocalSessionManager,
    /// (session id, JSON-RPC request id) → rmcp's number for that request's SSE stream.
    streams: Mutex<HashMap<(String, String), u64>>,
    registered: Notify,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    pub fn new(inner: LocalSessionManager) -> Self {
        Self {
            inner,
            streams: Mutex::default(),
            registered: Notify::new(),
        }
    }

    fn stream_of(&self, key: &(String, String)) -> Option<u64> {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        streams.get(key).copied()
    }

    /// Closes the SSE stream that carries request `request_id` of session `session` (after a
    /// priming event asking the client to come back), keeping its cached messages for a resume.
    pub async fn close_request_stream(
        &self,
        session: &str,
        request_id: &str,
    ) -> Result<(), String> {
        let key = (session.to_owned(), request_id.to_owned());
        let number = tokio::time::timeout(REGISTER_WAIT, async {
            loop {
                let registered = self.registered.notified();
                tokio::pin!(registered);
                registered.as_mut().enable();
                if let Some(number) = self.stream_of(&key) {
                    return number;
                }
                registered.await;
            }
        })
        .await
        .map_err(|_| {
            format!("no SSE stream is known for request {request_id} of session {session}")
        })?;
        {
            let mut streams = self
                .streams
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            streams.remove(&key);
        }
        let handle: Option<LocalSessionHandle> =
            self.inner.sessions.read().await.get(session).cloned();
        let handle = handle.ok_or_else(|| format!("session {session} is gone"))?;
        handle
            .close_sse_stream(number, Some(RETRY))
            .await
            .map_err(|error| format!("closing the SSE stream failed: {error}"))
    }
}

/// A stream with one item put back in front (the priming event read to learn the stream number).
struct Prepend<S> {
    first: Option<ServerSseMessage>,
    rest: Pin<Box<S>>,
}

impl<S: Stream<Item = ServerSseMessage>> Stream for Prepend<S> {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.first.take() {
            Some(first) => Poll::Ready(Some(first)),
            None => self.rest.as_mut().poll_next(cx),
        }
    }
}

/// The JSON-RPC id of a `tools/call` of `test_reconnection`: only those streams are recorded, so
/// the map stays small however many other calls a benchmark makes.
fn reconnection_call(message: &ClientJsonRpcMessage) -> Option<String> {
    match message {
        JsonRpcMessage::Request(request) => match &request.request {
            ClientRequest::CallToolRequest(call) if call.params.name == RECONNECTION_TOOL => {
                Some(request.id.to_string())
            }
            _ => None,
        },
        _ => None,
    }
}

/// The stream number in a request stream's event id `<index>/<number>`.
fn stream_number(event: &ServerSseMessage) -> Option<u64> {
    event.event_id.as_deref()?.split_once('/')?.1.parse().ok()
}

impl SessionManager for Sessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        {
            let mut streams = self
                .streams
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            streams.retain(|(session, _), _| session.as_str() != &**id);
        }
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let request_id = reconnection_call(&message);
        let mut rest = Box::pin(self.inner.create_stream(id, message).await?);
        if request_id.is_none() {
            return Ok(Prepend { first: None, rest });
        }
        // The session sends the priming event before it takes the request, so it is waiting.
        let first = std::future::poll_fn(|cx| rest.as_mut().poll_next(cx)).await;
        if let (Some(request_id), Some(number)) =
            (request_id, first.as_ref().and_then(stream_number))
        {
            let mut streams = self
                .streams
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            streams.insert((id.to_string(), request_id), number);
            drop(streams);
            self.registered.notify_waiters();
        }
        Ok(Prepend { first, rest })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
