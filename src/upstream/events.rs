//! What upstreams tell the gateway about their resources and prompts: a resource changed
//! (`notifications/resources/updated`), or the list of resources or prompts did. Every upstream
//! connection is shared by all of the gateway's client sessions, so these arrive once, here, and
//! the gateway decides which sessions may hear of each (`mcp::handler`).

use std::sync::OnceLock;

use tokio::sync::broadcast;

/// One upstream notification about resources or prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceEvent {
    /// The resource at this URI changed.
    Updated(String),
    ResourcesListChanged,
    PromptsListChanged,
}

/// How many events a slow session may fall behind before it misses some (it is then told of
/// none of the missed ones: a lagging receiver skips ahead).
const BACKLOG: usize = 256;

fn channel() -> &'static broadcast::Sender<ResourceEvent> {
    static CHANNEL: OnceLock<broadcast::Sender<ResourceEvent>> = OnceLock::new();
    CHANNEL.get_or_init(|| broadcast::channel(BACKLOG).0)
}

/// Every event from now on, from every upstream.
pub fn resource_events() -> broadcast::Receiver<ResourceEvent> {
    channel().subscribe()
}

/// Tells every listening session's task of `event` (nobody listening: dropped).
pub(super) fn publish(event: ResourceEvent) {
    let _ = channel().send(event);
}
