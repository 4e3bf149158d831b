//! A plain HTTP/1.1 client for the forwarder's `tools/call`, driven by the calling task.
//!
//! Why not reqwest here: hyper's pooled client runs each connection in a task of its own, and a
//! call passes between the calling task and that task at every step (the request, the answer's
//! head, each chunk of its body, the end). On tokio's multi-thread runtime more than three such
//! hand-offs in a row wake another worker (the LIFO slot's cap), which wakes another: with one
//! client and two workers a call cost about nine context switches where the work needs two or
//! three. Here the calling task writes the request and reads the answer on the socket itself, and
//! keeps the connection for the next call. Measured against reqwest in one run (BENCHMARKS.md,
//! "What changed", item 9): context switches per call 8.7 → 4.3 (session upstream) and 4.9 → 3.6
//! (stateless); gateway CPU per call with one client 0.28 → 0.21 ms and 0.25 → 0.22 ms, with 16
//! clients 0.127 → 0.106 ms and 0.143 → 0.111 ms. hyper's unpooled `client::conn` needs its
//! connection future polled beside the request and the whole body (in practice, a task of its
//! own: the same hand-offs). Parsing is hyper's (`httparse`); what this file adds is framing.
//!
//! Deliberately small: `POST` to an `http://` URL without credentials in it, answers framed by
//! `Content-Length`, chunked transfer coding or the end of the connection, interim `1xx` answers
//! skipped. Everything else (TLS, a proxy from the environment) stays on reqwest
//! ([`Http1Client::for_url`] says which).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, StatusCode};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

mod read;
mod write;
use read::{Step, framing_of, step, take_head};
use write::{WriteError, write_request};

/// Idle connections kept per upstream (as the reqwest client's `pool_max_idle_per_host`).
const MAX_IDLE: usize = 256;
/// The largest answer head read (status line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest chunk-size line (with extensions) or trailer section read.
const MAX_LINE_BYTES: usize = 4 * 1024;
/// How much is read from the socket at a time.
const READ_SIZE: usize = 16 * 1024;
/// Headers read per answer (as hyper).
const MAX_HEADERS: usize = 100;
/// How long a connection attempt to one of several addresses of a name may take before the
/// next address is tried.
const CONNECT_FALLBACK: Duration = Duration::from_secs(2);
/// A connection idle this long is closed rather than kept (as reqwest's pool).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Connections to one upstream URL, and how to address it.
pub struct Http1Client {
    /// Where to connect.
    address: Address,
    /// The request line, written once.
    request_line: Vec<u8>,
    /// The URL's host (and port), for `Host` unless the headers name one.
    host: HeaderValue,
    /// Kept connections, the most recently used last.
    idle: Mutex<VecDeque<Connection>>,
}

enum Address {
    Ip(std::net::SocketAddr),
    Name(String, u16),
}

/// An open connection and what it has read beyond the previous answer.
struct Connection {
    stream: TcpStream,
    buffer: ReadBuffer,
    /// When it was last given back.
    idle_since: Instant,
}

/// Bytes read from the socket and not consumed yet: `data[start..]`.
#[derive(Default)]
struct ReadBuffer {
    data: Vec<u8>,
    start: usize,
}

impl ReadBuffer {
    fn unread(&self) -> &[u8] {
        &self.data[self.start..]
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.data.len());
    }

    /// Reads more from `stream`; `Ok(0)` at its end.
    async fn fill(&mut self, stream: &mut TcpStream) -> io::Result<usize> {
        if self.start > 0 {
            self.data.drain(..self.start);
            self.start = 0;
        }
        // Into spare capacity: nothing to zero first.
        self.data.reserve(READ_SIZE);
        stream.read_buf(&mut self.data).await
    }
}

/// How the rest of an answer's body is delimited.
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    /// This many bytes are left.
    Length(u64),
    /// Chunked transfer coding, at the start of a chunk-size line, or inside a chunk with this
    /// many bytes (and its CRLF) left.
    Chunked {
        in_chunk: Option<u64>,
    },
    /// Until the connection ends.
    UntilClose,
    Done,
    /// The connection failed before the end: the body is incomplete, whoever asks again.
    Broken,
}

/// An answer whose head has been read; its body is read with [`Answer::chunk`].
pub struct Answer<'a> {
    pub status: StatusCode,
    pub headers: HeaderMap,
    framing: Framing,
    /// Whether the connection can carry another request once the body is read.
    reusable: bool,
    /// `None` once given back to the client (or lost).
    connection: Option<Connection>,
    client: &'a Http1Client,
}

