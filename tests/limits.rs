//! The HTTP server's limits (`http:` in the configuration) against the real binary: clients that
//! send slowly, never finish, open too many connections or too many sessions get a bounded
//! answer (408, a closed connection, 503 with `Retry-After`) and the gateway keeps serving.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Gateway, KEY, Raw, demo_stdio_config, hash_key};
use serde_json::json;

const BOB: &str = "test-key-bob";

const CONTRACT: &str = r#"upstream: demo
tools:
  echo:
    privilege: read
    input:
      type: object
      properties: { message: { type: string } }
      required: [message]
"#;

/// The demo upstream over stdio with `http_block` (YAML lines under `http:`); alice and bob may
/// call `echo`.
fn start(http_block: &str) -> Gateway {
    let callers = format!(
        "{}  - name: bob\n    api_key_sha256: {}\n    tools: [echo]\n",
        common::callers(&[]),
        hash_key(BOB)
    );
    let gw = Gateway::spawn(
        &demo_stdio_config(&callers, &format!("http:\n{http_block}")),
        &[("demo.yaml", CONTRACT)],
        &[],
    );
    gw.wait_ready(Duration::from_secs(60));
    gw
}

/// The gateway's resident memory, in KiB.
fn rss_kib(gw: &Gateway) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", gw.pid())).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

fn authority(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_string()
}

/// Opens a connection and sends `head` (a request's head, without the blank line) followed by
/// `rest`.
fn send(gw: &Gateway, head: &str, rest: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(authority(gw)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    tcp.write_all(head.as_bytes()).expect("write head");
    tcp.write_all(rest).expect("write");
    tcp
}

/// Reads one HTTP response head (status and headers) from `tcp`; `None` if the connection
/// closes first.
fn read_head(tcp: &mut TcpStream) -> Option<(u16, String)> {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        match tcp.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&seen).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.to_ascii_lowercase()))
}

/// A kept-alive `GET /healthz` on `tcp`, its status (the body, `ok`, is read too).
fn healthz_on(tcp: &mut TcpStream) -> Option<u16> {
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let (status, head) = read_head(tcp)?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    tcp.read_exact(&mut body).ok()?;
    Some(status)
}

/// Proves: 400 connections that each declare a 1 MB body without credentials and send half of
/// it are refused from their headers (401) and never make the gateway hold their bodies: its
/// resident memory grows by less than 40 MB (it grew by about 200 MB when bodies were read
/// before authentication), and it keeps serving.
#[test]
fn unauthenticated_half_sent_bodies_do_not_grow_memory() {
    let gw = start("  max_connections: 1024\n  max_connections_per_client: 1024\n");
    let before = rss_kib(&gw);
    let half = vec![b'x'; 500_000];
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                Accept: application/json, text/event-stream\r\nContent-Length: 1000000\r\n\r\n";
    let mut held = Vec::new();
    for _ in 0..400 {
        let tcp = TcpStream::connect(authority(&gw)).expect("connect");
        tcp.set_write_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        tcp.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        let mut writer = &tcp;
        let _ = writer.write_all(head.as_bytes());
        // The gateway may stop reading (and close) as soon as it has refused the headers.
        let _ = writer.write_all(&half);
        held.push(tcp);
    }
    // Every answer is read (or, should the gateway wait for the bodies, the first read times
    // out): by then the gateway holds whatever it holds of the bodies.
    let mut refused = 0;
    for tcp in &mut held {
        match read_head(tcp) {
            Some((401, _)) => refused += 1,
            _ => break,
        }
    }
    let after = rss_kib(&gw);
    let grown_mib = after.saturating_sub(before) / 1024;
    eprintln!("VmRSS {before} KiB before, {after} KiB with 400 half-sent bodies held open");
    assert!(
        grown_mib < 40,
        "resident memory grew by {grown_mib} MiB for 400 half-sent unauthenticated bodies"
    );
    assert_eq!(refused, 400, "every request refused 401 from its headers");
    drop(held);
    let mut tcp = TcpStream::connect(authority(&gw)).expect("connect");
    assert_eq!(healthz_on(&mut tcp), Some(200));
}

/// Proves: a client that sends its headers a line at a time (slow loris) is cut off at
/// `http.header_timeout` (1 s here), however long it keeps trickling.
#[test]
fn a_slow_loris_header_is_cut_at_the_timeout() {
    let gw = start("  header_timeout: 1s\n");
    let mut tcp = send(&gw, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"");
    let mut writer = tcp.try_clone().expect("clone");
    let started = Instant::now();
    let trickle = std::thread::spawn(move || {
        for i in 0..40 {
            // The pace of a slow client, not a wait for a condition.
            std::thread::sleep(Duration::from_millis(250));
            if writer
                .write_all(format!("X-Slow-{i}: 1\r\n").as_bytes())
                .is_err()
            {
                return i;
            }
        }
        40
    });
    // The gateway closes the connection (possibly after a 408): the read ends.
    let mut rest = Vec::new();
    let _ = tcp.read_to_end(&mut rest);
    let cut_after = started.elapsed();
    let lines_sent = trickle.join().expect("trickle");
    assert!(
        cut_after >= Duration::from_millis(900) && cut_after < Duration::from_secs(5),
        "cut after {cut_after:?}"
    );
    assert!(lines_sent < 40, "the gateway took all 40 header lines");
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}

