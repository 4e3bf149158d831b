//! Upstream MCP servers: one supervised connection each, shared by all callers (docs/semantics.md).
//!
//! An [`Upstream`] holds the current connection (if any) and the tools it last listed. Its
//! [`supervise`](Upstream::supervise) task keeps it connected;
//! [`call_with_retries`](Upstream::call_with_retries) never waits for a connection: a down
//! upstream answers at once.

mod by_peer;
pub mod call_relay;
mod connect;
mod events;
mod forward;
pub(crate) mod h1;
mod inflight;
mod listen;
mod listen_post;
mod mrtr;
mod once;
#[cfg(test)]
mod raw_server;
mod revision;
pub(crate) mod sse;
mod stderr;
mod tap;
mod watch;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, RequestMetaObject, Tool};
use rmcp::service::{Peer, ServiceError};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::{UpstreamConfig, UpstreamTransport};

pub use connect::{Connected, UpstreamClient, connect};
pub use events::{ResourceEvent, resource_events};
use forward::{Forwarded, Forwarder};
pub use once::{Offer, list_offer_once, list_tools_once};

/// What observes one attempt of a call (the gateway passes telemetry's CLIENT span). Defined
/// here so that this module needs nothing from whoever watches it.
pub trait AttemptSpan: Sized {
    /// Opens the span for attempt number `attempt` (from 1) of a call on `upstream`; it may
    /// write its trace context into `params._meta`, which goes upstream.
    fn start(
        upstream: &str,
        transport: &UpstreamTransport,
        attempt: u32,
        params: &mut CallToolRequestParams,
    ) -> Self;
    /// Closes it with the attempt's result.
    fn finish(self, result: &Result<CallToolResult, CallError>);
}

/// No observer: attempts go unrecorded.
impl AttemptSpan for () {
    fn start(_: &str, _: &UpstreamTransport, _: u32, _: &mut CallToolRequestParams) {}
    fn finish(self, _: &Result<CallToolResult, CallError>) {}
}

/// How often a connected upstream is pinged.
const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Why a health check failed.
#[derive(Debug, thiserror::Error)]
enum Unhealthy {
    #[error("no answer within 5s")]
    Silent,
    #[error("{0}")]
    Broken(String),
}

/// MCP `ping`, bounded so a hung upstream counts as failed.
async fn ping(peer: &Peer<RoleClient>) -> Result<(), Unhealthy> {
    let request = rmcp::model::ClientRequest::PingRequest(Default::default());
    match tokio::time::timeout(Duration::from_secs(5), peer.send_request(request)).await {
        Ok(Ok(_)) => Ok(()),
        // An answer, even an error, is an upstream that is there: some 2026-07-28 servers
        // (the Python SDK's) answer `ping` with -32601.
        Ok(Err(ServiceError::McpError(_))) => Ok(()),
        Ok(Err(e)) => Err(Unhealthy::Broken(e.to_string())),
        Err(_) => Err(Unhealthy::Silent),
    }
}

/// The result of a call and how many attempts it took.
#[derive(Debug)]
pub struct Attempted {
    pub result: Result<CallToolResult, CallError>,
    pub attempts: u32,
}

/// The state of an upstream as `/readyz` and `check` report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Not tried yet.
    Starting,
    Up,
    Down {
        reason: String,
    },
}

/// What the catalog needs of an upstream: its status and its current tool list.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub status: Status,
    pub tools: Arc<Vec<Tool>>,
    /// The MCP version the current connection negotiated (`2026-07-28`, `2025-11-25`, ...).
    pub protocol: Option<String>,
}

struct Current {
    status: Status,
    peer: Option<Peer<RoleClient>>,
    /// HTTP upstreams: `tools/call` sent on `peer`'s session without going through rmcp.
    forwarder: Option<Arc<Forwarder>>,
    tools: Arc<Vec<Tool>>,
    protocol: Option<String>,
}

/// How a call reaches a connected upstream.
struct Route {
    peer: Peer<RoleClient>,
    forwarder: Option<Arc<Forwarder>>,
}

/// One upstream server and its current connection.
pub struct Upstream {
    pub name: String,
    pub transport: UpstreamTransport,
    /// The per-call timeout of tools whose contract sets none.
    pub default_timeout: Option<Duration>,
    current: RwLock<Current>,
    /// Where progress for the gateway's tokens goes (`relay`), whichever connection brings it.
    progress: Arc<call_relay::ProgressRoutes>,
    /// The calls in flight, to tell whose an upstream's request or log message is.
    in_flight: Arc<inflight::InFlight>,
    /// The resource URIs client sessions subscribed to (`watch`).
    watch: watch::ResourceWatch,
    /// The client extensions declared to it on connecting (`declare_extensions`).
    extensions: RwLock<Vec<String>>,
}

