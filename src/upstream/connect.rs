//! Opening one MCP client connection to an upstream: a stdio child process or a Streamable HTTP
//! server, through rmcp's client. The connection reports tool-list changes on a channel. An HTTP
//! connection also comes with a [`Forwarder`] for `tools/call` on the same session.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ProtocolVersion;
#[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams log
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use tokio::sync::Notify;

use super::call_relay::{self, ProgressRoutes};
use super::forward::Forwarder;
use super::inflight::InFlight;
use super::tap::{SessionTap, TappedClient};
use crate::config::UpstreamTransport;

/// The gateway's side of an upstream connection: it identifies itself and passes
/// `notifications/tools/list_changed` on, so the tools can be re-read and re-narrowed.
pub struct UpstreamClient {
    /// Told of every list_changed; it keeps at most one pending, so any number of them in a row
    /// costs one more re-list, not one each.
    pub tools_changed: Arc<Notify>,
    /// The upstream's name, for its log messages.
    pub upstream: String,
    /// Where progress for the gateway's tokens goes (`relay`).
    pub progress: Arc<ProgressRoutes>,
    /// The calls in flight on this upstream: whose a request or log message is (`inflight`).
    pub in_flight: Arc<InFlight>,
    /// The client extensions declared to the upstream (`Upstream::declare_extensions`).
    pub extensions: Vec<String>,
}

impl UpstreamClient {
    /// Another handler for the same upstream (a connection made again).
    fn copy(&self) -> UpstreamClient {
        UpstreamClient {
            tools_changed: self.tools_changed.clone(),
            upstream: self.upstream.clone(),
            progress: self.progress.clone(),
            in_flight: self.in_flight.clone(),
            extensions: self.extensions.clone(),
        }
    }

    /// The relay of the call a request rmcp received belongs to (`inflight`): the call whose
    /// answer stream it came on; when it came on a stream tied to no call (an HTTP upstream's
    /// standalone stream, where servers at the 2025 revisions may send a call's requests) or
    /// the transport cannot tell (stdio), the only call in flight.
    async fn relay_of(
        &self,
        context: &rmcp::service::RequestContext<RoleClient>,
    ) -> Option<Arc<call_relay::CallRelay>> {
        match context
            .extensions
            .get::<rmcp::service::InboundStreamOrigin>()
        {
            Some(rmcp::service::InboundStreamOrigin::OutboundRequest(id)) => {
                self.in_flight.of_request(id).await
            }
            Some(rmcp::service::InboundStreamOrigin::Unassociated) | None => {
                self.in_flight.only_one()
            }
        }
    }

    /// Relays `method` to the client of the call it belongs to and reads the client's answer
    /// as `T`.
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: serde_json::Value,
        context: &rmcp::service::RequestContext<RoleClient>,
    ) -> Result<T, rmcp::ErrorData> {
        let answer = call_relay::ask(self.relay_of(context).await, method, params).await?;
        serde_json::from_value(answer).map_err(|error| {
            rmcp::ErrorData::internal_error(
                format!("the client's answer to {method} is malformed: {error}"),
                None,
            )
        })
    }
}

/// The capabilities the gateway declares to upstreams: it relays sampling, elicitation (form
/// and URL) and roots to the client whose call asks, when that client declared them too; and
/// the `extensions` its contracts use (MCP Apps' UI: a host that renders `text/html` apps).
fn declared_capabilities(extensions: &[String]) -> ClientCapabilities {
    let mut declared = serde_json::json!({
        "sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}
    });
    if !extensions.is_empty() {
        let settings = |id: &String| match id.as_str() {
            "io.modelcontextprotocol/ui" => {
                serde_json::json!({"mimeTypes": ["text/html;profile=mcp-app"]})
            }
            _ => serde_json::json!({}),
        };
        let map: serde_json::Map<String, serde_json::Value> = extensions
            .iter()
            .map(|id| (id.clone(), settings(id)))
            .collect();
        declared["extensions"] = serde_json::Value::Object(map);
    }
    serde_json::from_value(declared).unwrap_or_default()
}

