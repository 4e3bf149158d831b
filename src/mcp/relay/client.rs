//! The client's side of a relayed call ([`ClientRelay`]): the upstream's progress and log
//! messages about a call, sent to the client in order, before its answer (progress on the
//! call's own stream, log messages on the session's standalone one, where rmcp's server sends
//! every other notification), and the upstream's requests of the client (`asks`). Built only
//! for calls rmcp serves (the direct path writes one JSON answer and has no stream), and only
//! with what the call asked for: every call gets cancellation and requests; a channel and a
//! sending task only when it asked for progress or its session for log messages.

// Logging is deprecated by SEP-2577 (2026-07-28); 2025 revisions, which clients still speak,
// have it.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam};
use rmcp::service::{Peer, RequestContext};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::mcp::relay::asks::{Asker, Way};
use crate::upstream::call_relay::{Asked, CallRelay, ClientRelay, severity};

/// Messages waiting to be sent to one client, per call: beyond these, more are dropped (an
/// upstream must not make the gateway hold an unbounded backlog for a slow client).
const MAX_PENDING: usize = 256;

enum Relayed {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

/// Sends to the client through a bounded channel drained by one task, so messages keep their
/// order.
struct ToClient {
    /// `None`: nothing to send (no progress asked for, no level set).
    sender: Option<mpsc::Sender<Relayed>>,
    /// The session's level: messages below it are not sent.
    level: Option<LoggingLevel>,
    /// For a log message that comes after the call's answer.
    peer: Peer<RoleServer>,
    asker: Asker,
}

impl ClientRelay for ToClient {
    fn progress(&self, progress: ProgressNotificationParam) {
        if let Some(sender) = &self.sender {
            let _ = sender.try_send(Relayed::Progress(progress));
        }
    }

    fn log(&self, message: LoggingMessageNotificationParam) {
        let Some(sender) = &self.sender else {
            return;
        };
        if self
            .level
            .is_none_or(|level| severity(message.level) < severity(level))
        {
            return;
        }
        if self.asker.ended.is_cancelled() {
            // A message that came just after the answer (`upstream::inflight`): the session
            // still gets it, as it would have from the upstream directly.
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let _ = peer.notify_logging_message(message).await;
            });
            return;
        }
        let _ = sender.try_send(Relayed::Log(message));
    }

    fn ask(&self, method: &str, params: serde_json::Value) -> Asked {
        self.asker.ask(method, params)
    }
}

/// One call's relay, and the task sending its messages (if any).
pub struct Relay {
    pub call: Arc<CallRelay>,
    sending: Option<JoinHandle<()>>,
    /// Cancelled when the call has its answer: requests still waiting for the client end.
    ended: tokio_util::sync::CancellationToken,
}

/// What a call's relay needs to know of the tool called.
pub struct Called {
    /// The exposed name (as the client called it).
    pub tool: String,
    /// Its contract's `relay:` (refused: all false).
    pub policy: crate::contract::relay_policy::RelayPolicy,
    /// Whether the call belongs to a session.
    pub in_session: bool,
    /// A 2026-07-28 stateless call: where the upstream's requests go to be asked through MRTR
    /// (`parked`).
    pub questions: Option<crate::mrtr::parked::Questions>,
}

impl Relay {
    /// The relay of the call `context` serves; `level` is its session's logging level.
    pub fn for_call(
        context: &RequestContext<RoleServer>,
        level: Option<LoggingLevel>,
        called: Called,
    ) -> Relay {
        let progress_token = context.meta.get_progress_token();
        let ended = tokio_util::sync::CancellationToken::new();
        // A parked call outlives this request: it is cancelled by its own token, which each of
        // its rounds cancels when their client goes away (`parked`).
        let (way, capabilities, cancelled) = match (called.in_session, called.questions) {
            (true, _) => (
                Way::Stream {
                    peer: context.peer.clone(),
                    origin: context.id.clone(),
                },
                context
                    .peer
                    .peer_info()
                    .map(|info| info.capabilities.clone()),
                context.ct.clone(),
            ),
            (false, Some(questions)) => (
                Way::Mrtr(questions),
                context.meta.client_capabilities(),
                tokio_util::sync::CancellationToken::new(),
            ),
            (false, None) => (
                Way::Not("the client's stateless call declared nothing it could answer"),
                context.meta.client_capabilities(),
                context.ct.clone(),
            ),
        };
        let asker = Asker {
            way,
            capabilities,
            tool: called.tool,
            policy: called.policy,
            ended: ended.clone(),
            asking: Arc::new(tokio::sync::Semaphore::new(
                crate::mcp::relay::asks::MAX_ASKING,
            )),
        };
        let (sender, sending) = if progress_token.is_none() && level.is_none() {
            (None, None)
        } else {
            let (sender, receiver) = mpsc::channel(MAX_PENDING);
            let sending = tokio::spawn(send_all(context.peer.clone(), receiver, ended.clone()));
            (Some(sender), Some(sending))
        };
        let call = CallRelay {
            client: Arc::new(ToClient {
                sender,
                level,
                peer: context.peer.clone(),
                asker,
            }),
            progress_token,
            cancelled,
        };
        Relay {
            call: Arc::new(call),
            sending,
            ended,
        }
    }

    /// Waits until every message queued for the call is sent (before its answer: the answer
    /// ends the call's stream). The call must be over; the relay may still be held a little
    /// longer (`upstream::inflight` keeps it for late log messages), which does not hold this.
    pub async fn finish(self) {
        let Relay {
            call,
            sending,
            ended,
        } = self;
        ended.cancel();
        drop(call);
        if let Some(sending) = sending {
            // Bounded: a relay still held elsewhere (a stray clone) must not hold the answer.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), sending).await;
        }
    }
}

/// Sends the queued messages in order until the call ends (`ended`), then what is still queued.
async fn send_all(
    peer: Peer<RoleServer>,
    mut receiver: mpsc::Receiver<Relayed>,
    ended: tokio_util::sync::CancellationToken,
) {
    loop {
        let message = tokio::select! {
            biased;
            message = receiver.recv() => match message {
                Some(message) => message,
                None => return,
            },
            () = ended.cancelled() => {
                while let Ok(message) = receiver.try_recv() {
                    if send(&peer, message).await.is_err() {
                        return;
                    }
                }
                return;
            }
        };
        if send(&peer, message).await.is_err() {
            return;
        }
    }
}

async fn send(
    peer: &Peer<RoleServer>,
    message: Relayed,
) -> Result<(), rmcp::service::ServiceError> {
    match message {
        Relayed::Progress(progress) => peer.notify_progress(progress).await,
        Relayed::Log(message) => peer.notify_logging_message(message).await,
    }
}