/// Proves: a body that does not arrive within `http.body_timeout` (1 s here) is answered 408.
#[test]
fn a_body_that_never_arrives_is_answered_408() {
    let gw = start("  body_timeout: 1s\n");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 100\r\n\r\n"
    );
    let started = Instant::now();
    let mut tcp = send(&gw, &head, b"{\"jsonrpc\":");
    let (status, _) = read_head(&mut tcp).expect("an answer");
    assert_eq!(status, 408);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "answered after {took:?}"
    );
}

/// Proves: with `http.max_connections: 4`, a fifth connection is answered 503 with
/// `Retry-After` for an MCP request, while `/healthz` still answers 200 on a connection over the
/// limit; once a connection closes, a new one is served again.
#[tokio::test]
async fn the_connection_cap_answers_503_while_healthz_answers() {
    let gw = start("  max_connections: 4\n  max_connections_per_client: 4\n");
    // Four kept-alive connections, each known to the gateway (it answered on it).
    let mut open: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut tcp = TcpStream::connect(authority(&gw)).expect("connect");
            tcp.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            assert_eq!(healthz_on(&mut tcp), Some(200));
            tcp
        })
        .collect();
    let body = common::initialize_body("2025-11-25");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let mut fifth = send(&gw, &head, body.as_bytes());
    let (status, headers) = read_head(&mut fifth).expect("an answer");
    assert_eq!(status, 503, "{headers}");
    assert!(headers.contains("retry-after: "), "{headers}");
    let mut sixth = TcpStream::connect(authority(&gw)).expect("connect");
    sixth
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert_eq!(healthz_on(&mut sixth), Some(200), "healthz over the limit");
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = Raw::new(&gw.url)
            .post(&[("authorization", &format!("Bearer {KEY}"))], &body)
            .await;
        if reply.status == 200 {
            break;
        }
        assert_eq!(reply.status, 503, "{reply:?}");
        assert!(
            Instant::now() < deadline,
            "a freed connection was not reused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Proves: with `http.max_sessions_per_caller: 2`, alice's third session is refused 503 with
/// `Retry-After` while bob can still open one; once alice deletes a session she can open another.
#[tokio::test]
async fn the_session_cap_per_caller_gives_503_with_retry_after() {
    let gw = start("  max_sessions_per_caller: 2\n");
    let raw = Raw::new(&gw.url);
    let first = raw.open_session(Some(KEY), "2025-11-25").await;
    let _second = raw.open_session(Some(KEY), "2025-11-25").await;
    let alice = format!("Bearer {KEY}");
    let third = raw
        .post(
            &[("authorization", &alice)],
            &common::initialize_body("2025-11-25"),
        )
        .await;
    assert_eq!(third.status, 503, "{third:?}");
    assert!(third.header("retry-after").is_some(), "{third:?}");
    assert!(third.body.contains("max_sessions_per_caller"), "{third:?}");
    let _bob = raw.open_session(Some(BOB), "2025-11-25").await;
    let deleted = reqwest::Client::new()
        .delete(&gw.url)
        .header("authorization", &alice)
        .header("mcp-session-id", &first)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("DELETE answered");
    assert_eq!(deleted.status(), 200);
    let _again = raw.open_session(Some(KEY), "2025-11-25").await;
    // The sessions still serve.
    let reply = raw
        .request(
            Some(KEY),
            &_again,
            "2025-11-25",
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hi"}}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

/// A GET stream of `session` for alice.
async fn open_stream(gw: &Gateway, session: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(&gw.url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("GET answered")
}

/// Proves: with `http.max_streams_per_caller: 1`, a caller's second SSE stream gets 503 with
/// `Retry-After` while the first stays open, and is not cut by a 1 s `header_timeout` (a
/// connection writing a stream is not idle); once the first stream is closed by its client, a
/// new one opens.
#[tokio::test]
async fn sse_streams_are_capped_per_caller() {
    let gw = start("  header_timeout: 1s\n  max_streams_per_caller: 1\n");
    let raw = Raw::new(&gw.url);
    let first_session = raw.open_session(Some(KEY), "2025-11-25").await;
    let second_session = raw.open_session(Some(KEY), "2025-11-25").await;
    let mut first = open_stream(&gw, &first_session).await;
    assert_eq!(first.status(), 200);
    let second = open_stream(&gw, &second_session).await;
    assert_eq!(second.status(), 503);
    assert!(second.headers().contains_key("retry-after"));
    // The first stream stays open past the header timeout: whatever it sends, it does not end.
    let until = Instant::now() + Duration::from_millis(2500);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, first.chunk()).await {
            Err(_) => break,
            Ok(Ok(Some(_))) => continue,
            Ok(other) => panic!("the stream ended: {other:?}"),
        }
    }
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let again = open_stream(&gw, &second_session).await;
        if again.status() == 200 {
            break;
        }
        assert_eq!(again.status(), 503);
        assert!(
            Instant::now() < deadline,
            "the closed stream's place never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
