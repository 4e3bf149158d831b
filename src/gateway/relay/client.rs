//! The client's side of a relayed call ([`ClientRelay`]): the upstream's progress and log
//! messages about a call, sent to the client on the call's own stream, in order, before its
//! answer. Built only for calls rmcp serves (the direct path writes one JSON answer and has no
//! stream), and only with what the call asked for: every call gets cancellation; a channel and
//! a sending task only when it asked for progress or its session for log messages.

// Logging is deprecated by SEP-2577 (2026-07-28); 2025 revisions, which clients still speak,
// have it.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam};
use rmcp::service::{Peer, RequestContext};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::upstream::relay::{CallRelay, ClientRelay, severity};

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
    sender: mpsc::Sender<Relayed>,
    /// The session's level: messages below it are not sent.
    level: Option<LoggingLevel>,
}

impl ClientRelay for ToClient {
    fn progress(&self, progress: ProgressNotificationParam) {
        let _ = self.sender.try_send(Relayed::Progress(progress));
    }

    fn log(&self, message: LoggingMessageNotificationParam) {
        if self
            .level
            .is_some_and(|level| severity(message.level) >= severity(level))
        {
            let _ = self.sender.try_send(Relayed::Log(message));
        }
    }
}

/// Nothing to send: the call only needs cancellation.
struct Silent;

impl ClientRelay for Silent {
    fn progress(&self, _: ProgressNotificationParam) {}
    fn log(&self, _: LoggingMessageNotificationParam) {}
}

/// One call's relay, and the task sending its messages (if any).
pub struct Relay {
    pub call: Arc<CallRelay>,
    sending: Option<JoinHandle<()>>,
}

impl Relay {
    /// The relay of the call `context` serves; `level` is its session's logging level.
    pub fn for_call(context: &RequestContext<RoleServer>, level: Option<LoggingLevel>) -> Relay {
        let progress_token = context.meta.get_progress_token();
        let cancelled = context.ct.clone();
        if progress_token.is_none() && level.is_none() {
            let call = CallRelay {
                client: Arc::new(Silent),
                progress_token,
                cancelled,
            };
            return Relay {
                call: Arc::new(call),
                sending: None,
            };
        }
        let (sender, receiver) = mpsc::channel(MAX_PENDING);
        let sending = tokio::spawn(send_all(context.peer.clone(), receiver));
        let call = CallRelay {
            client: Arc::new(ToClient { sender, level }),
            progress_token,
            cancelled,
        };
        Relay {
            call: Arc::new(call),
            sending: Some(sending),
        }
    }

    /// Waits until every message of the call is sent (before its answer: the answer ends the
    /// call's stream). The call must be over (its relay dropped by everyone else).
    pub async fn finish(self) {
        let Relay { call, sending } = self;
        drop(call);
        if let Some(sending) = sending {
            // Bounded: a relay still held elsewhere (a stray clone) must not hold the answer.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), sending).await;
        }
    }
}

async fn send_all(peer: Peer<RoleServer>, mut receiver: mpsc::Receiver<Relayed>) {
    while let Some(message) = receiver.recv().await {
        let sent = match message {
            Relayed::Progress(progress) => peer.notify_progress(progress).await,
            Relayed::Log(message) => peer.notify_logging_message(message).await,
        };
        if sent.is_err() {
            return;
        }
    }
}
