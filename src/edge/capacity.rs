//! Sessions and SSE streams, per caller and overall (`http.max_sessions*`,
//! `http.max_streams*`): a caller that opens sessions or streams without end gets 503 with
//! `Retry-After` instead of making the gateway hold them all. A layer after authentication and
//! session ownership, before the request is served.
//!
//! Sessions are counted from the ownership table ([`SessionOwners`]); with `state: redis://…`
//! a caller's sessions are counted on every replica together ([`SharedSessions`]). A session rmcp has closed
//! (idle for 5 minutes) stays in that table until it is pruned, so before refusing a new one the
//! layer asks rmcp which of the counted sessions it still holds and forgets the others. Two
//! `initialize` requests racing for the last place may both get it: the limits hold within the
//! requests under way at the same moment.
//!
//! Streams are the requests that open a long-lived SSE stream: a GET (a session's standalone
//! stream) and a 2026-07-28 `subscriptions/listen`. Each holds its place until its response body
//! ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::config::http_limits::HttpConfig;
use crate::edge::connections::Throttle;
use crate::edge::sessions::SessionOwners;
use crate::request::Admitted;
use crate::request::message::{Body, Message, Method as JsonRpcMethod};
use crate::request::rejection::Rejection;
use crate::state::shared_sessions::SharedSessions;

/// At most one warning a second for each kind of refusal.
static SESSIONS_REFUSED: Throttle = Throttle::new();
static STREAMS_REFUSED: Throttle = Throttle::new();

/// The layer's state: cheap to clone.
#[derive(Clone)]
pub struct Capacity {
    sessions: Arc<SessionOwners>,
    rmcp_sessions: Arc<LocalSessionManager>,
    streams: Arc<Streams>,
}

impl Capacity {
    pub fn new(sessions: Arc<SessionOwners>, rmcp_sessions: Arc<LocalSessionManager>) -> Capacity {
        Capacity {
            sessions,
            rmcp_sessions,
            streams: Arc::new(Streams::default()),
        }
    }

    /// `caller`'s sessions (on every replica when they are shared) and all sessions here. While
    /// Redis cannot say, the caller's sessions here are counted instead (and the log says so):
    /// an outage of the shared state must not lock every session-based client out, and the
    /// limits still hold on each replica.
    async fn counts(&self, caller: &str, shared: &SharedSessions) -> (usize, usize) {
        let (mine_here, all) = self.sessions.counts(caller);
        let mine = shared.held_by(caller).await.ok().flatten();
        (mine.unwrap_or(mine_here), all)
    }

    /// Whether `caller` may open one more session under `limits`.
    async fn room_for_session(
        &self,
        caller: &str,
        limits: &HttpConfig,
        shared: &SharedSessions,
    ) -> Result<(), Rejection> {
        let over = |(mine, all): (usize, usize)| {
            if mine >= limits.max_sessions_per_caller {
                Some("http.max_sessions_per_caller")
            } else if all >= limits.max_sessions {
                Some("http.max_sessions")
            } else {
                None
            }
        };
        let Some(limit) = over(self.counts(caller, shared).await) else {
            return Ok(());
        };
        // Forget the counted sessions rmcp has closed meanwhile, then count again.
        let whose = (limit == "http.max_sessions_per_caller").then_some(caller);
        for id in self.sessions.ids(whose) {
            let held = self.rmcp_sessions.has_session(&id.as_str().into()).await;
            if !held.unwrap_or(true) {
                self.sessions.forget(&id);
                if whose.is_some() {
                    shared.remove(&id, caller).await;
                }
            }
        }
        match over(self.counts(caller, shared).await) {
            None => Ok(()),
            Some(limit) => {
                if SESSIONS_REFUSED.ready() {
                    tracing::warn!(caller = %caller, %limit, "request refused: 503, too many sessions");
                }
                Err(Rejection::TooManySessions(limit))
            }
        }
    }
}

#[derive(Default)]
struct Streams {
    open: Mutex<(usize, HashMap<String, usize>)>,
}

/// One open stream's place, given back when its response body ends.
struct StreamSlot {
    streams: Arc<Streams>,
    caller: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.streams.lock();
        open.0 -= 1;
        if let Some(n) = open.1.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.caller);
            }
        }
    }
}

impl Streams {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, HashMap<String, usize>)> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more stream of `caller`, or the limit that refuses it.
    fn take(
        self: &Arc<Self>,
        caller: &str,
        limits: &HttpConfig,
    ) -> Result<StreamSlot, &'static str> {
        let mut open = self.lock();
        let mine = open.1.get(caller).copied().unwrap_or(0);
        if mine >= limits.max_streams_per_caller {
            return Err("http.max_streams_per_caller");
        }
        if open.0 >= limits.max_streams {
            return Err("http.max_streams");
        }
        open.0 += 1;
        *open.1.entry(caller.to_string()).or_default() += 1;
        Ok(StreamSlot {
            streams: self.clone(),
            caller: caller.to_string(),
        })
    }
}

/// Refuses an `initialize` without a session when its caller (or everyone) holds as many
/// sessions as allowed, and a request opening an SSE stream when as many streams are open.
pub async fn limit_sessions_and_streams(
    State(capacity): State<Capacity>,
    request: Request,
    next: Next,
) -> Result<Response, Rejection> {
    let admitted = request
        .extensions()
        .get::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))?;
    let caller = admitted.caller.clone().ok_or(Rejection::Unauthenticated)?;
    let limits = &admitted.gateway.config.http;
    let in_session = request.headers().contains_key("mcp-session-id");
    if !in_session && admitted.body.as_ref().is_some_and(opens_session) {
        capacity
            .room_for_session(&caller.name, limits, &admitted.gateway.kept.shared_sessions)
            .await?;
    }
    let opens_stream = request.method() == Method::GET
        || request
            .headers()
            .get("mcp-method")
            .is_some_and(|m| m == "subscriptions/listen");
    let slot = match opens_stream {
        true => match capacity.streams.take(&caller.name, limits) {
            Ok(slot) => Some(slot),
            Err(limit) => {
                if STREAMS_REFUSED.ready() {
                    tracing::warn!(caller = %caller.name, %limit, "request refused: 503, too many streams");
                }
                return Err(Rejection::TooManyStreams(limit));
            }
        },
        false => None,
    };
    let response = next.run(request).await;
    Ok(match slot {
        Some(slot) => crate::edge::guarded::until_sent(response, slot),
        None => response,
    })
}

/// Whether `body` is a lone `initialize` (which opens a session).
fn opens_session(body: &Body) -> bool {
    matches!(
        body.messages(),
        [Message {
            method: JsonRpcMethod::Initialize(_),
            ..
        }]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: streams are counted per caller and overall, refused over either limit naming it,
    /// and given back when they end.
    #[test]
    fn streams_are_counted_per_caller_and_overall() {
        let streams = Arc::new(Streams::default());
        let limits = HttpConfig {
            max_streams: 3,
            max_streams_per_caller: 2,
            ..HttpConfig::default()
        };
        let a1 = streams.take("a", &limits).expect("a place");
        let a2 = streams.take("a", &limits).expect("a place");
        assert_eq!(
            streams.take("a", &limits).err(),
            Some("http.max_streams_per_caller")
        );
        let b1 = streams.take("b", &limits).expect("a place");
        assert_eq!(streams.take("b", &limits).err(), Some("http.max_streams"));
        drop(a1);
        assert!(streams.take("b", &limits).is_ok(), "a place came back");
        drop((a2, b1));
        assert_eq!(streams.lock().0, 0);
        assert!(streams.lock().1.is_empty());
    }
}
