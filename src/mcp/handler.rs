//! The MCP face of the gateway: an rmcp `ServerHandler` whose tools are the catalog's, filtered
//! per caller. The caller was authenticated by the HTTP layer and rides in the request's
//! extensions; a request that somehow lacks one is refused.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    DiscoverResult, ErrorData, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool,
};
use rmcp::model::{GetPromptResult, ReadResourceResult, ResultType};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};

use crate::contract::relay_policy::RelayPolicy;
use crate::mcp::tools_call::{Parking, answer_tools_call};
use crate::policy::Caller;
use crate::request::Admitted;
use crate::runtime::Version;
use crate::telemetry::{self, Inbound};

/// The protocol revisions the gateway serves (docs/clients.md).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// rmcp's handler: one per session (or per stateless request). Each request is served by the
/// version it was admitted under, which the HTTP layer put in the request's [`Admitted`] (rmcp
/// hands the handler the HTTP request's `Parts` in the context's extensions). It holds one thing
/// of its session: the resource URIs the session subscribed to.
#[derive(Clone, Default)]
pub struct McpHandler {
    subscribed: crate::mcp::subscriptions::Subscribed,
    /// The running versions, for what rmcp asks outside any request (`get_info`: the
    /// capabilities a `subscriptions/listen` filter is held to).
    live: Option<Arc<crate::runtime::live::Live>>,
}

