use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::upstream::raw_server::server;
use http::HeaderName;

/// Decodes `wire` (a whole body under `framing`) fed to the decoder `split` bytes at a time.
fn decode(mut framing: Framing, wire: &[u8], split: usize) -> io::Result<(Vec<u8>, usize)> {
    let mut buffer = ReadBuffer::default();
    let mut fed = 0;
    let mut body = Vec::new();
    loop {
        match step(&mut framing, &buffer)? {
            Step::Data { skip, len } => {
                buffer.consume(skip);
                body.extend_from_slice(&buffer.unread()[..len]);
                buffer.consume(len);
            }
            Step::Skip(n) => buffer.consume(n),
            Step::End(n) => {
                buffer.consume(n);
                return Ok((body, buffer.unread().len()));
            }
            Step::More => {
                if fed == wire.len() {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "ran out"));
                }
                let next = (fed + split).min(wire.len());
                buffer.data.extend_from_slice(&wire[fed..next]);
                fed = next;
            }
        }
    }
}

/// Proves: a chunked body (with a chunk extension and a trailer) decodes to its data whatever
/// the bytes' arrival in pieces, and the decoder stops exactly at the body's end (the next
/// answer's bytes stay unread).
#[test]
fn chunked_bodies_decode_whatever_the_split() {
    let wire = b"5;ext=1\r\nhello\r\n1\r\n \r\na\r\nevent: x\n\n\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
    for split in 1..wire.len() {
        let (body, left) =
            decode(Framing::Chunked { in_chunk: None }, wire, split).expect("decodes");
        assert_eq!(body, b"hello event: x\n\n", "split {split}");
        assert!(left <= 4, "split {split}: read past the end and lost track");
    }
    let (body, _) = decode(Framing::Length(5), b"hello", 2).expect("decodes");
    assert_eq!(body, b"hello");
}

/// Proves: malformed chunk framing is an error, not a hang or a wrong body.
#[test]
fn malformed_chunks_are_errors() {
    for wire in [
        &b"zz\r\nhello\r\n0\r\n\r\n"[..],
        b"5\r\nhelloXX0\r\n\r\n",
        // A line without digits is no last chunk (httparse alone reads it as size 0).
        b"\r\nhello\r\n0\r\n\r\n",
        b";ext\r\n\r\n",
    ] {
        let error = decode(Framing::Chunked { in_chunk: None }, wire, 64).expect_err("rejected");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{wire:?}");
    }
}

/// Proves: the framing comes from the headers as RFC 9112 orders it.
#[test]
fn framing_follows_the_headers() {
    let headers = |pairs: &[(&str, &str)]| {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        map
    };
    let ok = StatusCode::OK;
    assert_eq!(
        framing_of(
            ok,
            &headers(&[("transfer-encoding", "chunked"), ("content-length", "3")])
        )
        .expect("framing"),
        Framing::Chunked { in_chunk: None }
    );
    assert_eq!(
        framing_of(ok, &headers(&[("content-length", "3")])).expect("framing"),
        Framing::Length(3)
    );
    assert_eq!(
        framing_of(ok, &headers(&[("content-length", "0")])).expect("framing"),
        Framing::Done
    );
    assert_eq!(
        framing_of(ok, &headers(&[])).expect("framing"),
        Framing::UntilClose
    );
    assert_eq!(
        framing_of(StatusCode::NO_CONTENT, &headers(&[])).expect("framing"),
        Framing::Done
    );
    assert!(framing_of(ok, &headers(&[("content-length", "x")])).is_err());
    assert!(framing_of(ok, &headers(&[("content-length", "+5")])).is_err());
    // The codings of every Transfer-Encoding line count: chunked is the last one here.
    assert_eq!(
        framing_of(
            ok,
            &headers(&[
                ("transfer-encoding", "gzip"),
                ("transfer-encoding", "chunked")
            ])
        )
        .expect("framing"),
        Framing::Chunked { in_chunk: None }
    );
    assert!(
        framing_of(
            ok,
            &headers(&[("content-length", "1"), ("content-length", "1")])
        )
        .is_err()
    );
}

async fn body_of(answer: &mut Answer<'_>) -> String {
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.expect("body") {
        body.extend_from_slice(chunk);
    }
    String::from_utf8(body).expect("utf-8")
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.insert("mcp-session-id", HeaderValue::from_static("s-1"));
    headers
}

