//! Spans per the MCP semantic conventions, and W3C trace context through `params._meta`.
//!
//! [`serve`] wraps the handling of one MCP request: it continues the client's context, opens the
//! SERVER span (`tools/call {tool}`, `tools/list`, …), runs the handler inside it, with a `tracing`
//! span carrying `trace_id` so every log line of the request names its trace, then closes the span
//! with `error.type` and `narrowgate.outcome` and records the request's metrics.
//! [`UpstreamAttempt`] is the CLIENT span of one call to an upstream; it writes its own context
//! into the forwarded request's `_meta`, so an instrumented upstream joins the same trace.
//!
//! The handler reports what only it knows (the call's outcome, for the receipt's trace id) through
//! [`note_call`] and [`trace_id`], which read the request's OpenTelemetry [`Context`]: it is
//! attached to the handler's future, so nothing has to be passed down the pipeline.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverResult, ErrorData,
    InitializeResult, ListToolsResult, ProtocolVersion, RequestId, RequestMetaObject,
};
use tracing::Instrument as _;

use super::metrics;
use crate::config::UpstreamTransport;
use crate::receipts::Call;
use crate::upstream::{AttemptSpan, CallError};

/// What the handler tells [`serve`] about its request, through the request's [`Context`].
#[derive(Debug)]
struct Scope {
    trace_id: TraceId,
    /// `narrowgate.outcome`, and the tool as a metrics label (only for tools that exist, so a
    /// caller probing names cannot grow the metrics without bound).
    /// The last call noted wins: a call that fell back notes after its fallback's own call.
    call: Mutex<Option<CallNote>>,
}

/// How a request's `tools/call` ended, for its span and metrics.
#[derive(Debug)]
struct CallNote {
    outcome: &'static str,
    tool: Option<String>,
    /// The typed error (`narrowgate.error.type`), the recovery taken, a cache hit.
    error_type: Option<String>,
    fallback: Option<String>,
    cached: bool,
}

/// A result that may be a tool error (`isError: true`), which semconv reports as
/// `error.type=tool_error`.
pub trait ToolOutcome {
    fn is_tool_error(&self) -> bool {
        false
    }
}

impl ToolOutcome for CallToolResponse {
    fn is_tool_error(&self) -> bool {
        matches!(self, CallToolResponse::Complete(r) if r.is_error == Some(true))
    }
}
impl ToolOutcome for CallToolResult {
    fn is_tool_error(&self) -> bool {
        self.is_error == Some(true)
    }
}
impl ToolOutcome for ListToolsResult {}
impl ToolOutcome for rmcp::model::ListResourcesResult {}
impl ToolOutcome for rmcp::model::ListResourceTemplatesResult {}
impl ToolOutcome for rmcp::model::ReadResourceResult {}
impl ToolOutcome for rmcp::model::ListPromptsResult {}
impl ToolOutcome for rmcp::model::GetPromptResult {}
impl ToolOutcome for rmcp::model::CompleteResult {}
impl ToolOutcome for InitializeResult {}
impl ToolOutcome for DiscoverResult {}
impl ToolOutcome for () {}

/// What a SERVER span is made of: the request's id, `_meta`, HTTP request, protocol version
/// and caller. Filled by the gateway, from rmcp's request context or its own direct path.
pub struct Inbound<'a> {
    pub id: &'a RequestId,
    pub meta: &'a RequestMetaObject,
    pub parts: Option<&'a http::request::Parts>,
    pub protocol: Option<ProtocolVersion>,
    /// The caller's name, once authenticated.
    pub caller: Option<&'a str>,
}