/// Why a call to an upstream did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("upstream {0} unavailable")]
    Unavailable(String),
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    #[error("connection to upstream {0} was lost")]
    ConnectionLost(String),
    #[error("upstream answered with a protocol error {}: {}", .0.code.0, .0.message)]
    Protocol(ErrorData),
    #[error("upstream {0} answered with something that is not a tool result")]
    Malformed(String),
    #[error("the client cancelled the call")]
    Cancelled,
}

impl Upstream {
    pub fn new(name: &str, config: &UpstreamConfig) -> Upstream {
        Upstream {
            name: name.to_string(),
            transport: config.transport(),
            default_timeout: config.timeout.map(|d| d.0),
            current: RwLock::new(Current {
                status: Status::Starting,
                peer: None,
                forwarder: None,
                tools: Arc::new(Vec::new()),
                protocol: None,
            }),
            progress: Arc::default(),
            in_flight: Arc::default(),
            watch: watch::ResourceWatch::default(),
            extensions: RwLock::default(),
        }
    }

    /// The client extensions (`io.modelcontextprotocol/ui`, …) declared to this upstream from
    /// its next connection on: those the contracts use, whose clients may declare them.
    pub fn declare_extensions(&self, extensions: Vec<String>) {
        *self.extensions.write().unwrap_or_else(|p| p.into_inner()) = extensions;
    }

    fn extensions(&self) -> Vec<String> {
        self.extensions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn snapshot(&self) -> Snapshot {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        Snapshot {
            status: current.status.clone(),
            tools: current.tools.clone(),
            protocol: current.protocol.clone(),
        }
    }

    fn set(&self, status: Status, route: Option<Route>, tools: Option<Vec<Tool>>) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        current.status = status;
        (current.peer, current.forwarder) = match route {
            Some(route) => {
                current.protocol = listen::protocol_of(&route.peer);
                (Some(route.peer), route.forwarder)
            }
            None => (None, None),
        };
        if let Some(tools) = tools {
            current.tools = Arc::new(tools);
        }
    }

    fn route(&self) -> Option<Route> {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        Some(Route {
            peer: current.peer.clone()?,
            forwarder: current.forwarder.clone(),
        })
    }

    /// The current connection, for requests other than `tools/call` (resources, prompts,
    /// completion), which the gateway sends through rmcp's client; unavailable when down.
    pub fn peer(&self) -> Result<Peer<RoleClient>, CallError> {
        self.route()
            .map(|r| r.peer)
            .ok_or_else(|| CallError::Unavailable(self.name.clone()))
    }

    /// Subscribes to updates of resource `uri` on `peer` (this upstream's connection), as its
    /// protocol has it (`watch`).
    pub async fn subscribe_resource(
        &self,
        peer: &Peer<RoleClient>,
        uri: &str,
    ) -> Result<(), ServiceError> {
        self.watch.subscribe(&self.name, peer, uri).await
    }

    /// One attempt of a call, in its own span `S` (whose context goes upstream in `_meta`).
    async fn attempt<S: AttemptSpan>(
        &self,
        mut params: CallToolRequestParams,
        timeout: Duration,
        attempt: u32,
        relay: Option<&Arc<call_relay::CallRelay>>,
    ) -> Result<CallToolResult, CallError> {
        let route = self
            .route()
            .ok_or_else(|| CallError::Unavailable(self.name.clone()))?;
        // The gateway answers an upstream's input requests itself (`mrtr`), whatever the client
        // put in these fields.
        mrtr::clear(&mut params);
        // The client asked for progress: the upstream gets a token of the gateway's own.
        let _route = relay.filter(|r| r.progress_token.is_some()).map(|r| {
            let token = call_relay::fresh_token();
            params
                .meta
                .get_or_insert_with(RequestMetaObject::new)
                .set_progress_token(token.clone());
            self.progress.route(token, r.clone())
        });
        // In flight until the attempt ends: whose the upstream's requests and logs are.
        let entered = self.in_flight.enter(relay);
        let span = S::start(&self.name, &self.transport, attempt, &mut params);
        // Given up when the client cancels: dropping the call tells the upstream. Boxed: only
        // calls rmcp serves have a relay, and the direct path's future stays small.
        let result = match relay {
            None => tokio::time::timeout(timeout, self.send(route, params, None, &entered))
                .await
                .unwrap_or(Err(CallError::Timeout(timeout))),
            Some(relay) => {
                Box::pin(async {
                    let answer = tokio::select! {
                        answered = tokio::time::timeout(timeout, self.send(route, params, Some(relay), &entered)) => {
                            answered.unwrap_or(Err(CallError::Timeout(timeout)))
                        }
                        () = relay.cancelled.cancelled() => Err(CallError::Cancelled),
                    };
                    // Logs sent just before the answer on another stream still reach the client.
                    entered.settle().await;
                    answer
                })
                .await
            }
        };
        span.finish(&result);
        result
    }