/// Proves: the request carries the URL's target, Host, the given headers and the body with its
/// length; length-framed and chunked answers (after an interim 100) are read whole; and
/// consecutive calls share one connection.
#[tokio::test]
async fn answers_are_read_and_the_connection_is_kept() {
    let server = server(vec![
        ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{\"a\":1}", false),
        ("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", false),
    ])
    .await;
    let client = Http1Client::for_url(&server.url).expect("an http URL");
    let mut answer = client
        .post(&json_headers(), &[], b"{\"x\":true}")
        .await
        .expect("answer");
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["content-type"], "application/json");
    assert_eq!(body_of(&mut answer).await, "{\"a\":1}");
    drop(answer);
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(body_of(&mut answer).await, "abcde");
    drop(answer);

    assert_eq!(
        server.accepted.load(Ordering::SeqCst),
        1,
        "one connection for both calls"
    );
    let requests = server.requests.lock().expect("lock").clone();
    let port = server.url.port().expect("port");
    assert!(
        requests[0].starts_with(&format!(
            "POST /mcp?x=1 HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        )),
        "{}",
        requests[0]
    );
    assert!(
        requests[0].contains("\r\nmcp-session-id: s-1\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        requests[0].ends_with("content-length: 10\r\n\r\n{\"x\":true}"),
        "{}",
        requests[0]
    );
}

/// Proves: an answer marked `Connection: close`, or delimited by the connection's end, is read
/// whole and its connection is not reused; a connection the server closed while idle is noticed
/// and replaced, and the request still goes out exactly once.
#[tokio::test]
async fn closed_connections_are_not_reused() {
    let server = server(vec![
        (
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
            true,
        ),
        ("HTTP/1.1 200 OK\r\n\r\nuntil the end", true),
        ("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n1", true),
        ("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n2", false),
    ])
    .await;
    let client = Http1Client::for_url(&server.url).expect("an http URL");
    for expected in ["ok", "until the end", "1"] {
        let mut answer = client
            .post(&json_headers(), &[], b"{}")
            .await
            .expect("answer");
        assert_eq!(body_of(&mut answer).await, expected);
    }
    // The third answer's connection was kept (nothing said close) but the server closed it:
    // wait until the server has closed all three.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.closed.load(Ordering::SeqCst) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not close its first three connections within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(body_of(&mut answer).await, "2");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 4);
    assert_eq!(
        server.requests.lock().expect("lock").len(),
        4,
        "each request sent once"
    );
}

/// Proves: an answer dropped before its end is read does not leave its connection to the next
/// call (which would read the rest as its own answer), unless the end had already arrived.
#[tokio::test]
async fn an_unfinished_answer_does_not_leak_into_the_next() {
    let server = server(vec![
        // The whole stream arrives at once: dropping after the first piece still finds its end.
        (
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            false,
        ),
        // Length says 10, 3 bytes come: the connection cannot be reused.
        ("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", false),
        ("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nxyz", false),
    ])
    .await;
    let client = Http1Client::for_url(&server.url).expect("an http URL");
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(answer.chunk().await.expect("chunk"), Some(&b"abc"[..]));
    drop(answer);
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(answer.chunk().await.expect("chunk"), Some(&b"abc"[..]));
    drop(answer);
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(body_of(&mut answer).await, "xyz");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

/// Proves: only plain-HTTP URLs without credentials are taken (the rest stays on reqwest).
#[test]
fn only_plain_http_urls_are_served() {
    let url = |u: &str| reqwest::Url::parse(u).expect("url");
    assert!(Http1Client::for_url(&url("https://example.com/mcp")).is_none());
    assert!(Http1Client::for_url(&url("http://user:pw@example.com/mcp")).is_none());
    let v6 = Http1Client::for_url(&url("http://[::1]:8080/mcp")).expect("served");
    assert!(matches!(v6.address, Address::Ip(a) if a.port() == 8080));
    assert_eq!(v6.host, "[::1]:8080");
    let named = Http1Client::for_url(&url("http://localhost/mcp")).expect("served");
    assert!(matches!(&named.address, Address::Name(n, 80) if n == "localhost"));
    assert_eq!(named.host, "localhost");
}

/// Proves: a configured `Host` header is sent instead of the URL's (as reqwest does), once.
#[tokio::test]
async fn a_configured_host_wins() {
    let server = server(vec![(
        "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
        false,
    )])
    .await;
    let client = Http1Client::for_url(&server.url).expect("an http URL");
    let mut headers = json_headers();
    headers.insert("host", HeaderValue::from_static("tools.internal"));
    let answer = client.post(&headers, &[], b"{}").await.expect("answer");
    drop(answer);
    let requests = server.requests.lock().expect("lock").clone();
    assert_eq!(requests[0].matches("host: ").count(), 1, "{}", requests[0]);
    assert!(
        requests[0].contains("\r\nhost: tools.internal\r\n"),
        "{}",
        requests[0]
    );
}

/// Proves: a body cut off by the connection's end stays an error for every later read (it
/// never turns into a clean end), and its connection is not kept.
#[tokio::test]
async fn a_cut_off_body_stays_an_error() {
    let server = server(vec![
        ("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", true),
        ("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false),
    ])
    .await;
    let client = Http1Client::for_url(&server.url).expect("an http URL");
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(
        answer.chunk().await.expect("first piece"),
        Some(&b"abc"[..])
    );
    assert!(answer.chunk().await.is_err(), "the cut is reported");
    assert!(answer.chunk().await.is_err(), "and stays reported");
    drop(answer);
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(body_of(&mut answer).await, "ok");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

/// Proves: an answer dropped before its end was read keeps its connection when the end has
/// arrived by then, though it was not read yet (a stream whose end comes in a later write).
#[tokio::test]
async fn an_end_that_arrived_later_still_keeps_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = reqwest::Url::parse(&format!(
        "http://{}/mcp",
        listener.local_addr().expect("address")
    ))
    .expect("url");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    // Told each time the server has written an answer's end.
    let ended = Arc::new(tokio::sync::Notify::new());
    let end_written = ended.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let end_written = end_written.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // Each request fits one read here (a short POST on loopback).
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                    let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n";
                    let _ = socket.write_all(head.as_bytes()).await;
                    // The behaviour under test: the end comes in a later write.
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                    end_written.notify_one();
                }
            });
        }
    });
    let client = Http1Client::for_url(&url).expect("an http URL");
    for _ in 0..2 {
        let mut answer = client
            .post(&json_headers(), &[], b"{}")
            .await
            .expect("answer");
        assert_eq!(answer.chunk().await.expect("chunk"), Some(&b"abc"[..]));
        // The end has arrived (unread) once the server has written it.
        tokio::time::timeout(std::time::Duration::from_secs(10), ended.notified())
            .await
            .expect("the server writes the answer's end within 10 s");
        drop(answer);
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the connection was kept"
    );
}

