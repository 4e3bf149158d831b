//! The gateway's own accept loop: every connection is counted when it is accepted (all clients
//! together, and per client address), and served by hyper with the header timeout of the
//! version in force (`http.header_timeout`), so that neither many connections nor slow ones can
//! exhaust the gateway.
//!
//! A connection over `http.max_connections` or `http.max_connections_per_client` is still
//! accepted and read, once: it answers `/healthz`, `/readyz` and `/metrics` as usual (a health
//! check must tell an overloaded gateway from a dead one), and anything else with 503 and
//! `Retry-After` ([`refuse_over_limit`]); then it is closed. Such connections are themselves
//! bounded ([`OVER_LIMIT_AT_MOST`]): beyond that, new connections are closed as soon as they are
//! accepted. Shutdown stops accepting, lets each connection finish its requests, and returns when
//! all are closed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::runtime::live::Live;

/// Connections over a limit that are still read (to answer health checks and a 503); beyond
/// this many, new connections are closed at once.
pub const OVER_LIMIT_AT_MOST: usize = 64;
/// What a 503 for a connection over a limit tells the client to wait, in seconds.
const RETRY_AFTER_SECONDS: u32 = 1;
/// The paths a connection over a limit still answers.
const HEALTH_PATHS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// At most one warning a second of each kind: under a flood of connections or refusals, the log
/// says so without growing with the flood.
pub(crate) struct Throttle(AtomicU64);

impl Throttle {
    pub(crate) const fn new() -> Throttle {
        Throttle(AtomicU64::new(0))
    }

    /// Whether a warning may be logged now (and if so, none for the next second).
    pub(crate) fn ready(&self) -> bool {
        static START: OnceLock<Instant> = OnceLock::new();
        let now = START.get_or_init(Instant::now).elapsed().as_millis();
        let now = u64::try_from(now).unwrap_or(u64::MAX).saturating_add(1000);
        let last = self.0.load(Ordering::Relaxed);
        now >= last.saturating_add(1000)
            && self
                .0
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// What the accept loop knows of a connection, in each of its requests' extensions.
#[derive(Debug, Clone, Copy)]
pub struct Connection {
    /// The connection was over a limit when accepted: it answers health checks only.
    pub over_limit: bool,
}

/// Open connections, all together and per client address.
#[derive(Default)]
struct Counts {
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    all: usize,
    over_limit: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// One accepted connection's place in the counts, given back when dropped.
struct Slot {
    counts: Arc<Counts>,
    client: IpAddr,
    over_limit: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.counts.lock();
        if self.over_limit {
            open.over_limit -= 1;
            return;
        }
        open.all -= 1;
        if let Some(n) = open.by_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.by_client.remove(&self.client);
            }
        }
    }
}

/// The client a connection counts against: its IPv4 address, or the /64 network of an IPv6 one
/// (one host is usually given a whole /64, and could otherwise take a new address for each
/// connection). An IPv4-mapped IPv6 address is its IPv4 address.
fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let [a, b, c, d, ..] = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
            }
        },
    }
}

impl Counts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a connection from `client`: within the limits, or over one (`None` when even the
    /// connections over a limit are at [`OVER_LIMIT_AT_MOST`]).
    fn take(self: &Arc<Self>, client: IpAddr, all: usize, per_client: usize) -> Option<Slot> {
        let mut open = self.lock();
        let from_client = open.by_client.get(&client).copied().unwrap_or(0);
        let over_limit = open.all >= all || from_client >= per_client;
        if over_limit {
            if open.over_limit >= OVER_LIMIT_AT_MOST {
                return None;
            }
            open.over_limit += 1;
        } else {
            open.all += 1;
            *open.by_client.entry(client).or_default() += 1;
        }
        Some(Slot {
            counts: self.clone(),
            client,
            over_limit,
        })
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then waits for every connection
/// to finish. The limits are those of the version in force when a connection is accepted.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    live: Arc<Live>,
    shutdown: CancellationToken,
) {
    warn_if_over_the_file_limit(live.current().config.http.max_connections);
    let counts = Arc::new(Counts::default());
    let connections = TaskTracker::new();
    let (accept_failed, over_limit) = (Throttle::new(), Throttle::new());
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, typically: wait for connections to close rather
                // than spin on the error.
                if accept_failed.ready() {
                    tracing::warn!(error = %e, "cannot accept a connection");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let limits = live.current().config.http.clone();
        let Some(slot) = counts.take(
            client_of(peer.ip()),
            limits.max_connections,
            limits.max_connections_per_client,
        ) else {
            tracing::debug!(%peer, "connection closed at once: too many connections over the limits");
            continue;
        };
        if slot.over_limit && over_limit.ready() {
            tracing::warn!(%peer, max_connections = limits.max_connections,
                max_connections_per_client = limits.max_connections_per_client,
                "connections over the limits: answering health checks only, 503 for the rest");
        }
        // Without TCP_NODELAY, a response written in two segments waits for the client's
        // delayed ACK (about 40 ms per call on a kept-alive connection).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let app = app.clone();
        let shutdown = shutdown.clone();
        connections.spawn(serve_connection(
            tcp,
            slot,
            peer,
            app,
            limits.header_timeout.0,
            shutdown,
        ));
    }
    connections.close();
    connections.wait().await;
}

/// Each connection is a file descriptor, beside the upstreams' and the receipts database's: with
/// `max_connections` near the process's open-file limit, accepting fails before the limit is
/// reached. Linux only (read from `/proc/self/limits`); silent where it cannot be read.
fn warn_if_over_the_file_limit(max_connections: usize) {
    /// Descriptors the gateway needs besides client connections (upstreams, the database,
    /// logs), and the connections over the limits it still reads.
    const OTHERS: usize = 64 + OVER_LIMIT_AT_MOST;
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else {
        return;
    };
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse::<usize>().ok());
    if let Some(soft) = soft
        && max_connections.saturating_add(OTHERS) > soft
    {
        tracing::warn!(
            max_connections,
            open_file_limit = soft,
            "http.max_connections is close to or above the open-file limit: raise it (ulimit -n, \
             LimitNOFILE) or lower http.max_connections, else connections are refused before \
             the limit is reached"
        );
    }
}