impl McpHandler {
    pub fn new(live: Arc<crate::runtime::live::Live>) -> McpHandler {
        McpHandler {
            subscribed: Default::default(),
            live: Some(live),
        }
    }
}

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
    #[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28; 2025 clients use it
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        if let Some(live) = &self.live {
            declare_capabilities(&live.current(), &mut capabilities);
        }
        ServerConfig::new(capabilities)
        .with_server_info(Implementation::new("narrowgate", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Tools behind this gateway are governed by contracts: arguments and results outside \
             a tool's schema are rejected with an error that names the path and rule.",
        )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    /// Tells a legacy session's client whenever the published tools change (clients
    /// learn of re-narrowing). The task ends when the client is gone.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Every version shares the one change signal: the admitted one's is everyone's.
        let Ok(admitted) = admitted_of(&context.extensions) else {
            return;
        };
        if let Ok(caller) = caller_of(admitted) {
            crate::mcp::subscriptions::relay(
                admitted.gateway.clone(),
                caller.clone(),
                self.subscribed.clone(),
                context.peer.clone(),
            );
        }
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
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(crate::mcp::subscriptions::accepted_filter(requested))
    }

    /// The 2026-07-28 way to learn of changes: a `subscriptions/listen` stream
    /// (`subscriptions::listen`).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let admitted = admitted_of(&context.request_context().extensions)?;
        let gateway = admitted.gateway.clone();
        let caller = caller_of(admitted)?.clone();
        crate::mcp::subscriptions::listen(gateway, caller, context).await
    }

    /// The default `initialize`, inside its SERVER span (like every request the gateway serves).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        telemetry::serve("initialize", None, inbound(&context), async || {
            context.peer.set_peer_info(request.clone());
            // rmcp's negotiation offers the newest version to a client it cannot serve as asked;
            // the gateway offers the closest (`relay::version`).
            let mut result = self.negotiate_initialize(&request)?;
            result.protocol_version =
                crate::mcp::version::offered(&request.protocol_version, PROTOCOL_VERSIONS);
            if let Ok(admitted) = admitted_of(&context.extensions) {
                declare_capabilities(&admitted.gateway, &mut result.capabilities);
            }
            Ok(result)
        })
        .await
    }

    /// The default `server/discover` (2026-07-28), inside its SERVER span.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        telemetry::serve("server/discover", None, inbound(&context), async || {
            let mut info = ServerHandler::get_info(self);
            if let Ok(admitted) = admitted_of(&context.extensions) {
                declare_capabilities(&admitted.gateway, &mut info.capabilities);
            }
            Ok(DiscoverResult::from_server_info(
                PROTOCOL_VERSIONS.to_vec(),
                info,
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
            let contracts = &admitted.gateway.contracts;
            // MCP Apps: app-only tools for hosts of the UI extension, `_meta.ui` for those
            // who may read the UI (`contract::ui`).
            let peer_info = context.peer.peer_info();
            let ui_client = crate::contract::ui::client_declares_ui(
                peer_info.as_ref().map(|i| &i.capabilities),
                &context.meta,
            );
            // A searching caller (`discovery: search`) is listed the meta-tools and its
            // `always` tools; it finds the rest with `search_tools`.
            let searching = caller.searches();
            let mut tools: Vec<Tool> = if searching {
                crate::discovery::meta_tools().into()
            } else {
                Vec::new()
            };
            let listed = catalog
                .exposed_tools()
                .filter(|t| caller.may_use(&t.contract.name))
                .filter(|t| !searching || caller.always_lists(&t.contract.name))
                .filter(|t| ui_client || !t.contract.ui.as_ref().is_some_and(|u| u.app_only()))
                .map(|t| {
                    let mut tool = t.published.clone();
                    if let Some(ui) = contracts.ui_meta(&t.contract, |uri| caller.may_read(uri)) {
                        tool.meta.get_or_insert_default().0.extend(ui);
                    }
                    tool
                });
            tools.extend(listed);
            // The list depends on who asks: no intermediary may serve it to anyone else. Only
            // 2026-07-28 has caching hints; older revisions never carry `cacheScope`.
            let list = ListToolsResult::with_all_items(tools);
            Ok(match context.protocol_version() {
                Some(v) if v >= ProtocolVersion::V_2026_07_28 => list
                    .with_cache_scope(CacheScope::Private)
                    .with_ttl_ms(admitted.gateway.list_ttl_ms()),
                _ => list,
            })
        })
        .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        telemetry::serve("resources/list", None, inbound(&context), async || {
            let admitted = admitted_of(&context.extensions)?;
            admitted.gateway.list_resources(caller_of(admitted)?).await
        })
        .await
        .map(Completed::completed)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        telemetry::serve(
            "resources/templates/list",
            None,
            inbound(&context),
            async || {
                let admitted = admitted_of(&context.extensions)?;
                admitted
                    .gateway
                    .list_resource_templates(caller_of(admitted)?)
            },
        )
        .await
        .map(Completed::completed)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let admitted = admitted_of(&context.extensions)?;
        // Span names stay a bounded set: only a declared URI names the span.
        let known = admitted
            .gateway
            .contracts
            .resource_for(&request.uri)
            .is_some();
        let target = known.then(|| request.uri.clone());
        telemetry::serve(
            "resources/read",
            target.as_deref(),
            inbound(&context),
            async || {
                admitted
                    .gateway
                    .read_resource(caller_of(admitted)?, request)
                    .await
            },
        )
        .await
        .map(|result| result.completed().into())
    }

    #[allow(deprecated)] // clients before 2026-07-28 subscribe this way
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        telemetry::serve("resources/subscribe", None, inbound(&context), async || {
            let admitted = admitted_of(&context.extensions)?;
            let caller = caller_of(admitted)?;
            admitted
                .gateway
                .subscription(caller, &request.uri, true)
                .await?;
            self.subscribed.add(&request.uri);
            Ok(())
        })
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        telemetry::serve(
            "resources/unsubscribe",
            None,
            inbound(&context),
            async || {
                let admitted = admitted_of(&context.extensions)?;
                let caller = caller_of(admitted)?;
                admitted
                    .gateway
                    .subscription(caller, &request.uri, false)
                    .await?;
                self.subscribed.remove(&request.uri);
                Ok(())
            },
        )
        .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        telemetry::serve("prompts/list", None, inbound(&context), async || {
            let admitted = admitted_of(&context.extensions)?;
            admitted.gateway.list_prompts(caller_of(admitted)?)
        })
        .await
        .map(Completed::completed)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let admitted = admitted_of(&context.extensions)?;
        let known = admitted
            .gateway
            .contracts
            .prompts
            .contains_key(&request.name);
        let target = known.then(|| request.name.clone());
        telemetry::serve(
            "prompts/get",
            target.as_deref(),
            inbound(&context),
            async || {
                admitted
                    .gateway
                    .get_prompt(caller_of(admitted)?, request)
                    .await
            },
        )
        .await
        .map(|result| result.completed().into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        telemetry::serve("completion/complete", None, inbound(&context), async || {
            let admitted = admitted_of(&context.extensions)?;
            admitted
                .gateway
                .complete(caller_of(admitted)?, request)
                .await
        })
        .await
        .map(Completed::completed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: the pipeline's future is large, and rmcp moves the handler's future into a
        // spawned task (a memcpy of all of it).
        let gateway = &admitted_of(&context.extensions)?.gateway;
        // The upstream's progress and log messages reach this client, and its cancellation the
        // upstream (`relay::client`).
        let session = session_of(&context);
        let level = session.and_then(|s| gateway.kept.log_levels.of(s));
        // A 2026-07-28 stateless call asks its client through MRTR (`relay::parked`).
        let stateless = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        // Only when the client could answer (it declared sampling, elicitation or roots, the
        // direct path's rule too): otherwise nothing is ever parked and the call runs as is.
        let may_park = stateless && crate::mcp::relay::may_ask(Some(&context.meta));
        let (questions_sender, questions) = match may_park {
            true => {
                let (sender, receiver) = crate::mrtr::parked::questions();
                (Some(sender), Some(receiver))
            }
            false => (None, None),
        };
        let called = crate::mcp::relay::client::Called {
            policy: gateway
                .catalog()
                .exposed(&request.name)
                .map_or(RelayPolicy::REFUSED, |tool| tool.contract.relay),
            tool: request.name.to_string(),
            // A 2026-07-28 request is stateless even on a connection that is one session
            // (stdio): its client is asked through MRTR, as it expects.
            in_session: session.is_some() && !stateless,
            questions: questions_sender,
        };
        let relay = crate::mcp::relay::client::Relay::for_call(&context, level, called);
        let parking = questions.map(|questions| Parking {
            questions,
            cancel: relay.call.cancelled.clone(),
            client_gone: Some(context.ct.clone()),
        });
        let answer = Box::pin(answer_tools_call(
            gateway,
            request,
            inbound(&context),
            Some(&context.peer),
            parking,
            Some(relay.call.clone()),
        ))
        .await;
        relay.finish().await;
        answer
    }

    /// `logging/setLevel`: the session's own level (`relay::levels`); the upstreams send
    /// everything and the gateway filters per session.
    #[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        telemetry::serve("logging/setLevel", None, inbound(&context), async || {
            let gateway = &admitted_of(&context.extensions)?.gateway;
            if let Some(session) = session_of(&context) {
                gateway.kept.log_levels.set(session, request.level);
            }
            Ok(())
        })
        .await
    }
}

