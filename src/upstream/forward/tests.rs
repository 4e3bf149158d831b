use super::*;

fn forwarder() -> (Forwarder, mpsc::UnboundedReceiver<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let client = TappedClient {
        http: reqwest::Client::new(),
        tap: Arc::new(SessionTap::default()),
    };
    let url = reqwest::Url::parse("http://127.0.0.1:9/mcp").expect("a URL");
    (Forwarder::new("demo", url, &client, tx), rx)
}

fn session() -> Arc<Session> {
    Arc::new(Session {
        headers: http::HeaderMap::new(),
        has_session_id: true,
    })
}

/// Proves: of the messages an answer stream carries, only the response to this call's id
/// ends it (a result, an empty result, a JSON-RPC error kept as a protocol error, or a
/// result that is no tool result, which is not taken for a lost connection); an id-less
/// error ends it too; a list_changed notification is passed on; responses to other ids,
/// malformed data and messages that are neither answer nor request are skipped.
#[test]
fn only_the_calls_own_response_answers_it() {
    let (forwarder, mut changed) = forwarder();
    let ours = RequestId::String("narrowgate-7".into());
    let session = session();
    let answer = |data: &str| forwarder.on_message(data.as_bytes(), &ours, &session);

    assert!(answer("").is_none());
    assert!(answer("{not json").is_none());
    assert!(answer(r#"{"jsonrpc":"2.0","id":"narrowgate-6","result":{"content":[]}}"#).is_none());
    assert!(answer(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#).is_none());
    assert!(changed.try_recv().is_err());
    assert!(answer(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#).is_none());
    assert!(changed.try_recv().is_ok());

    let ok = answer(
        r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
    );
    match ok {
        Some(Ok(result)) => assert_eq!(result.is_error, Some(false)),
        other => panic!("expected the result: {other:?}"),
    }
    // Results without content are empty tool results (as rmcp's client reads them).
    match answer(r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{}}"#) {
        Some(Ok(result)) => assert!(result.content.is_empty(), "{result:?}"),
        other => panic!("expected an empty result: {other:?}"),
    }
    match answer(r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"_meta":{"k":1}}}"#) {
        Some(Ok(result)) => assert!(result.meta.is_some(), "{result:?}"),
        other => panic!("expected an empty result with _meta: {other:?}"),
    }
    match answer(r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"content":"nope"}}"#) {
        Some(Err(CallError::Malformed(_))) => {}
        other => panic!("expected a malformed result: {other:?}"),
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

/// Proves: requests from the upstream get the answers rmcp's default client handler gives,
/// with their own id.
#[test]
fn upstream_requests_get_rmcps_default_answers() {
    let id = RequestId::Number(4);
    assert_eq!(
        reply_to(id.clone(), "ping"),
        json!({"jsonrpc": "2.0", "id": 4, "result": {}})
    );
    assert_eq!(
        reply_to(id.clone(), "elicitation/create")["result"]["action"],
        "decline"
    );
    assert_eq!(
        reply_to(id.clone(), "roots/list"),
        json!({"jsonrpc": "2.0", "id": 4, "result": {"roots": []}})
    );
    assert_eq!(
        reply_to(id, "sampling/createMessage")["error"]["code"],
        -32601
    );
}

/// Proves, over real HTTP: an SSE answer stream that ends before the call's answer, after an
/// event id, is resumed with `GET` and that `Last-Event-ID` on the same session, and the
/// answer read from the resumed stream is the call's; the upstream sees the POST once.
#[tokio::test]
async fn an_answer_stream_that_ends_early_is_resumed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let requests = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                // One request per connection: its head, then its Content-Length body.
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let request = loop {
                    if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if data.len() >= end + 4 + length {
                            break String::from_utf8_lossy(&data).to_lowercase();
                        }
                    }
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                };
                seen.lock().expect("lock").push(request.clone());
                let events = if request.starts_with("post ") {
                    // A priming event with an id, then the stream ends: no answer.
                    "id: 7\nretry: 10\ndata: \n\n".to_string()
                } else {
                    "id: 8\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"narrowgate-1\",\"result\":\
                     {\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n"
                        .to_string()
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     transfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n0\r\n\r\n",
                    events.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });

    let (tx, _rx) = mpsc::unbounded_channel();
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
    }));
    let url = reqwest::Url::parse(&url).expect("url");
    let forwarder = Forwarder::new("demo", url, &client, tx);
    let params = CallToolRequestParams::new("echo");
    match forwarder.call(&params).await {
        Forwarded::Answered(Ok(result)) => {
            let text = serde_json::to_string(&result.content).expect("json");
            assert!(text.contains("resumed"), "{text}");
        }
        Forwarded::Answered(Err(e)) => panic!("the call failed: {e}"),
        Forwarded::Declined => panic!("the call was declined"),
    }
    let requests = requests.lock().expect("lock").clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests[0].starts_with("post /mcp "), "{}", requests[0]);
    assert!(requests[1].starts_with("get /mcp "), "{}", requests[1]);
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