/// One connection, HTTP/1.1, until the client closes it, a header timeout, or shutdown.
async fn serve_connection(
    tcp: TcpStream,
    slot: Slot,
    peer: SocketAddr,
    app: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    let info = Connection {
        over_limit: slot.over_limit,
    };
    let app = TowerToHyperService::new(app);
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(info);
        hyper::service::Service::call(&app, request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        // A connection over a limit answers one request.
        .keep_alive(!slot.over_limit);
    let connection = builder.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = served {
        // A header timeout, a client gone: nothing the operator can act on per connection.
        tracing::debug!(%peer, error = %e, "connection ended");
    }
    drop(slot);
}

/// The answer of a connection over a limit to anything but a health check: 503 with
/// `Retry-After`. Outermost layer of the whole application.
pub async fn refuse_over_limit(request: Request, next: Next) -> Response {
    let over_limit = request
        .extensions()
        .get::<Connection>()
        .is_some_and(|c| c.over_limit);
    if over_limit && !HEALTH_PATHS.contains(&request.uri().path()) {
        return overloaded(
            "Service Unavailable: too many connections (http.max_connections or \
             http.max_connections_per_client); retry later",
            RETRY_AFTER_SECONDS,
        );
    }
    next.run(request).await
}

/// 503 with `Retry-After: seconds` and `text` as the body.
pub fn overloaded(text: &'static str, seconds: u32) -> Response {
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: connections are counted per client and overall, a connection over either limit
    /// is marked so, only [`OVER_LIMIT_AT_MOST`] of those are kept, and every slot is given back
    /// when its connection ends.
    /// Proves: a warning of one kind is let through, and not again within the second.
    #[test]
    fn warnings_are_throttled() {
        let throttle = Throttle::new();
        assert!(throttle.ready());
        assert!(!throttle.ready(), "not twice within a second");
    }

    /// Proves: IPv6 addresses of one /64 are one client (a host cannot take a fresh address per
    /// connection to escape `max_connections_per_client`), other /64s and IPv4 addresses are
    /// their own, and an IPv4-mapped address counts as its IPv4 address.
    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("address");
        assert_eq!(
            client_of(ip("2001:db8:1:2::1")),
            client_of(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            client_of(ip("2001:db8:1:2::1")),
            client_of(ip("2001:db8:1:3::1"))
        );
        assert_eq!(client_of(ip("10.0.0.1")), ip("10.0.0.1"));
        assert_eq!(client_of(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
        let counts = Arc::new(Counts::default());
        let first = counts
            .take(client_of(ip("2001:db8::1")), 10, 1)
            .expect("a slot");
        let second = counts
            .take(client_of(ip("2001:db8::2")), 10, 1)
            .expect("a slot");
        assert!(!first.over_limit);
        assert!(second.over_limit, "the same /64: over the per-client limit");
    }

    #[test]
    fn connections_are_counted_at_accept() {
        let counts = Arc::new(Counts::default());
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = counts.take(a, 3, 2).expect("a slot");
        let second = counts.take(a, 3, 2).expect("a slot");
        assert!(!first.over_limit && !second.over_limit);
        let third = counts.take(a, 3, 2).expect("a slot");
        assert!(third.over_limit, "over the per-client limit");
        let other = counts.take(b, 3, 2).expect("a slot");
        assert!(!other.over_limit, "another client");
        assert!(
            counts.take(b, 3, 2).expect("a slot").over_limit,
            "over the overall limit"
        );
        drop(first);
        assert!(
            !counts.take(b, 3, 2).expect("a slot").over_limit,
            "a slot came back"
        );
        let over: Vec<Slot> = (0..OVER_LIMIT_AT_MOST)
            .map_while(|_| counts.take(a, 1, 1))
            .collect();
        assert!(over.len() < OVER_LIMIT_AT_MOST, "bounded");
        assert!(counts.take(a, 1, 1).is_none());
        drop((over, second, third, other));
        let open = counts.lock();
        assert_eq!((open.all, open.over_limit), (0, 0));
        assert!(open.by_client.is_empty());
    }
}
