//! The hand-written `ServerHandler` (no rmcp macros) and its shared state.

// Sampling and logging are deprecated by SEP-2577 (2026-07-28) in rmcp, and are still what
// 2025-11-25 clients, and the conformance suite, use.
#![allow(deprecated)]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use tokio::sync::broadcast;

use crate::ask::is_modern;
use crate::reconnect::Sessions;
use crate::subscriptions::Subscriptions;
use crate::{catalog, conformance, content, tools};

/// Process-wide state shared by every clone of the handler (every session or request).
#[derive(Debug)]
struct Shared {
    /// The fixed tools, in list order.
    base_tools: Vec<Tool>,
    /// The `extra` tool that `toggle_extra` adds and removes.
    extra_tool: Tool,
    extra_enabled: AtomicBool,
    /// How many times the `counter` tool has run in this process.
    counter: AtomicU64,
    /// How many `slow` calls were cancelled by their client before they finished.
    cancelled: AtomicU64,
    /// How many `counter` and `slow` calls are running now: tests wait for a call to be under
    /// way, or for every call to have finished, by polling this instead of sleeping.
    running: AtomicU64,
    /// Fires on every tool-list change; feeds 2026-07-28 `subscriptions/listen` streams.
    list_changed: broadcast::Sender<()>,
    /// Which sessions subscribed to which resources.
    subscriptions: Arc<Subscriptions>,
    /// Sessions started so far (their ids).
    sessions: AtomicUsize,
}

/// State of one MCP session (one client connection; in stateless HTTP mode, one request).
#[derive(Debug)]
struct Session {
    /// Unique in this process (the key of its resource subscriptions).
    id: usize,
    /// The level set by `logging/setLevel`; `None` (never set) lets every message through.
    log_level: Mutex<Option<LoggingLevel>>,
    /// The process-wide subscriptions, which forget this session when it ends.
    subscriptions: Arc<Subscriptions>,
}

