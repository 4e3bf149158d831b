use super::replies::reply_to;
use super::*;

fn forwarder() -> (Forwarder, Arc<Notify>) {
    let changed = Arc::new(Notify::new());
    let client = TappedClient {
        http: reqwest::Client::new(),
        tap: Arc::new(SessionTap::default()),
    };
    let url = reqwest::Url::parse("http://127.0.0.1:9/mcp").expect("a URL");
    (
        Forwarder::new("demo", url, &client, changed.clone(), Default::default()),
        changed,
    )
}

/// Whether a list_changed is pending on `changed` (taking it).
fn pending(changed: &Notify) -> bool {
    std::pin::pin!(changed.notified()).enable()
}

fn session() -> Arc<Session> {
    Arc::new(Session {
        headers: http::HeaderMap::new(),
        has_session_id: true,
        stateless: false,
    })
}

/// Proves: of the messages an answer stream carries, only the response to this call's id
/// ends it (a result, an empty result, a JSON-RPC error kept as a protocol error, or a
/// result that is no tool result, which is not taken for a lost connection); an id-less
/// error ends it too; a list_changed notification is passed on; a response to another id is
/// refused (it answers no request of ours); malformed data and messages that are neither answer
/// nor request are skipped.
#[test]
fn only_the_calls_own_response_answers_it() {
    let (forwarder, changed) = forwarder();
    let ours = RequestId::String("narrowgate-7".into());
    let session = session();
    let answer = |data: &str| forwarder.on_message(data.as_bytes(), &ours, &session, None);

    assert!(answer("").is_none());
    assert!(answer("{not json").is_none());
    assert!(matches!(
        answer(r#"{"jsonrpc":"2.0","id":"narrowgate-6","result":{"content":[]}}"#),
        Some(Err(CallError::Malformed(_)))
    ));
    assert!(answer(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#).is_none());
    assert!(!pending(&changed));
    assert!(answer(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#).is_none());
    assert!(pending(&changed));

    let ok = answer(
        r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
    );
    match ok {
        Some(Ok(Reply::Complete(result))) => assert_eq!(result.is_error, Some(false)),
        other => panic!("expected the result: {other:?}"),
    }
    // Results without content are empty tool results (as rmcp's client reads them).
    match answer(r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{}}"#) {
        Some(Ok(Reply::Complete(result))) => assert!(result.content.is_empty(), "{result:?}"),
        other => panic!("expected an empty result: {other:?}"),
    }
    match answer(r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"_meta":{"k":1}}}"#) {
        Some(Ok(Reply::Complete(result))) => assert!(result.meta.is_some(), "{result:?}"),
        other => panic!("expected an empty result with _meta: {other:?}"),
    }
    match answer(r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"content":"nope"}}"#) {
        Some(Err(CallError::Malformed(_))) => {}
        other => panic!("expected a malformed result: {other:?}"),
    }
    // A 2026-07-28 upstream's request for input is its own kind of answer (`mrtr`).
    match answer(
        r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"resultType":"input_required","requestState":"s"}}"#,
    ) {
        Some(Ok(Reply::InputRequired(_))) => {}
        other => panic!("expected a request for input: {other:?}"),
    }
    // A message that is neither answer nor request is skipped, not taken as the answer.
    assert!(answer(r#"{"jsonrpc":"2.0"}"#).is_none());
    match answer(r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#) {
        Some(Err(CallError::Protocol(error))) => assert_eq!(error.code.0, -32700),
        other => panic!("expected the id-less error: {other:?}"),
    }
    let refused = answer(
        r#"{"jsonrpc":"2.0","id":"narrowgate-7","error":{"code":-32602,"message":"Unknown tool: x"}}"#,
    );
    match refused {
        Some(Err(CallError::Protocol(error))) => assert_eq!(error.code.0, -32602),
        other => panic!("expected a protocol error: {other:?}"),
    }
}

/// Proves: requests from the upstream get `ping` answered, and a JSON-RPC error for every
/// request the gateway does not relay (never a made-up "no roots" or "declined" that would pass
/// for the user's answer), with their own id.
#[test]
fn upstream_requests_get_no_made_up_answers() {
    let id = RequestId::Number(4);
    assert_eq!(
        reply_to(id.clone(), "ping"),
        json!({"jsonrpc": "2.0", "id": 4, "result": {}})
    );
    for method in ["elicitation/create", "roots/list", "sampling/createMessage"] {
        let reply = reply_to(id.clone(), method);
        assert_eq!(reply["id"], json!(4));
        assert_eq!(reply["error"]["code"], -32601, "{method}: {reply}");
        assert!(reply.get("result").is_none(), "{method}: {reply}");
    }
}

/// Proves, over real HTTP: an SSE answer stream that ends before the call's answer, after an
/// event id, is resumed with `GET` and that `Last-Event-ID` on the same session, and the
/// answer read from the resumed stream is the call's; the upstream sees the POST once.
#[tokio::test]
async fn an_answer_stream_that_ends_early_is_resumed() {
    let sse = |events: &str| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             transfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n0\r\n\r\n",
            events.len()
        )
    };
    use crate::upstream::raw_server::CALL_ID;
    let server = crate::upstream::raw_server::server(vec![
        // The POST: a priming event with an id, then the stream ends without the answer.
        (sse("id: 7\nretry: 10\ndata: \n\n"), false),
        // The GET that resumes it: the answer.
        (
            sse(&format!(
                "id: 8\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"{CALL_ID}\",\"result\":\
                     {{\"content\":[{{\"type\":\"text\",\"text\":\"resumed\"}}]}}}}\n\n"
            )),
            false,
        ),
    ])
    .await;

    let tx = Arc::new(Notify::new());
    let client = TappedClient {
        http: reqwest::Client::new(),
        tap: Arc::new(SessionTap::default()),
    };
    let mut headers = http::HeaderMap::new();
    headers.insert("mcp-session-id", HeaderValue::from_static("s-9"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    client.tap.set(Some(Session {
        headers,
        has_session_id: true,
        stateless: false,
    }));
    let forwarder = Forwarder::new("demo", server.url.clone(), &client, tx, Default::default());
    let mut params = CallToolRequestParams::new("echo");
    match forwarder.call(&mut params, None).await {
        Forwarded::Answered(Ok(result)) => {
            let text = serde_json::to_string(&result.content).expect("json");
            assert!(text.contains("resumed"), "{text}");
        }
        Forwarded::Answered(Err(e)) => panic!("the call failed: {e}"),
        Forwarded::Declined => panic!("the call was declined"),
    }
    let requests = server.requests.lock().expect("lock").clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests[0].starts_with("POST /mcp?x=1 "), "{}", requests[0]);
    assert!(requests[1].starts_with("GET /mcp?x=1 "), "{}", requests[1]);
    assert!(
        requests[1].contains("\r\nlast-event-id: 7\r\n"),
        "{}",
        requests[1]
    );
    assert!(
        requests[1].contains("\r\nmcp-session-id: s-9\r\n"),
        "{}",
        requests[1]
    );
}

