//! The MCP face of the gateway: an rmcp `ServerHandler` whose tools are the catalog's, filtered
//! per caller. The caller was authenticated by the HTTP layer and rides in the request's
//! extensions; a request that somehow lacks one is refused.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverResult, ErrorData,
    Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ResultType, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};

use super::Gateway;
use super::approvals_step::{APPROVAL_ID_META, Reach};
use super::request::Admitted;
use crate::policy::Caller;
use crate::telemetry::{self, Inbound};

/// The protocol revisions the gateway serves (SPEC §5).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// rmcp's handler: one per session (or per stateless request), holding nothing. Each request is
/// served by the version it was admitted under, which the HTTP layer put in the request's
/// [`Admitted`] (rmcp hands the handler the HTTP request's `Parts` in the context's extensions).
#[derive(Clone, Copy)]
pub struct McpHandler;

/// The admission of the HTTP request behind `extensions` (an rmcp context's).
fn admitted_of(extensions: &rmcp::model::Extensions) -> Result<&Admitted, ErrorData> {
    Admitted::of(extensions.get::<http::request::Parts>())
        .ok_or_else(|| ErrorData::invalid_request("request was not admitted", None))
}

/// The caller the HTTP layer attached to this request.
fn caller_of(admitted: &Admitted) -> Result<&Arc<Caller>, ErrorData> {
    admitted
        .caller
        .as_ref()
        .ok_or_else(|| ErrorData::invalid_request("request is not authenticated", None))
}

/// What telemetry's SERVER span is made of, from rmcp's request context.
fn inbound(context: &RequestContext<RoleServer>) -> Inbound<'_> {
    let parts = context.extensions.get::<http::request::Parts>();
    Inbound {
        id: &context.id,
        meta: &context.meta,
        parts,
        protocol: context.protocol_version(),
        caller: Admitted::of(parts)
            .and_then(|a| a.caller.as_deref())
            .map(|c| c.name.as_str()),
    }
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
        // Every version shares the one change signal: the admitted one's is everyone's.
        let Ok(admitted) = admitted_of(&context.extensions) else {
            return;
        };
        let mut changes = admitted.gateway.watch_tools();
        changes.mark_unchanged();
        tokio::spawn(async move {
            // Checked every few seconds too, so the task ends with its session even when the
            // tools never change (one task per closed session would otherwise pile up).
            let mut alive = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || context.peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                    }
                    _ = alive.tick() => {
                        if context.peer.is_transport_closed() {
                            break;
                        }
                    }
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// The 2026-07-28 way to learn of tool-list changes: a `subscriptions/listen` stream.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = admitted_of(&context.request_context().extensions)?
            .gateway
            .watch_tools();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The default `initialize`, inside its SERVER span (like every request the gateway serves).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        telemetry::serve("initialize", None, inbound(&context), async || {
            context.peer.set_peer_info(request.clone());
            self.negotiate_initialize(&request)
        })
        .await
    }

    /// The default `server/discover` (2026-07-28), inside its SERVER span.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        telemetry::serve("server/discover", None, inbound(&context), async || {
            Ok(DiscoverResult::from_server_info(
                PROTOCOL_VERSIONS.to_vec(),
                ServerHandler::get_info(self),
            ))
        })
        .await
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        telemetry::serve("ping", None, inbound(&context), async || Ok(())).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        telemetry::serve("tools/list", None, inbound(&context), async || {
            let admitted = admitted_of(&context.extensions)?;
            let caller = caller_of(admitted)?;
            let catalog = admitted.gateway.catalog();
            let tools: Vec<Tool> = catalog
                .exposed_tools()
                .filter(|t| caller.may_use(&t.contract.name))
                .map(|t| t.published.clone())
                .collect();
            // The list depends on who asks: no intermediary may serve it to anyone else.
            Ok(ListToolsResult::with_all_items(tools).with_cache_scope(CacheScope::Private))
        })
        .await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: the pipeline's future is large, and rmcp moves the handler's future into a
        // spawned task (a memcpy of all of it).
        let gateway = &admitted_of(&context.extensions)?.gateway;
        Box::pin(answer_tools_call(
            gateway,
            request,
            inbound(&context),
            Some(&context.peer),
        ))
        .await
        .map(Into::into)
    }
}

/// Answers one `tools/call` inside its SERVER span: for rmcp's handler above, and for the
/// gateway's own direct path (`super::direct`).
pub(super) async fn answer_tools_call(
    gateway: &Gateway,
    request: CallToolRequestParams,
    inbound: Inbound<'_>,
    peer: Option<&Peer<RoleServer>>,
) -> Result<CallToolResult, ErrorData> {
    // Span names stay a bounded set: a name that is no exposed tool is the client's text.
    let catalog = gateway.catalog();
    let exposed = catalog.exposed(&request.name);
    let tool = exposed.is_some().then(|| request.name.clone());
    let caller = Admitted::of(inbound.parts)
        .ok_or_else(|| ErrorData::invalid_request("request was not admitted", None))
        .and_then(caller_of)
        .cloned();
    let protocol = inbound.protocol.clone();
    // Only a tool that asks for approval reaches its client while it runs.
    let reach = match exposed {
        Some(t) if t.contract.approval != crate::contract::Approval::None => Reach {
            peer: peer.cloned(),
            client_gone: Admitted::of(inbound.parts).and_then(|a| a.client_gone.clone()),
            approval_id: inbound
                .meta
                .get(APPROVAL_ID_META)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
        },
        _ => Reach::default(),
    };
    drop(catalog);
    telemetry::serve("tools/call", tool.as_deref(), inbound, async || {
        let caller = caller?;
        let mut result = gateway
            .call_tool(&caller, request, protocol.as_ref(), &reach)
            .await?;
        // Results relayed from older upstreams lack `resultType`, which 2026-07-28 clients
        // require; rmcp strips it again for older clients.
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result)
    })
    .await
}