    /// Sends the call through the forwarder when there is one and it takes the call, through
    /// rmcp otherwise (`by_peer`).
    async fn send(
        &self,
        route: Route,
        mut params: CallToolRequestParams,
        relay: Option<&Arc<call_relay::CallRelay>>,
        entered: &inflight::Entered<'_>,
    ) -> Result<CallToolResult, CallError> {
        if let Some(forwarder) = &route.forwarder
            && let Forwarded::Answered(result) = forwarder.call(&mut params, relay).await
        {
            return result;
        }
        // Boxed: rmcp's request future is large, and the forwarder answers most HTTP calls.
        Box::pin(self.call_by_peer(&route.peer, params, relay, entered)).await
    }

    /// Calls `params.name` on the upstream, waiting at most `timeout` for each answer, and
    /// retrying up to `retries` times on transient failures (timeout, connection lost) with
    /// jittered exponential backoff. Only the caller knows whether a retry is safe: pass
    /// `retries: 0` for tools that are not idempotent. Each attempt is observed by a span `S`
    /// (telemetry's, in the gateway).
    pub async fn call_with_retries<S: AttemptSpan>(
        &self,
        mut params: CallToolRequestParams,
        timeout: Duration,
        retries: u32,
        relay: Option<&Arc<call_relay::CallRelay>>,
    ) -> Attempted {
        let mut backoff = Backoff::starting_at(RETRY_BACKOFF_FIRST, RETRY_BACKOFF_MAX);
        let mut attempts = 0;
        loop {
            attempts += 1;
            // The last attempt takes the parameters; earlier ones send a copy.
            let sent = if attempts > retries {
                std::mem::take(&mut params)
            } else {
                params.clone()
            };
            let result = self.attempt::<S>(sent, timeout, attempts, relay).await;
            let transient = matches!(
                result,
                Err(CallError::Timeout(_) | CallError::ConnectionLost(_))
            );
            if !transient || attempts > retries {
                return Attempted { result, attempts };
            }
            tracing::info!(upstream = %self.name, attempt = attempts, "transient failure, retrying");
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }

    /// The longest [`call_with_retries`](Self::call_with_retries) can take with `timeout` and
    /// `retries`: every attempt timing out, and every backoff at its largest jitter. Lets a
    /// replica waiting for another's call tell "still running" from "never coming back".
    pub fn longest_call(timeout: Duration, retries: u32) -> Duration {
        // The jitter adds at most a quarter (see `Backoff::next_delay`).
        let longest_backoff = RETRY_BACKOFF_MAX.saturating_add(RETRY_BACKOFF_MAX / 4);
        timeout
            .saturating_mul(retries.saturating_add(1))
            .saturating_add(longest_backoff.saturating_mul(retries))
    }

    /// Keeps this upstream connected until `stop` is cancelled: connects, lists tools, re-lists
    /// them when the upstream says they changed, and reconnects with backoff when the connection
    /// ends. `changed` is told after every change of status or tools.
    pub async fn supervise(
        self: Arc<Self>,
        changed: mpsc::UnboundedSender<String>,
        stop: CancellationToken,
    ) {
        let mut backoff = Backoff::starting_at(Duration::from_millis(250), Duration::from_secs(30));
        loop {
            let tools_changed = Arc::new(Notify::new());
            let handler = UpstreamClient {
                tools_changed: tools_changed.clone(),
                upstream: self.name.clone(),
                progress: self.progress.clone(),
                in_flight: self.in_flight.clone(),
                extensions: self.extensions(),
            };
            let connected = tokio::select! {
                _ = stop.cancelled() => return,
                c = connect(&self.name, &self.transport, handler) => c,
            };
            let reason = match connected {
                Err(e) => e.to_string(),
                Ok(Connected {
                    connection,
                    forwarder,
                }) => {
                    let forwarder = forwarder.map(Arc::new);
                    let peer = connection.peer().clone();
                    let route = || Route {
                        peer: peer.clone(),
                        forwarder: forwarder.clone(),
                    };
                    peer.set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
                        .await;
                    call_relay::ask_for_every_log(&self.name, &peer).await;
                    match peer.list_all_tools().await {
                        Err(e) => format!("listing tools failed: {e}"),
                        Ok(tools) => {
                            tracing::info!(upstream = %self.name, tools = tools.len(), protocol = listen::protocol_of(&peer).as_deref().unwrap_or("unknown"), "upstream connected");
                            backoff.reset();
                            self.set(Status::Up, Some(route()), Some(tools));
                            let _ = changed.send(self.name.clone());
                            // A 2026-07-28 upstream's list changes come on a stream of their
                            // own, open while this connection is (`listen.rs`).
                            let _listening =
                                listen::start(&self.name, &peer, tools_changed.clone());
                            self.watch.connected(&self.name, &peer);
                            // Dropping `ended_by_peer` (on stop or on a failed re-list) cancels
                            // the connection, which also ends a stdio child.
                            let ended_by_peer = connection.waiting();
                            tokio::pin!(ended_by_peer);
                            let mut health = tokio::time::interval(HEALTH_CHECK_EVERY);
                            health.tick().await;
                            loop {
                                tokio::select! {
                                    _ = stop.cancelled() => return,
                                    _ = &mut ended_by_peer => break "connection closed".to_string(),
                                    // An HTTP upstream that went away does not close the client:
                                    // a ping notices, so its tools answer "unavailable" at once.
                                    _ = health.tick() => {
                                        match ping(&peer).await {
                                            Ok(()) => {}
                                            // A server busy with a call (blocking work on its
                                            // only event loop, as many Python servers do) answers
                                            // no ping until it is done: the calls' own timeouts
                                            // judge it, and cutting it would lose them.
                                            Err(Unhealthy::Silent) if self.in_flight.any() => {}
                                            Err(e) => break format!("health check failed: {e}"),
                                        }
                                    }
                                    // At most one pending: notifications during this
                                    // re-list cost one more, however many they are.
                                    () = tools_changed.notified() => {
                                        match peer.list_all_tools().await {
                                            Ok(tools) => {
                                                tracing::info!(upstream = %self.name, tools = tools.len(), "upstream tool list changed");
                                                self.set(Status::Up, Some(route()), Some(tools));
                                                let _ = changed.send(self.name.clone());
                                            }
                                            Err(e) => break format!("re-listing tools failed: {e}"),
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            };
            tracing::warn!(upstream = %self.name, %reason, "upstream down");
            self.set(Status::Down { reason }, None, None);
            let _ = changed.send(self.name.clone());
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }
}

/// The backoff between retries of a call: from this…
const RETRY_BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// …doubling up to this (before jitter).
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Exponential backoff with up to 25% jitter, so restarting children and retried calls do not
/// move in lockstep.
struct Backoff {
    first: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    fn starting_at(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            attempt: 0,
        }
    }
    fn reset(&mut self) {
        self.attempt = 0;
    }
    fn next_delay(&mut self) -> Duration {
        let base = self
            .first
            .saturating_mul(1 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        // Jitter from the clock's sub-second noise: no RNG dependency needed for this.
        let noise = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::from(d.subsec_nanos()))
            .unwrap_or(0);
        let base_ms = u64::try_from(base.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(base_ms.saturating_add(noise % (base_ms / 4 + 1)))
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: [`Upstream::longest_call`] bounds every attempt timing out plus the backoffs that
    /// really come between them, jitter included, so a waiting replica never gives up on a call
    /// that is still within its retries.
    #[test]
    fn longest_call_covers_every_attempt_and_backoff() {
        let timeout = Duration::from_millis(300);
        assert_eq!(Upstream::longest_call(timeout, 0), timeout);
        for retries in [1_u32, 3, 8] {
            let mut backoff = Backoff::starting_at(RETRY_BACKOFF_FIRST, RETRY_BACKOFF_MAX);
            let slept: Duration = (0..retries).map(|_| backoff.next_delay()).sum();
            let worst = timeout * (retries + 1) + slept;
            assert!(
                worst <= Upstream::longest_call(timeout, retries),
                "{retries} retries: {worst:?} > {:?}",
                Upstream::longest_call(timeout, retries)
            );
        }
    }
}