/// Proves: an answer stream whose end arrives after its last event is read to that end by
/// `finish_within` (what the forwarder does once it has a stateless call's answer), so its
/// connection serves the next request; dropped at the event instead, the connection is closed
/// and the next request opens another (2 accepted), as 7-13% of the calls did at 16 clients
/// (BENCHMARKS.md).
#[tokio::test]
async fn a_stream_read_to_its_end_keeps_its_connection() {
    use super::answer::Answer;
    use crate::upstream::raw_server::{PAUSE, server};
    let event = "data: {}\n\n";
    let stream = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n{PAUSE}0\r\n\r\n",
        event.len()
    );
    for (finish, accepted) in [(true, 1), (false, 2)] {
        let upstream = server(vec![(stream.clone(), false), (stream.clone(), false)]).await;
        let client = h1::Http1Client::for_url(&upstream.url).expect("plain http");
        let headers = http::HeaderMap::new();
        for _ in 0..2 {
            let mut answer = Answer::Own(client.post(&headers, &[], b"{}").await.expect("answer"));
            let first = answer.chunk().await.expect("read").map(|c| c.to_vec());
            assert_eq!(first.as_deref(), Some(event.as_bytes()));
            if finish {
                answer.finish_within(Duration::from_secs(10)).await;
            }
        }
        assert_eq!(
            upstream.accepted.load(std::sync::atomic::Ordering::SeqCst),
            accepted,
            "finish_within: {finish}"
        );
    }
}

/// Proves: the ids of calls sent upstream are `narrowgate-` and 32 hex digits, and a thousand
/// of them are all different and in no order: an upstream that saw one cannot name the next
/// (a counter, `narrowgate-1`, `narrowgate-2`..., could).
#[test]
fn call_ids_cannot_be_guessed() {
    let ids: Vec<String> = (0..1000)
        .map(|_| match call_id() {
            RequestId::String(id) => id.to_string(),
            other => panic!("a number id: {other:?}"),
        })
        .collect();
    for id in &ids {
        let digits = id.strip_prefix("narrowgate-").expect("the prefix");
        assert!(
            digits.len() == 32 && digits.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
    }
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len());
    assert!(ids.windows(2).any(|w| w[0] > w[1]) && ids.windows(2).any(|w| w[0] < w[1]));
}

/// Proves, over real HTTP: a call's own answer (its id echoed) is taken; an answer carrying
/// the id a counter would have given the next call (what an upstream predicting ids would
/// pre-answer with) is refused as no tool result, never taken for the call.
#[tokio::test]
async fn an_answer_with_another_id_is_refused() {
    use crate::upstream::raw_server::{CALL_ID, server};
    let body = |id: &str| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"forged\"}}]}}}}"
        )
    };
    // The echoed id's length is the call's: framed by the connection's end, not a length.
    let own = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{}",
        body(CALL_ID)
    );
    let forged = body("narrowgate-2");
    let forged = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{forged}",
        forged.len()
    );
    let upstream = server(vec![(own, true), (forged, false)]).await;
    let client = TappedClient {
        http: reqwest::Client::new(),
        tap: Arc::new(SessionTap::default()),
    };
    client.tap.set(Some(Session {
        headers: http::HeaderMap::new(),
        has_session_id: false,
        stateless: false,
    }));
    let forwarder = Forwarder::new(
        "demo",
        upstream.url.clone(),
        &client,
        Arc::new(Notify::new()),
        Default::default(),
    );
    let mut params = CallToolRequestParams::new("echo");
    assert!(matches!(
        forwarder.call(&mut params, None).await,
        Forwarded::Answered(Ok(_))
    ));
    match forwarder.call(&mut params, None).await {
        Forwarded::Answered(Err(CallError::Malformed(_))) => {}
        Forwarded::Answered(Ok(result)) => panic!("a forged answer was taken: {result:?}"),
        Forwarded::Answered(Err(e)) => panic!("expected a refusal, got {e}"),
        Forwarded::Declined => panic!("declined"),
    }
    assert_eq!(upstream.requests.lock().expect("lock").len(), 2);
}