impl Http1Client {
    /// A client for `url`, if it is one this client serves: `http://`, no user name or password
    /// (reqwest would turn them into an `Authorization` header), and no proxy configured in the
    /// environment (reqwest would use it).
    pub fn for_url(url: &reqwest::Url) -> Option<Http1Client> {
        let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
        if proxied
            || url.scheme() != "http"
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return None;
        }
        let port = url.port_or_known_default()?;
        let host = url.host_str()?;
        // (An IPv6 address comes in brackets, as in the URL.)
        let address = match host.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(ip) => Address::Ip(std::net::SocketAddr::new(ip, port)),
            Err(_) => Address::Name(host.to_string(), port),
        };
        let host = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_string(),
        };
        Some(Http1Client {
            address,
            request_line: format!("POST {target} HTTP/1.1\r\n").into_bytes(),
            host: HeaderValue::from_str(&host).ok()?,
            idle: Mutex::new(VecDeque::new()),
        })
    }

    /// POSTs `body` with `headers` and reads the answer's head. A kept connection that turns
    /// out closed, or holding bytes no request asked for, before the request could be written is
    /// closed and replaced (by the next kept one or a new one); once written, a failure is the
    /// caller's (the upstream may have acted on it). An answer that arrives before the request
    /// is all written is refused ([`write_request`]).
    /// `more` are headers of this request only (names and values a header can carry as they
    /// are), written after `headers`, so that those need not be copied for each request.
    pub async fn post(
        &self,
        headers: &HeaderMap,
        more: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Answer<'_>> {
        let request = self.request(headers, more, body);
        let mut connection = loop {
            let Some(mut kept) = self.kept() else {
                break self.written(&request).await?;
            };
            match write_request(&mut kept, &request).await {
                Ok(()) => break kept,
                Err(WriteError::Unused(e)) if e.kind() == io::ErrorKind::InvalidData => {
                    tracing::warn!(upstream = ?self.host, error = %e, "closed a kept connection to the upstream");
                }
                // Closed while idle: the next one.
                Err(WriteError::Unused(_)) => {}
                Err(e @ WriteError::Partly(_)) => return Err(e.into()),
            }
        };
        let (status, headers, framing, reusable) = read_head(&mut connection).await?;
        let mut answer = Answer {
            status,
            headers,
            framing,
            reusable,
            connection: Some(connection),
            client: self,
        };
        answer.give_back_if_done();
        Ok(answer)
    }

    fn request(&self, headers: &HeaderMap, more: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
        let mut request = Vec::with_capacity(self.request_line.len() + 256 + body.len());
        request.extend_from_slice(&self.request_line);
        // A configured `Host` wins over the URL's, as with reqwest.
        if !headers.contains_key(http::header::HOST) {
            request.extend_from_slice(b"host: ");
            request.extend_from_slice(self.host.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        for (name, value) in headers {
            if name == http::header::CONTENT_LENGTH {
                continue;
            }
            request.extend_from_slice(name.as_str().as_bytes());
            request.extend_from_slice(b": ");
            request.extend_from_slice(value.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        for (name, value) in more {
            request.extend_from_slice(name.as_bytes());
            request.extend_from_slice(b": ");
            request.extend_from_slice(value.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        // Writing into a Vec cannot fail.
        let _ = write!(request, "content-length: {}\r\n\r\n", body.len());
        request.extend_from_slice(body);
        request
    }

    /// A new connection with `request` written on it.
    async fn written(&self, request: &[u8]) -> io::Result<Connection> {
        let stream = match &self.address {
            Address::Ip(address) => TcpStream::connect(address).await?,
            Address::Name(name, port) => connect_to_any(name, *port).await?,
        };
        stream.set_nodelay(true)?;
        let mut connection = Connection {
            stream,
            buffer: ReadBuffer::default(),
            idle_since: Instant::now(),
        };
        write_request(&mut connection, request).await?;
        Ok(connection)
    }

    /// The most recently kept connection. Whether it is still open (the upstream may have
    /// closed it meanwhile, an idle timeout) is asked of the socket as the request is written.
    fn kept(&self) -> Option<Connection> {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_back()
    }

    /// Keeps `connection` for the next call, and closes kept ones idle for longer than
    /// [`IDLE_TIMEOUT`] (the oldest are at the front), which the upstream has likely closed.
    fn keep(&self, mut connection: Connection) {
        let now = Instant::now();
        connection.idle_since = now;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while idle
            .front()
            .is_some_and(|c| now.duration_since(c.idle_since) > IDLE_TIMEOUT)
        {
            idle.pop_front();
        }
        if idle.len() < MAX_IDLE {
            idle.push_back(connection);
        }
    }
}

/// Connects to one of the addresses `name` resolves to, in order. Every address but the last
/// gets [`CONNECT_FALLBACK`] before the next is tried, so an unreachable first address (IPv6
/// dropped silently, say) costs that long rather than the whole call's timeout.
async fn connect_to_any(name: &str, port: u16) -> io::Result<TcpStream> {
    let addresses: Vec<_> = tokio::net::lookup_host((name, port)).await?.collect();
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, format!("{name} has no address"));
    for (i, address) in addresses.iter().enumerate() {
        let attempt = TcpStream::connect(address);
        let result = if i + 1 < addresses.len() {
            tokio::time::timeout(CONNECT_FALLBACK, attempt)
                .await
                .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "connect")))
        } else {
            attempt.await
        };
        match result {
            Ok(stream) => return Ok(stream),
            Err(e) => last_error = e,
        }
    }
    Err(last_error)
}

/// Reads an answer's head (skipping interim `1xx` answers) and works out its body's framing.
async fn read_head(
    connection: &mut Connection,
) -> io::Result<(StatusCode, HeaderMap, Framing, bool)> {
    loop {
        let parsed = loop {
            if let Some(head) = take_head(&mut connection.buffer)? {
                break head;
            }
            if connection.buffer.fill(&mut connection.stream).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed before the answer",
                ));
            }
        };
        if parsed.status.is_informational() {
            continue;
        }
        let framing = framing_of(parsed.status, &parsed.headers)?;
        let reusable = parsed.keep_alive && framing != Framing::UntilClose;
        return Ok((parsed.status, parsed.headers, framing, reusable));
    }
}