/// Handles one MCP request (`method`, on `target` for `tools/call`) inside its SERVER span.
///
/// The handler comes as a closure, its future made only where it runs: a future passed in by
/// value is kept twice in this one's state (as the argument, and again where it is awaited),
/// and a `tools/call` future is tens of kilobytes, copied at every layer above.
pub async fn serve<T: ToolOutcome>(
    method: &'static str,
    target: Option<&str>,
    inbound: Inbound<'_>,
    handler: impl AsyncFnOnce() -> Result<T, ErrorData>,
) -> Result<T, ErrorData> {
    let started = Instant::now();
    let parts = inbound.parts;
    let from_meta = extract(
        inbound.meta.get_traceparent(),
        inbound.meta.get_tracestate(),
    );
    let from_header = parts.and_then(|p| {
        let header = |name| p.headers.get(name).and_then(|v| v.to_str().ok());
        extract(header("traceparent"), header("tracestate"))
    });
    // `_meta` is the MCP carrier; the HTTP header is the fallback (and a link when both differ).
    let (parent, link) = match from_meta {
        Some(meta) => {
            let link = from_header.filter(|h| h.span_id() != meta.span_id());
            (Some(meta), link)
        }
        None => (from_header, None),
    };
    let parent_cx = match &parent {
        Some(sc) => Context::new().with_remote_span_context(sc.clone()),
        None => Context::new(),
    };

    let tracer = super::state().and_then(|s| s.tracer.as_ref());
    let cx = match tracer {
        Some(tracer) => {
            let name = match target {
                Some(t) => format!("{method} {t}"),
                None => method.to_string(),
            };
            let mut attributes = vec![
                KeyValue::new("mcp.method.name", method),
                // The client's id may be a string of any length: its first 128 characters.
                KeyValue::new(
                    "jsonrpc.request.id",
                    inbound.id.to_string().chars().take(128).collect::<String>(),
                ),
                KeyValue::new("jsonrpc.protocol.version", "2.0"),
                KeyValue::new("network.transport", "tcp"),
                KeyValue::new("network.protocol.name", "http"),
            ];
            match (method, target) {
                ("resources/read", Some(uri)) => {
                    attributes.push(KeyValue::new("mcp.resource.uri", uri.to_string()));
                }
                ("prompts/get", Some(prompt)) => {
                    attributes.push(KeyValue::new("gen_ai.prompt.name", prompt.to_string()));
                }
                (_, Some(tool)) => {
                    attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_string()));
                    attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                }
                (_, None) => {}
            }
            if let Some(version) = &inbound.protocol {
                attributes.push(KeyValue::new(
                    "mcp.protocol.version",
                    version.as_str().to_string(),
                ));
            }
            if let Some(session) = parts
                .and_then(|p| p.headers.get("mcp-session-id"))
                .and_then(|v| v.to_str().ok())
            {
                attributes.push(KeyValue::new("mcp.session.id", session.to_string()));
            }
            if let Some(caller) = inbound.caller {
                attributes.push(KeyValue::new("narrowgate.caller", caller.to_string()));
            }
            let mut builder = tracer
                .span_builder(name)
                .with_kind(SpanKind::Server)
                .with_attributes(attributes);
            if let Some(link) = link {
                builder = builder.with_links(vec![opentelemetry::trace::Link::with_context(link)]);
            }
            let span = tracer.build_with_context(builder, &parent_cx);
            parent_cx.with_span(span)
        }
        None => parent_cx,
    };
    let trace_id = match cx.span().span_context() {
        sc if sc.is_valid() => sc.trace_id(),
        // No client context and no tracer: an id of our own, for logs and the receipt only.
        _ => RandomIdGenerator::default().new_trace_id(),
    };
    let scope = Arc::new(Scope {
        trace_id,
        call: Mutex::new(None),
    });
    let cx = cx.with_value(scope.clone());
    // error level, so the span (and its trace_id field) exists whatever level is logged.
    let log_span = tracing::error_span!("mcp", trace_id = %trace_id);
    let answer = handler()
        .with_context(cx.clone())
        .instrument(log_span)
        .await;

    let error_type = match &answer {
        Err(e) => Some(e.code.0.to_string()),
        Ok(result) if result.is_tool_error() => Some("tool_error".to_string()),
        Ok(_) => None,
    };
    let note = scope.call.lock().unwrap_or_else(|p| p.into_inner()).take();
    let (outcome, tool) = match &note {
        Some(note) => (note.outcome, note.tool.as_deref()),
        None if answer.is_ok() => ("ok", None),
        None => ("error", None),
    };
    let span = cx.span();
    if span.is_recording() {
        span.set_attribute(KeyValue::new("narrowgate.outcome", outcome));
        if let Some(note) = &note {
            if let Some(t) = &note.error_type {
                span.set_attribute(KeyValue::new("narrowgate.error.type", t.clone()));
            }
            if let Some(f) = &note.fallback {
                span.set_attribute(KeyValue::new("narrowgate.fallback", f.clone()));
            }
            if note.cached {
                span.set_attribute(KeyValue::new("narrowgate.cached", true));
            }
        }
        if let Err(e) = &answer {
            span.set_attribute(KeyValue::new(
                "rpc.response.status_code",
                e.code.0.to_string(),
            ));
        }
        if let Some(error_type) = &error_type {
            span.set_attribute(KeyValue::new("error.type", error_type.clone()));
            span.set_status(Status::error(error_type.clone()));
        }
        span.end();
    }
    metrics::record_operation(
        method,
        tool,
        outcome,
        error_type.as_deref(),
        started.elapsed(),
    );
    answer
}

