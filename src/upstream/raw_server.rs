//! A raw HTTP/1.1 server on loopback for the upstream module's tests: it answers exactly the
//! bytes a test gives it, which no real server would (malformed framing, early ends), and
//! records the requests as they arrived on the wire.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A raw HTTP/1.1 server on loopback: answers the n-th request with `answers[n]` (closing the
/// connection after it when the answer's flag says so) and records each request.
pub struct Server {
    pub url: reqwest::Url,
    pub requests: Arc<std::sync::Mutex<Vec<String>>>,
    pub accepted: Arc<AtomicUsize>,
    /// Connections the server has closed (their socket dropped): tests wait for this rather
    /// than sleep when the client must see a close.
    pub closed: Arc<AtomicUsize>,
}

type Requests = Arc<std::sync::Mutex<Vec<String>>>;

/// Where an answer pauses (see `answer`).
pub const PAUSE: char = '\u{1}';

/// Replaced in an answer by the `"id"` of the last request body that had a string one (the
/// forwarder's ids are random): as long as that id (`narrowgate-` and 32 hex digits), so that
/// the lengths a test frames its answer with stay right.
pub const CALL_ID: &str = "narrowgate-<the id of the call's request  >";

pub async fn server<S: Into<String>>(answers: Vec<(S, bool)>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp?x=1", listener.local_addr().expect("address"));
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let accepted = Arc::new(AtomicUsize::new(0));
    let answers: Arc<Vec<(String, bool)>> =
        Arc::new(answers.into_iter().map(|(a, c)| (a.into(), c)).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (seen, count, gone) = (requests.clone(), accepted.clone(), closed.clone());
    let last_id = Arc::new(std::sync::Mutex::new(String::new()));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (answers, next, seen, gone, last_id) = (
                answers.clone(),
                next.clone(),
                seen.clone(),
                gone.clone(),
                last_id.clone(),
            );
            tokio::spawn(async move {
                answer(socket, &answers, &next, &seen, &last_id).await;
                gone.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Server {
        url: reqwest::Url::parse(&url).expect("url"),
        requests,
        accepted,
        closed,
    }
}

/// Serves one connection until its client closes it or an answer says to close; the socket is
/// dropped (closed) when this returns.
async fn answer(
    mut socket: TcpStream,
    answers: &[(String, bool)],
    next: &AtomicUsize,
    seen: &Requests,
    last_id: &std::sync::Mutex<String>,
) {
    let mut data = Vec::new();
    loop {
        // One request: its head, then Content-Length bytes of body.
        let request = loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&data[..end]).to_string();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if data.len() >= end + 4 + length {
                    let whole = String::from_utf8_lossy(&data[..end + 4 + length]).to_string();
                    data.drain(..end + 4 + length);
                    break whole;
                }
            }
            let mut buf = [0u8; 4096];
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => data.extend_from_slice(&buf[..n]),
            }
        };
        let body = request.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        if let Ok(serde_json::Value::Object(message)) = serde_json::from_str(body)
            && let Some(id) = message.get("id").and_then(|id| id.as_str())
        {
            *last_id.lock().expect("lock") = id.to_string();
        }
        seen.lock().expect("lock").push(request);
        let n = next.fetch_add(1, Ordering::SeqCst);
        let Some((answer, close)) = answers.get(n) else {
            return;
        };
        let answer = answer.replace(CALL_ID, &last_id.lock().expect("lock"));
        // A `PAUSE` in an answer: the upstream writes the rest 50 ms later (a stream's end
        // arriving after its last event).
        for (n, part) in answer.split(PAUSE).enumerate() {
            if n > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            let _ = socket.write_all(part.as_bytes()).await;
        }
        if *close {
            return;
        }
    }
}
