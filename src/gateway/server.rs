//! The MCP face of the gateway: an rmcp `ServerHandler` whose tools are the catalog's, filtered
//! per caller. The caller was authenticated by the HTTP layer and rides in the request's
//! extensions; a request that somehow lacks one is refused.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ErrorData, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{RoleServer, ServerHandler};

use super::Gateway;
use crate::policy::Caller;

/// The protocol revisions the gateway serves (SPEC §5).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// One handler per session (or per stateless request): a cheap handle on the shared gateway.
#[derive(Clone)]
pub struct McpHandler {
    pub gateway: Arc<Gateway>,
}

/// The caller the HTTP layer attached to this request.
fn caller_of(context: &RequestContext<RoleServer>) -> Result<Arc<Caller>, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<Caller>>())
        .cloned()
        .ok_or_else(|| ErrorData::invalid_request("request is not authenticated", None))
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("narrowgate", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Tools behind this gateway are governed by contracts: arguments and results outside \
             a tool's schema are rejected with an error that names the path and rule.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    /// Tells a legacy session's client whenever the published tools change (SPEC §4.2: clients
    /// learn of re-narrowing). The task ends when the client is gone.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.gateway.watch_tools();
        changes.mark_unchanged();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if context.peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller_of(&context)?;
        let catalog = self.gateway.catalog();
        let tools: Vec<Tool> = catalog
            .exposed_tools()
            .filter(|t| caller.may_use(&t.contract.name))
            .map(|t| t.published.clone())
            .collect();
        // The list depends on who asks: no intermediary may serve it to anyone else.
        Ok(ListToolsResult::with_all_items(tools).with_cache_scope(CacheScope::Private))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller_of(&context)?;
        let protocol = context.protocol_version();
        self.gateway
            .call_tool(&caller, request, protocol.as_ref())
            .await
            .map(Into::into)
    }
}