impl Answer<'_> {
    /// The next piece of the body, `None` at its end. The connection goes back to the client
    /// once the end has been read (by this or when the answer is dropped).
    pub async fn chunk(&mut self) -> io::Result<Option<&[u8]>> {
        if self.framing == Framing::Broken {
            return Err(broken());
        }
        let Some(connection) = self.connection.as_mut() else {
            return Ok(None);
        };
        let data = loop {
            match step(&mut self.framing, &connection.buffer)? {
                Step::Data { skip, len } => {
                    connection.buffer.consume(skip);
                    let start = connection.buffer.start;
                    connection.buffer.consume(len);
                    break start..start + len;
                }
                Step::Skip(n) => connection.buffer.consume(n),
                Step::End(n) => {
                    connection.buffer.consume(n);
                    self.give_back_if_done();
                    return Ok(None);
                }
                Step::More => match connection.buffer.fill(&mut connection.stream).await {
                    Ok(0) if self.framing == Framing::UntilClose => {
                        self.framing = Framing::Done;
                        self.connection = None;
                        return Ok(None);
                    }
                    Ok(0) => {
                        self.framing = Framing::Broken;
                        self.connection = None;
                        return Err(broken());
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.framing = Framing::Broken;
                        self.connection = None;
                        return Err(e);
                    }
                },
            }
        };
        Ok(self.connection.as_ref().map(|c| &c.buffer.data[data]))
    }

    /// Gives the connection back if the body has been read to its end and it can be reused.
    fn give_back_if_done(&mut self) {
        if self.framing == Framing::Done
            && let Some(connection) = self.connection.take()
            && self.reusable
            && connection.buffer.unread().is_empty()
        {
            self.client.keep(connection);
        }
    }
}

impl Drop for Answer<'_> {
    /// A caller that stops reading once it has what it wants (the answer on an SSE stream)
    /// leaves the body's end unread; if it has arrived (buffered, or waiting in the socket: one
    /// non-blocking read), the connection is reusable.
    fn drop(&mut self) {
        let Some(connection) = self.connection.as_mut() else {
            return;
        };
        let mut read_once = false;
        loop {
            match step(&mut self.framing, &connection.buffer) {
                Ok(Step::Data { skip, len }) => connection.buffer.consume(skip + len),
                Ok(Step::Skip(n)) => connection.buffer.consume(n),
                Ok(Step::End(n)) => {
                    connection.buffer.consume(n);
                    self.give_back_if_done();
                    return;
                }
                Ok(Step::More) if !read_once => {
                    read_once = true;
                    let mut more = [0u8; 4096];
                    // The socket is non-blocking: this never waits.
                    let mut socket: &socket2::Socket = &socket2::SockRef::from(&connection.stream);
                    match socket.read(&mut more) {
                        Ok(n) if n > 0 => connection.buffer.data.extend_from_slice(&more[..n]),
                        _ => return,
                    }
                }
                Ok(Step::More) | Err(_) => return,
            }
        }
    }
}

fn broken() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the connection closed in the middle of the answer",
    )
}

fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

pub mod replay;
#[cfg(test)]
mod tests;