impl Session {
    fn new(shared: &Shared) -> Arc<Self> {
        Arc::new(Self {
            id: shared.sessions.fetch_add(1, Ordering::SeqCst),
            log_level: Mutex::default(),
            subscriptions: Arc::clone(&shared.subscriptions),
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.subscriptions.forget(self.id);
    }
}

/// The demo upstream. Cheap to clone: process-wide state lives behind one `Arc`, per-session
/// state behind another that [`DemoUpstream::for_session`] replaces.
#[derive(Debug, Clone)]
pub struct DemoUpstream {
    shared: Arc<Shared>,
    session: Arc<Session>,
    /// The HTTP session manager, when serving Streamable HTTP with sessions (`test_reconnection`).
    sessions: Option<Arc<Sessions>>,
    /// Offers the `modern_only` tool to 2026-07-28 clients (`--modern-only-tool`).
    modern_only_tool: bool,
    /// Answers `server/discover` as a legacy server would, so clients use `initialize`
    /// (`--legacy`).
    legacy: bool,
    /// Declares on 2026-07-28 (`server/discover`) only what the conformance suite's reference
    /// server declares there: tools and prompts with list changes, resources without
    /// subscriptions or list changes, no completions and no logging; and, as there, its
    /// sampling and elicitation tools cannot ask the client on that revision (they answer that
    /// the request was refused, -32601). Sessions (`initialize`) still get everything
    /// (`--modern-declares-less`).
    modern_declares_less: bool,
}

/// The tool offered only to 2026-07-28 clients with `--modern-only-tool`.
const MODERN_ONLY: &str = "modern_only";

impl Default for DemoUpstream {
    fn default() -> Self {
        Self::new()
    }
}

impl DemoUpstream {
    pub fn new() -> Self {
        let (list_changed, _) = broadcast::channel(16);
        let shared = Arc::new(Shared {
            base_tools: catalog::base_tools()
                .into_iter()
                .chain(conformance::tools())
                .collect(),
            extra_tool: catalog::extra_tool(),
            extra_enabled: AtomicBool::new(false),
            counter: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            running: AtomicU64::new(0),
            list_changed,
            subscriptions: Arc::default(),
            sessions: AtomicUsize::new(0),
        });
        Self {
            session: Session::new(&shared),
            shared,
            sessions: None,
            modern_only_tool: false,
            legacy: false,
            modern_declares_less: false,
        }
    }

    /// The same handler, offering `modern_only` to 2026-07-28 clients (`true`).
    pub fn with_modern_only_tool(mut self, on: bool) -> Self {
        self.modern_only_tool = on;
        self
    }

    /// The same handler, refusing `server/discover` as a legacy server does (`true`).
    pub fn legacy(mut self, on: bool) -> Self {
        self.legacy = on;
        self
    }

    /// Whether this call came on 2026-07-28 to a handler that serves less there
    /// (`--modern-declares-less`).
    pub fn modern_declares_less_now(&self, context: &RequestContext<RoleServer>) -> bool {
        self.modern_declares_less && is_modern(context)
    }

    /// The same handler, declaring less on 2026-07-28 than in sessions (`true`), as the
    /// conformance suite's reference server does: there its tools cannot ask the client.
    pub fn modern_declares_less(mut self, on: bool) -> Self {
        self.modern_declares_less = on;
        self
    }

    /// The same handler, able to close its callers' SSE streams through `sessions`.
    pub fn with_sessions(mut self, sessions: Arc<Sessions>) -> Self {
        self.sessions = Some(sessions);
        self
    }

    pub fn sessions(&self) -> Option<&Sessions> {
        self.sessions.as_deref()
    }

    /// A handler for a new session: the same process-wide state, fresh per-session state.
    pub fn for_session(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            session: Session::new(&self.shared),
            sessions: self.sessions.clone(),
            modern_only_tool: self.modern_only_tool,
            legacy: self.legacy,
            modern_declares_less: self.modern_declares_less,
        }
    }

    /// Sends `notifications/resources/updated` for `uri` to the sessions subscribed to it;
    /// returns how many it reached.
    pub async fn touch_resource(&self, uri: &str) -> usize {
        self.shared.subscriptions.notify_updated(uri).await
    }

    /// Sends `notifications/message` to the caller of `context` unless the session's
    /// `logging/setLevel` filters it out.
    pub async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, text: &str) {
        // 2026-07-28 has no `logging/setLevel`: each request says its level in `_meta`.
        let threshold = if is_modern(context) {
            context.meta.log_level()
        } else {
            *lock(&self.session.log_level)
        };
        if threshold.is_some_and(|threshold| severity(level) < severity(threshold)) {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(level, json!(text));
        param.logger = Some("demo-upstream".to_owned());
        // Deprecated by SEP-2577 (2026-07-28), still what 2025-11-25 clients receive.
        #[allow(deprecated)]
        let sent = context.peer.notify_logging_message(param).await;
        if let Err(error) = sent {
            tracing::warn!(%error, "could not send notifications/message");
        }
    }

    /// The current tool list (deterministic order; `extra` last when enabled).
    pub fn tools(&self) -> Vec<Tool> {
        let mut list = self.shared.base_tools.clone();
        if self.extra_enabled() {
            list.push(self.shared.extra_tool.clone());
        }
        list
    }

    pub fn extra_enabled(&self) -> bool {
        self.shared.extra_enabled.load(Ordering::SeqCst)
    }

    /// Flips the `extra` tool; returns whether it is enabled afterwards.
    pub fn toggle_extra(&self) -> bool {
        let was_enabled = self.shared.extra_enabled.fetch_xor(true, Ordering::SeqCst);
        // No receivers (no 2026-07-28 listeners) is not an error.
        let _ = self.shared.list_changed.send(());
        !was_enabled
    }

    /// Increments the process-wide counter and returns the new value.
    pub fn bump_counter(&self) -> u64 {
        self.shared.counter.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Notes a `slow` call cancelled by its client.
    pub fn note_cancelled(&self) {
        self.shared.cancelled.fetch_add(1, Ordering::SeqCst);
    }

    pub fn cancelled(&self) -> u64 {
        self.shared.cancelled.load(Ordering::SeqCst)
    }

    pub fn counter(&self) -> u64 {
        self.shared.counter.load(Ordering::SeqCst)
    }

    /// Counts a `counter` or `slow` call as running until the guard is dropped (also when the
    /// call's future is dropped on cancellation).
    pub fn start_running(&self) -> Running {
        self.shared.running.fetch_add(1, Ordering::SeqCst);
        Running(self.shared.clone())
    }

    pub fn running(&self) -> u64 {
        self.shared.running.load(Ordering::SeqCst)
    }
}

/// A `counter` or `slow` call running, from [`DemoUpstream::start_running`] until dropped.
pub struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A poisoned lock only means another call panicked mid-update; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// RFC 5424 order, least severe first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl ServerHandler for DemoUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_logging()
                .enable_completions()
                .build(),
        )
        .with_server_info(Implementation::new(
            "demo-upstream",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("narrowgate demo upstream: test tools, some deliberately misbehaving.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tools();
        if self.modern_only_tool && is_modern(&context) {
            tools.push(catalog::modern_only_tool(MODERN_ONLY));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// A legacy server knows no `server/discover`: with `--legacy`, method not found, which
    /// tells a client to fall back to `initialize`.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        if self.legacy {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "Method not found: server/discover",
                None,
            ));
        }
        let mut info = self.get_info();
        if self.modern_declares_less {
            info.capabilities = serde_json::from_value(serde_json::json!({
                "tools": {"listChanged": true},
                "prompts": {"listChanged": true},
                "resources": {}
            }))
            .unwrap_or_default();
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.modern_only_tool && request.name == MODERN_ONLY && is_modern(&context) {
            return Ok(
                CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                    "spoken in 2026-07-28",
                )])
                .into(),
            );
        }
        tools::call(self, &request, &context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        content::resources()
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        content::templates()
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(content::read(&request.uri)?.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !content::exists(&request.uri) {
            return Err(content::not_found("Resource", &request.uri));
        }
        (self.shared.subscriptions).add(&request.uri, self.session.id, &context.peer);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .subscriptions
            .remove(&request.uri, self.session.id);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        content::prompts()
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(content::get_prompt(&request.name, request.arguments.as_ref())?.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        content::complete(&request)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *lock(&self.session.log_level) = Some(request.level);
        Ok(())
    }

    /// 2026-07-28 clients get `notifications/tools/list_changed` and
    /// `notifications/resources/updated` only on a `subscriptions/listen` stream; legacy
    /// sessions get them from `toggle_extra` and `touch_resource` directly.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::builder().tools_list_changed().build();
        accepted.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let tools = context.accepted().tools_list_changed == Some(true);
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let mut changes = self.shared.list_changed.subscribe();
        let mut watching = self.shared.subscriptions.watch(&uris);
        loop {
            let sent = tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) if tools => {
                        context.sink().notify_tool_list_changed().await
                    }
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => Ok(()),
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
                uri = watching.updates.recv() => match uri {
                    Ok(uri) if uris.contains(&uri) => context.sink().notify_resource_updated(uri).await,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => Ok(()),
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            };
            if let Err(error) = sent {
                tracing::debug!(%error, "subscription closed");
                return Ok(());
            }
        }
    }
}