/// `params` as JSON, for the gateway's side of a relay.
fn json_of<T: serde::Serialize>(params: &T) -> Result<serde_json::Value, rmcp::ErrorData> {
    serde_json::to_value(params)
        .map_err(|error| rmcp::ErrorData::internal_error(error.to_string(), None))
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            declared_capabilities(&self.extensions),
            Implementation::new("narrowgate", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        super::events::publish(super::events::ResourceEvent::Updated(params.uri));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        super::events::publish(super::events::ResourceEvent::ResourcesListChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        super::events::publish(super::events::ResourceEvent::PromptsListChanged);
    }

    /// `roots/list` is the calling client's to answer (relayed); the gateway makes up none
    /// (rmcp's default, no roots, would pass for the user's).
    #[allow(deprecated)] // roots/list: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams ask
    async fn list_roots(
        &self,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        self.ask("roots/list", serde_json::json!({}), &context)
            .await
    }

    /// `elicitation/create` is the calling client's user's to answer (relayed; rmcp's default
    /// declines, which the upstream would take for the user's answer).
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.ask("elicitation/create", json_of(&request)?, &context)
            .await
    }

    /// `sampling/createMessage` is the calling client's model's to answer (relayed).
    #[allow(deprecated)] // sampling: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams ask
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        self.ask("sampling/createMessage", json_of(&params)?, &context)
            .await
    }

    /// Progress that came through rmcp (a stdio upstream, or a call rmcp sent): to the client
    /// whose call has this token.
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.deliver(params);
    }

    /// A message that came through rmcp (stdio, or an HTTP upstream's standalone stream) says
    /// not which call it is about: it is the only call in flight's, if there is exactly one, or
    /// the call's that just ended (`inflight`), else the gateway's log.
    #[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams log
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        match self.in_flight.owner_of_log() {
            Some(call) => call.client.log(params),
            None => call_relay::log_unrelated(&self.upstream, &params),
        }
    }
}

pub type Connection = RunningService<RoleClient, UpstreamClient>;

/// An open connection, and for an HTTP upstream the fast path of its `tools/call`.
pub struct Connected {
    pub connection: Connection,
    pub forwarder: Option<Forwarder>,
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("invalid header `{0}` for the upstream")]
    Header(String),
    #[error("invalid upstream URL `{0}`")]
    Url(String),
    #[error("MCP handshake failed: {0}")]
    Handshake(String),
    /// A stdio child that did not get through the handshake, with what it last wrote.
    #[error("MCP handshake failed: {error}{}", stderr_note(.stderr))]
    Started { error: String, stderr: Vec<String> },
}

/// How long a failed child's stderr is waited for, to report its last words.
const STDERR_WITHIN: Duration = Duration::from_secs(2);

/// The last lines of a failed child's stderr, on one line (reasons go into logs, `/readyz` and
/// `check`, which show one line per upstream).
fn stderr_note(lines: &[String]) -> String {
    if lines.is_empty() {
        return " (the server wrote nothing on stderr)".to_string();
    }
    format!("; the server's stderr ended with: {}", lines.join(" | "))
}

