//! One-off connections to an upstream, for `check` and `init`: connect, list, disconnect.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{Implementation, Tool};
use tokio::sync::Notify;

use super::{Connected, Upstream, UpstreamClient, connect};

/// A connection of its own to `upstream`, for one listing.
async fn connect_once(
    upstream: &Upstream,
) -> Result<rmcp::service::RunningService<rmcp::RoleClient, UpstreamClient>, String> {
    let Connected { connection, .. } = connect(
        &upstream.name,
        &upstream.transport,
        UpstreamClient {
            tools_changed: Arc::new(Notify::new()),
            upstream: upstream.name.clone(),
            progress: upstream.progress.clone(),
            in_flight: Arc::default(),
            extensions: upstream.extensions(),
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(connection)
}

/// What one listing found: the tools, and the server as it named itself in `initialize`.
#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<Tool>,
    pub server: Option<Implementation>,
}

/// Connects once, lists the upstream's tools and disconnects: for `check` and `init`.
pub async fn list_tools_once(upstream: &Upstream, within: Duration) -> Result<Listing, String> {
    let attempt = async {
        let connection = connect_once(upstream).await?;
        let peer = connection.peer();
        let server = peer.peer_info().and_then(|info| info.server_info.clone());
        let tools = peer
            .list_all_tools()
            .await
            .map_err(|e| format!("listing tools failed: {e}"));
        let _ = connection.cancel().await;
        Ok(Listing {
            tools: tools?,
            server,
        })
    };
    tokio::time::timeout(within, attempt)
        .await
        .map_err(|_| format!("no answer within {within:?}"))?
}

/// What an upstream offers besides tools: its resources, resource templates and prompts (each
/// empty when it offers none, or does not answer the list).
#[derive(Debug, Default)]
pub struct Offer {
    pub resources: Vec<rmcp::model::Resource>,
    pub templates: Vec<rmcp::model::ResourceTemplate>,
    pub prompts: Vec<rmcp::model::Prompt>,
}

/// Connects once and lists the upstream's resources, templates and prompts: for `init`.
pub async fn list_offer_once(upstream: &Upstream, within: Duration) -> Result<Offer, String> {
    let attempt = async {
        let connection = connect_once(upstream).await?;
        let peer = connection.peer();
        let offer = Offer {
            resources: peer.list_all_resources().await.unwrap_or_default(),
            templates: peer.list_all_resource_templates().await.unwrap_or_default(),
            prompts: peer.list_all_prompts().await.unwrap_or_default(),
        };
        let _ = connection.cancel().await;
        Ok(offer)
    };
    tokio::time::timeout(within, attempt)
        .await
        .map_err(|_| format!("no answer within {within:?}"))?
}