/// Proves: a host name is resolved and its addresses tried in turn (`localhost` may name `::1`
/// first, where nothing listens here: refused, then 127.0.0.1 answers).
#[tokio::test]
async fn a_host_name_is_resolved_and_its_addresses_tried() {
    let server = server(vec![(
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        false,
    )])
    .await;
    let port = server.url.port().expect("port");
    let url = reqwest::Url::parse(&format!("http://localhost:{port}/mcp")).expect("url");
    let client = Http1Client::for_url(&url).expect("an http URL");
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(body_of(&mut answer).await, "ok");
    drop(answer);
    let requests = server.requests.lock().expect("lock").clone();
    assert!(
        requests[0].contains(&format!("\r\nhost: localhost:{port}\r\n")),
        "{}",
        requests[0]
    );
}

/// A raw server whose every connection first writes `early` (a whole answer, before reading
/// anything), then reads requests (`Content-Length` framed) and answers each with `answer`.
/// Returns its URL and the count of connections accepted.
async fn speaks_first(
    early: &'static str,
    answer: &'static str,
) -> (reqwest::Url, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = reqwest::Url::parse(&format!(
        "http://{}/mcp",
        listener.local_addr().expect("address")
    ))
    .expect("url");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if socket.write_all(early.as_bytes()).await.is_err() {
                    return;
                }
                let mut data = Vec::new();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    while let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&data[..end]).to_string();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        if data.len() < end + 4 + length {
                            break;
                        }
                        data.drain(..end + 4 + length);
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => data.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    (url, accepted)
}

const FORGED: &str = "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged";

/// Proves: an answer the upstream sends before the request is all written (here, at once on
/// accepting the connection, while a 32 MiB request cannot be written until the upstream reads
/// it) is refused as a protocol error, never read as the request's answer.
#[tokio::test]
async fn an_answer_before_the_request_is_written_is_refused() {
    let (url, _) = speaks_first(FORGED, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    let client = Http1Client::for_url(&url).expect("an http URL");
    let body = vec![b' '; 32 * 1024 * 1024];
    match client.post(&json_headers(), &[], &body).await {
        Ok(mut answer) => panic!(
            "took an answer sent before the request: {}",
            body_of(&mut answer).await
        ),
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}"),
    }
}

/// Proves: a kept connection on which bytes arrived while it was idle (an answer to no
/// request) is closed, not used: the next request goes on a new connection and reads its own
/// answer, not the waiting bytes.
#[tokio::test]
async fn a_kept_connection_with_bytes_waiting_is_not_used() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = reqwest::Url::parse(&format!(
        "http://{}/mcp",
        listener.local_addr().expect("address")
    ))
    .expect("url");
    let accepted = Arc::new(AtomicUsize::new(0));
    let (forged_tx, forged_rx) = tokio::sync::oneshot::channel();
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut forged_tx = Some(forged_tx);
        while let Ok((mut socket, _)) = listener.accept().await {
            let n = count.fetch_add(1, Ordering::SeqCst);
            let forged_tx = forged_tx.take();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // Each request fits one read here (a short POST on loopback).
                if !matches!(socket.read(&mut buf).await, Ok(r) if r > 0) {
                    return;
                }
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n{n}");
                let _ = socket.write_all(answer.as_bytes()).await;
                // The first connection then sends an answer nobody asked for, and says so.
                if let Some(tx) = forged_tx {
                    let _ = socket.write_all(FORGED.as_bytes()).await;
                    let _ = tx.send(());
                    let _ = socket.read(&mut buf).await;
                }
            });
        }
    });
    let client = Http1Client::for_url(&url).expect("an http URL");
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(body_of(&mut answer).await, "0");
    drop(answer);
    forged_rx.await.expect("the server sent its forged answer");
    let mut answer = client
        .post(&json_headers(), &[], b"{}")
        .await
        .expect("answer");
    assert_eq!(
        body_of(&mut answer).await,
        "1",
        "the answer of a new connection"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}
