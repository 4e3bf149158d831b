//! The gateway's other edge: MCP over its own stdin and stdout, for the one client that
//! launched it (a desktop app, an IDE, an SDK's stdio client).
//!
//! The HTTP edge authenticates each request and puts its [`Admitted`] into the request's
//! extensions, where rmcp's handler finds it. Here the client is known once, when it launches the
//! gateway ([`StdioCaller`]), and every message it sends is admitted the same way before rmcp
//! sees it ([`Admitting`]): the version in force at its arrival, the caller as that version knows
//! it. So a stdio request meets the same handler, the same pipeline and the same checks as an
//! HTTP one, in the same order; what is HTTP's alone (Host and Origin, bodies, sessions, TLS)
//! has nothing to check on a pipe the client owns.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{GetExtensions, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio_util::sync::CancellationToken;

use crate::policy::Caller;
use crate::request::Admitted;
use crate::runtime::Version;
use crate::runtime::live::Live;

/// Who the stdio client is, as it launched the gateway.
#[derive(Clone)]
pub enum StdioCaller {
    /// An API key or OAuth token (`NARROWGATE_API_KEY`): the caller it authenticates as.
    Key(String),
    /// `stdio.caller` of the configuration: that caller, by name.
    Named(String),
}

/// Why a stdio client cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error(
        "NARROWGATE_API_KEY is no caller's key in {config}: set it to the key of one of `callers` (or unset it and name the caller in `stdio: {{caller: NAME}}`)"
    )]
    UnknownKey { config: String },
    #[error(
        "no caller for the stdio client: set NARROWGATE_API_KEY to a caller's key, or name one in the configuration's `stdio: {{caller: NAME}}` ({config})"
    )]
    NoCaller { config: String },
    #[error("`stdio.caller` names `{name}`, which is no caller of {config}")]
    UnknownName { name: String, config: String },
}

impl StdioCaller {
    /// The caller in `gateway`: a key as the HTTP edge authenticates one, a name as configured.
    pub async fn resolve(&self, gateway: &Version) -> Result<Arc<Caller>, StdioError> {
        let config = gateway.config.source.display().to_string();
        match self {
            StdioCaller::Key(key) => gateway
                .authenticator
                .authenticate(Some(&format!("Bearer {key}")))
                .await
                .map_err(|_| StdioError::UnknownKey { config }),
            StdioCaller::Named(name) => {
                gateway
                    .authenticator
                    .named(name)
                    .ok_or_else(|| StdioError::UnknownName {
                        name: name.clone(),
                        config,
                    })
            }
        }
    }

    /// The client's caller: `key` (the environment's) when set, else `stdio.caller` of the
    /// configuration.
    pub fn of(key: Option<String>, gateway: &Version) -> Result<StdioCaller, StdioError> {
        match (key.filter(|k| !k.is_empty()), &gateway.config.stdio) {
            (Some(key), _) => Ok(StdioCaller::Key(key)),
            (None, Some(stdio)) => Ok(StdioCaller::Named(stdio.caller.clone())),
            (None, None) => Err(StdioError::NoCaller {
                config: gateway.config.source.display().to_string(),
            }),
        }
    }
}

/// A transport whose every incoming message carries its admission, as the HTTP edge's do: the
/// version in force and the caller as that version knows it. A caller a reload removed is
/// admitted without one, and the handler refuses its requests.
pub struct Admitting<T> {
    inner: T,
    live: Arc<Live>,
    caller: StdioCaller,
    /// Cancelled when the client closes its end: calls waiting for an approver stop waiting.
    gone: CancellationToken,
}

impl<T> Admitting<T> {
    pub fn new(inner: T, live: Arc<Live>, caller: StdioCaller, gone: CancellationToken) -> Self {
        Admitting {
            inner,
            live,
            caller,
            gone,
        }
    }
}

/// The session id the stdio connection's requests carry, as an HTTP session's would.
const STDIO_SESSION: &str = "stdio";

/// What the HTTP edge would have put into a request's `Parts` by the time rmcp sees it.
async fn admission(
    live: &Live,
    caller: &StdioCaller,
    gone: &CancellationToken,
) -> http::request::Parts {
    let gateway = live.current();
    let caller = match caller.resolve(&gateway).await {
        Ok(caller) => Some(caller),
        Err(e) => {
            tracing::warn!("stdio: {e}; the request is refused");
            None
        }
    };
    let admitted = Admitted {
        client_gone: gateway.any_approver.then(|| gone.clone()),
        caller,
        body: None,
        gateway,
    };
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = http::Method::POST;
    // The one connection is one session: the upstream's requests during a call (sampling,
    // elicitation, roots) go to the client on it, and its logging level holds for it.
    parts.headers.insert(
        "mcp-session-id",
        http::HeaderValue::from_static(STDIO_SESSION),
    );
    parts.extensions.insert(admitted);
    parts
}

impl<T> Transport<RoleServer> for Admitting<T>
where
    T: Transport<RoleServer>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await;
        match &mut message {
            Some(JsonRpcMessage::Request(request)) => {
                let parts = admission(&self.live, &self.caller, &self.gone).await;
                request.request.extensions_mut().insert(parts);
            }
            Some(JsonRpcMessage::Notification(notification)) => {
                let parts = admission(&self.live, &self.caller, &self.gone).await;
                notification.notification.extensions_mut().insert(parts);
            }
            Some(_) => {}
            None => self.gone.cancel(),
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