/// Tells the current request's [`serve`] how its `tools/call` ended (once the receipt is built).
pub fn note_call(call: &Call<'_>) {
    let note = CallNote {
        outcome: call.outcome.as_str(),
        tool: call.contract.map(|_| call.tool.to_string()),
        error_type: call.error_type.map(str::to_string),
        fallback: call.fallback.map(str::to_string),
        cached: call.cached,
    };
    with_scope(|scope| {
        *scope.call.lock().unwrap_or_else(|p| p.into_inner()) = Some(note);
    });
}

/// The current request's trace id (32 lowercase hex digits), for its receipt.
pub fn trace_id() -> Option<String> {
    with_scope(|scope| scope.trace_id.to_string())
}

fn with_scope<T>(f: impl FnOnce(&Scope) -> T) -> Option<T> {
    Context::map_current(|cx| cx.get::<Arc<Scope>>().map(|scope| f(scope)))
}

/// The CLIENT span of one attempt to call an upstream tool.
pub struct UpstreamAttempt {
    /// `None` when no tracer is configured (or the trace is not sampled): nothing to end.
    cx: Option<Context>,
}

impl AttemptSpan for UpstreamAttempt {
    /// Opens the span as a child of the current request's and writes its W3C `traceparent` into
    /// `params._meta`. Without a tracer, the client's traceparent is passed on (the upstream's
    /// span continues the client's); never the client's `tracestate`.
    fn start(
        upstream: &str,
        transport: &UpstreamTransport,
        attempt: u32,
        params: &mut CallToolRequestParams,
    ) -> UpstreamAttempt {
        let current = Context::current();
        let tracer = super::state().and_then(|s| s.tracer.as_ref());
        let cx = tracer.map(|tracer| {
            let mut attributes = vec![
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("gen_ai.tool.name", params.name.to_string()),
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("jsonrpc.protocol.version", "2.0"),
                KeyValue::new("narrowgate.upstream", upstream.to_string()),
                KeyValue::new("narrowgate.attempt", i64::from(attempt)),
            ];
            match transport {
                UpstreamTransport::Stdio { .. } => {
                    attributes.push(KeyValue::new("network.transport", "pipe"));
                }
                UpstreamTransport::Http { url, .. } => {
                    attributes.push(KeyValue::new("network.transport", "tcp"));
                    if let Ok(uri) = url.parse::<http::Uri>() {
                        if let Some(host) = uri.host() {
                            let host = host.trim_start_matches('[').trim_end_matches(']');
                            attributes.push(KeyValue::new("server.address", host.to_string()));
                        }
                        if let Some(port) = uri.port_u16() {
                            attributes.push(KeyValue::new("server.port", i64::from(port)));
                        }
                    }
                }
            }
            let builder = tracer
                .span_builder(format!("tools/call {}", params.name))
                .with_kind(SpanKind::Client)
                .with_attributes(attributes);
            current.with_span(tracer.build_with_context(builder, &current))
        });
        inject(cx.as_ref().unwrap_or(&current), params);
        UpstreamAttempt { cx }
    }

    /// Closes the span with `error.type` when the attempt failed or answered a tool error.
    fn finish(self, result: &Result<CallToolResult, CallError>) {
        let Some(cx) = self.cx else { return };
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        let error_type = match result {
            Ok(r) if r.is_error == Some(true) => Some("tool_error".to_string()),
            Ok(_) => None,
            Err(CallError::Protocol(e)) => Some(e.code.0.to_string()),
            Err(CallError::Timeout(_)) => Some("timeout".to_string()),
            Err(CallError::ConnectionLost(_)) => Some("connection_lost".to_string()),
            Err(CallError::Unavailable(_)) => Some("unavailable".to_string()),
            Err(CallError::Malformed(_)) => Some("malformed_result".to_string()),
            Err(CallError::Cancelled) => Some("cancelled".to_string()),
        };
        if let Some(error_type) = error_type {
            span.set_attribute(KeyValue::new("error.type", error_type.clone()));
            span.set_status(Status::error(error_type));
        }
        span.end();
    }
}

