//! The hand-written `ServerHandler` (no rmcp macros) and its shared state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::broadcast;

use crate::{catalog, tools};

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
}

/// The demo upstream. Cheap to clone: all state lives behind one `Arc`.
#[derive(Debug, Clone)]
pub struct DemoUpstream {
    shared: Arc<Shared>,
}

impl Default for DemoUpstream {
    fn default() -> Self {
        Self::new()
    }
}

impl DemoUpstream {
    pub fn new() -> Self {
        let (list_changed, _) = broadcast::channel(16);
        Self {
            shared: Arc::new(Shared {
                base_tools: catalog::base_tools(),
                extra_tool: catalog::extra_tool(),
                extra_enabled: AtomicBool::new(false),
                counter: AtomicU64::new(0),
                cancelled: AtomicU64::new(0),
                running: AtomicU64::new(0),
                list_changed,
            }),
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

impl ServerHandler for DemoUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result: CallToolResult = tools::call(self, &request, &context).await?;
        Ok(result.into())
    }

    /// 2026-07-28 clients get `notifications/tools/list_changed` only on a
    /// `subscriptions/listen` stream; legacy sessions get it from `toggle_extra` directly.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.shared.list_changed.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if let Err(error) = context.sink().notify_tool_list_changed().await {
                            tracing::debug!(%error, "subscription closed");
                            return Ok(());
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}
