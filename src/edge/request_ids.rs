//! The JSON-RPC request ids in flight in each session: a request whose id is already in flight in
//! its session is refused (HTTP 400, JSON-RPC -32600 `request id already in use`: the layer's
//! `Rejection::RequestIdInUse`).
//!
//! Why: rmcp routes a session's answers back to the HTTP request that carried them by JSON-RPC
//! request id (its session worker maps each id to the open response stream). A second request
//! with an id still in flight takes that entry over, so the first request's answer goes out on
//! the second request's stream, to the second request's sender, and the first request never
//! gets one. JSON-RPC asks clients for unique ids; the gateway holds them to it rather than
//! mix up answers. An id is free again once its answer has been sent (or its client has gone).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::response::Response;
use rmcp::model::RequestId;

/// Which ids are in flight in which session.
#[derive(Default)]
pub struct RequestIds {
    in_flight: Mutex<HashMap<String, HashSet<RequestId>>>,
}

/// The ids of one HTTP request, held in flight until dropped.
pub struct Held {
    owner: Arc<RequestIds>,
    session: String,
    ids: Vec<RequestId>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut all = self.owner.lock();
        if let Some(set) = all.get_mut(&self.session) {
            for id in &self.ids {
                set.remove(id);
            }
            if set.is_empty() {
                all.remove(&self.session);
            }
        }
    }
}

impl Held {
    /// `response` with these ids held in flight until its body has been sent or dropped (an
    /// SSE answer is written after the handler has returned the response).
    pub fn until_sent(self, response: Response) -> Response {
        crate::edge::guarded::until_sent(response, self)
    }
}

impl RequestIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<RequestId>>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `ids` (the request ids of one HTTP request: one message or a batch) in flight in
    /// `session`; `None` if one of them is in flight already (or appears twice in the batch).
    pub fn hold(
        self: &Arc<Self>,
        session: &str,
        ids: impl IntoIterator<Item = RequestId>,
    ) -> Option<Held> {
        let mut held = Held {
            owner: self.clone(),
            session: session.to_string(),
            ids: Vec::new(),
        };
        let mut ids = ids.into_iter().peekable();
        if ids.peek().is_none() {
            return Some(held);
        }
        let mut all = self.lock();
        let set = all.entry(session.to_string()).or_default();
        for id in ids {
            if !set.insert(id.clone()) {
                drop(all);
                // `held` releases the ids inserted so far.
                return None;
            }
            held.ids.push(id);
        }
        drop(all);
        Some(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request ids of a JSON body, as the HTTP layer reads them.
    fn body(text: &str) -> Vec<RequestId> {
        let body = super::super::message::Body::parse(
            text.as_bytes(),
            super::super::message::CallParams::Skip,
        )
        .expect("JSON");
        body.messages()
            .iter()
            .filter_map(|m| m.request_id())
            .collect()
    }

    /// Proves: an id is refused while another request holds it in the same session, free again
    /// once that request is done, and independent across sessions; numbers and strings are
    /// different ids; a batch holding one id twice is refused and holds nothing afterwards;
    /// notifications and responses hold nothing.
    #[test]
    fn an_id_in_flight_is_refused_until_released() {
        let ids = Arc::new(RequestIds::default());
        let call = body(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call"}"#);
        let first = ids.hold("s", call.clone()).expect("free");
        assert!(ids.hold("s", call.clone()).is_none(), "5 is in flight");
        assert!(ids.hold("t", call.clone()).is_some(), "another session");
        let as_string = body(r#"{"jsonrpc":"2.0","id":"5","method":"ping"}"#);
        let string = ids.hold("s", as_string).expect("\"5\" is not 5");
        drop(first);
        assert!(ids.hold("s", call.clone()).is_some(), "free again");
        drop(string);
        let twice = body(r#"[{"id":1,"method":"a"},{"id":2,"method":"b"},{"id":1,"method":"c"}]"#);
        assert!(ids.hold("s", twice).is_none());
        assert!(ids.lock().is_empty(), "a refused batch holds nothing");
        let note = body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let answer = body(r#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
        let (_n, _a) = (ids.hold("s", note), ids.hold("s", answer));
        assert!(
            ids.lock().is_empty(),
            "nothing held for notifications and responses"
        );
    }

    /// Proves: an answer holds its ids until its body is gone, and keeps its length (a JSON
    /// answer is still sent with `Content-Length`, not chunked).
    #[tokio::test]
    async fn an_answer_holds_its_ids_until_sent_and_keeps_its_length() {
        use http_body::Body as _;
        let ids = Arc::new(RequestIds::default());
        let held = ids
            .hold("s", body(r#"{"id":1,"method":"ping"}"#))
            .expect("free");
        let response = held.until_sent(Response::new(axum::body::Body::from("abc")));
        assert_eq!(response.body().size_hint().exact(), Some(3));
        assert!(ids.hold("s", body(r#"{"id":1,"method":"ping"}"#)).is_none());
        let sent = axum::body::to_bytes(response.into_body(), 10)
            .await
            .expect("body");
        assert_eq!(&sent[..], b"abc");
        assert!(ids.lock().is_empty(), "released once sent");
    }
}