/// The span context in a W3C `traceparent`/`tracestate` pair, if it parses.
fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<SpanContext> {
    let traceparent = traceparent?;
    let carrier = W3c {
        traceparent: Some(traceparent),
        tracestate,
    };
    let cx = TraceContextPropagator::new().extract(&carrier);
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// Writes `cx`'s span context into `params._meta` as the gateway's own trace context: its
/// `traceparent` (when it has a valid one), and no `tracestate`. A span context inherits its
/// parent's trace state, which is the client's: vendor data the client chose, which has no place
/// upstream (only the gateway's own state would, and it keeps none). Any trace context already
/// in `_meta` is replaced, whatever put it there.
fn inject(cx: &Context, params: &mut CallToolRequestParams) {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        if let Some(meta) = params.meta.as_mut() {
            meta.0.0.remove("traceparent");
            meta.0.0.remove("tracestate");
        }
        return;
    }
    let traceparent = format!(
        "{:02x}-{}-{}-{:02x}",
        0,
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags() & TraceFlags::SAMPLED
    );
    let meta = params.meta.get_or_insert_with(RequestMetaObject::new);
    meta.0.set_traceparent(traceparent);
    meta.0.0.remove("tracestate");
}

/// The two W3C trace-context fields, read from `_meta` or HTTP headers.
struct W3c<'a> {
    traceparent: Option<&'a str>,
    tracestate: Option<&'a str>,
}

impl Extractor for W3c<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.traceparent,
            "tracestate" => self.tracestate,
            _ => None,
        }
    }
    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// Adds the event `name` with `attributes` to the current request's SERVER span (nothing without
/// a tracer): a step of the pipeline saying what it decided.
pub fn event(name: &'static str, attributes: &[(&'static str, String)]) {
    Context::map_current(|cx| {
        let span = cx.span();
        if span.is_recording() {
            let attributes = attributes
                .iter()
                .map(|(k, v)| KeyValue::new(*k, v.clone()))
                .collect();
            span.add_event(name, attributes);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    /// Proves: a W3C traceparent (with tracestate) is parsed as a remote sampled context; malformed
    /// or all-zero ones, or a tracestate alone, give none.
    #[test]
    fn a_traceparent_is_read_and_a_bad_one_ignored() {
        let sc = extract(Some(PARENT), Some("vendor=1")).expect("valid traceparent");
        assert_eq!(
            sc.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(sc.span_id().to_string(), "b7ad6b7169203331");
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(sc.trace_state().header(), "vendor=1");
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        ] {
            assert!(extract(Some(bad), None).is_none(), "{bad:?}");
        }
        assert!(extract(None, Some("vendor=1")).is_none());
    }

    /// Proves: with no tracer installed no span is made, and the client's traceparent goes
    /// upstream in `_meta` unchanged, its tracestate not at all.
    #[test]
    fn without_a_tracer_the_clients_traceparent_is_passed_on_alone() {
        let sc = extract(Some(PARENT), Some("vendor=1")).expect("valid traceparent");
        let cx = Context::new().with_remote_span_context(sc);
        let mut params = CallToolRequestParams::new("add");
        let attempt = cx.clone().attach();
        let started = UpstreamAttempt::start(
            "up",
            &UpstreamTransport::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                headers: Default::default(),
                forwarder: true,
            },
            1,
            &mut params,
        );
        drop(attempt);
        assert!(started.cx.is_none(), "no span without a tracer");
        let meta = params.meta.expect("_meta written");
        assert_eq!(meta.get_traceparent(), Some(PARENT));
        assert_eq!(meta.get_tracestate(), None);
    }

    /// Proves: whatever trace context `_meta` already holds is replaced by the context's own
    /// traceparent (flags kept to the sampled bit), and a tracestate, the span's inherited one
    /// or one already there, is never written; with no valid context, both keys are removed.
    #[test]
    fn only_the_gateways_traceparent_is_injected() {
        let sc = extract(
            Some("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-03"),
            Some("vendor=1"),
        )
        .expect("valid traceparent");
        let cx = Context::new().with_remote_span_context(sc);
        let mut params = CallToolRequestParams::new("add");
        let mut meta = RequestMetaObject::new();
        meta.0.set_traceparent(PARENT);
        meta.0.set_tracestate("client=secret");
        params.meta = Some(meta);
        inject(&cx, &mut params);
        let meta = params.meta.clone().expect("_meta kept");
        assert_eq!(
            meta.get_traceparent(),
            Some("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01")
        );
        assert_eq!(meta.get_tracestate(), None);
        inject(&Context::new(), &mut params);
        let meta = params.meta.expect("_meta kept");
        assert_eq!(meta.get_traceparent(), None);
        assert_eq!(meta.get_tracestate(), None);
    }

    /// Proves: with no context at all, the forwarded request gets no `_meta`.
    #[test]
    fn nothing_is_injected_without_a_context() {
        let mut params = CallToolRequestParams::new("add");
        inject(&Context::new(), &mut params);
        assert!(params.meta.is_none());
    }
}