/// Connects to `name` over its transport. A stdio child's stderr goes to the log under its name
/// (bounded: `stderr.rs`).
pub async fn connect(
    name: &str,
    transport: &UpstreamTransport,
    handler: UpstreamClient,
) -> Result<Connected, ConnectError> {
    match transport {
        UpstreamTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args);
            // The child gets PATH, HOME and exactly the configured variables: none of the
            // gateway's own secrets leak into it.
            cmd.env_clear();
            for var in ["PATH", "HOME"] {
                if let Ok(value) = std::env::var(var) {
                    cmd.env(var, value);
                }
            }
            cmd.envs(env);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| ConnectError::Spawn {
                    command: command.clone(),
                    source,
                })?;
            let tail = super::stderr::Tail::default();
            if let Some(stderr) = stderr {
                tokio::spawn(super::stderr::log_stderr(
                    name.to_string(),
                    stderr,
                    tail.clone(),
                ));
            }
            // The same lifecycle as HTTP (`lifecycle`): the Python and Node servers operators
            // run answer `server/discover` at once, either with their versions or with
            // -32601, on which rmcp falls back to `initialize` without waiting.
            let connection = match handler.serve_with_lifecycle(child, lifecycle()).await {
                Ok(connection) => connection,
                Err(e) => {
                    return Err(ConnectError::Started {
                        error: plain(&e.to_string()),
                        stderr: tail.last_lines(STDERR_WITHIN).await,
                    });
                }
            };
            Ok(Connected {
                connection,
                forwarder: None,
            })
        }
        UpstreamTransport::Http {
            url,
            headers,
            forwarder,
        } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::try_from(k.as_str())
                    .map_err(|_| ConnectError::Header(k.clone()))?;
                let value = http::HeaderValue::try_from(v.as_str())
                    .map_err(|_| ConnectError::Header(k.clone()))?;
                custom.insert(name, value);
            }
            let again = handler.copy();
            let connected =
                connect_http(name, url, custom.clone(), *forwarder, handler, lifecycle()).await?;
            let peer = connected.connection.peer();
            let Some(modern) = peer
                .peer_info()
                .filter(|info| !info.protocol_version.has_initialize())
                .map(|info| info.capabilities.clone())
            else {
                return Ok(connected);
            };
            // An upstream that serves less on 2026-07-28 than in a session is spoken to in a
            // session (`revision`).
            let Some(session) = super::revision::session_capabilities(url, custom.clone()).await
            else {
                return Ok(connected);
            };
            let missing = super::revision::missing_on_modern(&modern, &session);
            if missing.is_empty() {
                return Ok(connected);
            }
            tracing::info!(upstream = %name, missing = %missing.join(", "), "the upstream declares less on 2026-07-28 than in a 2025-11-25 session: spoken to in a session");
            let _ = connected.connection.cancel().await;
            connect_http(
                name,
                url,
                custom,
                *forwarder,
                again,
                ClientLifecycleMode::Initialize,
            )
            .await
        }
    }
}

/// Connects to the Streamable HTTP upstream at `url` with `lifecycle`, with the [`Forwarder`]
/// for its calls unless `forwarded` is false (`forwarder: false`: rmcp's client sends them).
async fn connect_http(
    name: &str,
    url: &str,
    custom: HashMap<http::HeaderName, http::HeaderValue>,
    forwarded: bool,
    handler: UpstreamClient,
    lifecycle: ClientLifecycleMode,
) -> Result<Connected, ConnectError> {
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .reinit_on_expired_session(true)
        .max_concurrent_requests(256);
    // rmcp's default client keeps no idle connection: one TCP connection per call.
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(256)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
    let parsed = reqwest::Url::parse(url).map_err(|_| ConnectError::Url(url.to_string()))?;
    let client = TappedClient {
        http,
        tap: Arc::new(SessionTap::default()),
    };
    let forwarder = forwarded.then(|| {
        Forwarder::new(
            name,
            parsed,
            &client,
            handler.tools_changed.clone(),
            handler.progress.clone(),
        )
        .identified_as(&handler.get_info())
    });
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let connection = handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| ConnectError::Handshake(plain(&e.to_string())))?;
    Ok(Connected {
        connection,
        forwarder,
    })
}

/// How every connection opens, stdio or HTTP: 2026-07-28 when the upstream offers it (tools it
/// offers only there are seen), `initialize` at 2025-11-25 when it answers `server/discover`
/// as a legacy server does (an error, such as -32601: rmcp falls back at once). Only an
/// upstream that leaves `server/discover` unanswered costs rmcp's 10 s probe before the
/// fallback.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// rmcp's transport errors name its generic types (`Transport [rmcp::transport::worker::...]
/// error: ...`); operators only need what follows.
fn plain(message: &str) -> String {
    match message.rfind("] error: ") {
        Some(at) => message[at + "] error: ".len()..].to_string(),
        None => message.to_string(),
    }
}