/// The client session a request belongs to (`None`: stateless).
fn session_of(context: &RequestContext<RoleServer>) -> Option<&str> {
    context
        .extensions
        .get::<http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}

/// Declares the resources, prompts and completions capabilities when the version's contracts
/// declare any resources or prompts (what is not declared is not offered).
fn declare_capabilities(gateway: &Version, capabilities: &mut ServerCapabilities) {
    let contracts = &gateway.contracts;
    if !contracts.resources.is_empty() {
        capabilities.resources = serde_json::from_value(serde_json::json!({
            "subscribe": true, "listChanged": true
        }))
        .ok();
    }
    if !contracts.prompts.is_empty() {
        capabilities.prompts =
            serde_json::from_value(serde_json::json!({"listChanged": true})).ok();
    }
    if !contracts.resources.is_empty() || !contracts.prompts.is_empty() {
        capabilities.completions = Some(Default::default());
    }
}

/// 2026-07-28 requires `resultType` on every result. What the gateway builds from JSON or
/// relays from an upstream on an older revision has none; rmcp adds only the caching hints, and
/// removes `resultType` again for clients on older revisions.
trait Completed {
    fn completed(self) -> Self;
}

macro_rules! completed {
    ($($result:ty),*) => {$(
        impl Completed for $result {
            fn completed(mut self) -> Self {
                self.result_type.get_or_insert(ResultType::COMPLETE);
                self
            }
        }
    )*};
}

completed!(
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListPromptsResult,
    ReadResourceResult,
    GetPromptResult,
    CompleteResult
);
