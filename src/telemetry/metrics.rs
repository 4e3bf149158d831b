//! The metrics served at `/metrics` in the Prometheus text format (0.0.4):
//!
//! - `mcp_server_operation_duration_seconds` (histogram; semconv `mcp.server.operation.duration`
//!   with its suggested buckets) by `mcp_method_name`, `gen_ai_tool_name`, `outcome` and
//!   `error_type`;
//! - `narrowgate_rejections_total` (counter; `narrowgate.rejections`) by `outcome`: the calls the
//!   gateway itself refused (`denied`, `rejected_input`, `rejected_output`, `rate_limited`);
//! - `narrowgate_upstream_up` and `narrowgate_upstream_tools` (gauges) by `upstream`, read from
//!   the upstreams' state at scrape time.
//!
//! Why a hand-written registry rather than the OpenTelemetry metrics SDK and a Prometheus
//! exporter: the exporter crate lags the 0.33 SDK and brings the `prometheus` and `protobuf`
//! crates, for three instruments. Here a series is a few atomics behind a read lock taken once
//! per request, and the text format is thirty lines. Label values are bounded: methods are the
//! gateway's own, tools only those with a contract, outcomes a fixed set.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// Upper bounds of the duration buckets, in seconds (MCP semantic conventions).
const BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The outcomes `narrowgate_rejections_total` counts: refusals by the gateway, not failures.
const REJECTIONS: [&str; 4] = [
    "denied",
    "rejected_input",
    "rejected_output",
    "rate_limited",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    method: &'static str,
    tool: Option<String>,
    outcome: &'static str,
    error_type: Option<String>,
}

#[derive(Default)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

/// Every series recorded since start.
#[derive(Default)]
pub struct Registry {
    operations: RwLock<HashMap<SeriesKey, Arc<Histogram>>>,
    rejections: [AtomicU64; REJECTIONS.len()],
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::default);

/// One upstream's state at scrape time.
pub struct UpstreamHealth {
    pub name: String,
    pub up: bool,
    /// How many tools it listed last.
    pub tools: usize,
}

/// Records one handled MCP request, if metrics are enabled.
pub fn record_operation(
    method: &'static str,
    tool: Option<&str>,
    outcome: &'static str,
    error_type: Option<&str>,
    elapsed: Duration,
) {
    if super::metrics_enabled() {
        REGISTRY.record(method, tool, outcome, error_type, elapsed);
    }
}

impl Registry {
    pub fn record(
        &self,
        method: &'static str,
        tool: Option<&str>,
        outcome: &'static str,
        error_type: Option<&str>,
        elapsed: Duration,
    ) {
        let key = SeriesKey {
            method,
            tool: tool.map(str::to_string),
            outcome,
            error_type: error_type.map(str::to_string),
        };
        let known = self
            .operations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let histogram = match known {
            Some(h) => h,
            None => self
                .operations
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key)
                .or_default()
                .clone(),
        };
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|upper| seconds <= *upper)
            .unwrap_or(BUCKETS.len());
        histogram.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        histogram.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        histogram.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        if let Some(i) = REJECTIONS.iter().position(|r| *r == outcome) {
            self.rejections[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The text exposition of everything recorded, plus the upstreams' gauges.
    pub fn render(&self, upstreams: &[UpstreamHealth]) -> String {
        let mut out = String::new();
        let name = "mcp_server_operation_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Duration of the MCP requests the gateway handled.\n# TYPE {name} histogram"
        );
        let operations = self.operations.read().unwrap_or_else(|p| p.into_inner());
        let mut series: Vec<_> = operations.iter().collect();
        series.sort_by(|a, b| {
            let key = |k: &SeriesKey| (k.method, k.tool.clone(), k.outcome, k.error_type.clone());
            key(a.0).cmp(&key(b.0))
        });
        for (key, histogram) in series {
            let mut labels = vec![("mcp_method_name", key.method)];
            if let Some(tool) = &key.tool {
                labels.push(("gen_ai_tool_name", tool));
            }
            labels.push(("outcome", key.outcome));
            if let Some(error_type) = &key.error_type {
                labels.push(("error_type", error_type));
            }
            let mut cumulative = 0;
            for (i, count) in histogram.buckets.iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let le = BUCKETS.get(i).map_or("+Inf".to_string(), f64::to_string);
                let mut with_le = labels.clone();
                with_le.push(("le", &le));
                let _ = writeln!(out, "{name}_bucket{} {cumulative}", label_set(&with_le));
            }
            let sum = histogram.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(out, "{name}_sum{} {sum}", label_set(&labels));
            let count = histogram.count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_count{} {count}", label_set(&labels));
        }
        drop(operations);

        let name = "narrowgate_rejections_total";
        let _ = writeln!(
            out,
            "# HELP {name} Calls the gateway refused itself, by outcome.\n# TYPE {name} counter"
        );
        for (outcome, count) in REJECTIONS.iter().zip(&self.rejections) {
            let labels = label_set(&[("outcome", outcome)]);
            let _ = writeln!(out, "{name}{labels} {}", count.load(Ordering::Relaxed));
        }

        gauge(
            &mut out,
            "narrowgate_upstream_up",
            "Whether the upstream is connected (1) or not (0).",
            upstreams,
            |u| usize::from(u.up),
        );
        gauge(
            &mut out,
            "narrowgate_upstream_tools",
            "How many tools the upstream listed last.",
            upstreams,
            |u| u.tools,
        );
        out
    }
}

/// One gauge family with a sample per upstream.
fn gauge(
    out: &mut String,
    name: &str,
    help: &str,
    upstreams: &[UpstreamHealth],
    value: impl Fn(&UpstreamHealth) -> usize,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for upstream in upstreams {
        let labels = label_set(&[("upstream", &upstream.name)]);
        let _ = writeln!(out, "{name}{labels} {}", value(upstream));
    }
}

/// `{a="x",b="y"}` with values escaped as the text format requires.
fn label_set(labels: &[(&str, &str)]) -> String {
    let mut out = String::from("{");
    for (i, (name, value)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// The body of `GET /metrics` (`None` while metrics are off), from the upstreams' health.
/// The HTTP route is the gateway's (`edge::health::metrics`): it knows the upstreams.
pub fn render(upstreams: &[UpstreamHealth]) -> Option<Response> {
    if !super::metrics_enabled() {
        return None;
    }
    Some(
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            REGISTRY.render(upstreams),
        )
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: buckets render cumulatively with `+Inf`, sum and count; the tool label is left out
    /// when unknown; refusals are counted by outcome, zeros included; upstream gauges render.
    #[test]
    fn histograms_are_cumulative_and_rejections_counted() {
        let registry = Registry::default();
        let ms = Duration::from_millis;
        registry.record("tools/call", Some("echo"), "ok", None, ms(5));
        registry.record("tools/call", Some("echo"), "ok", None, ms(150));
        registry.record("tools/call", None, "denied", Some("-32602"), ms(1));
        registry.record("tools/list", None, "ok", None, Duration::from_secs(400));
        let health = |name: &str, up, tools| UpstreamHealth {
            name: name.into(),
            up,
            tools,
        };
        let text = registry.render(&[health("files", true, 3), health("web", false, 0)]);
        let echo = r#"mcp_method_name="tools/call",gen_ai_tool_name="echo",outcome="ok""#;
        for line in [
            format!("mcp_server_operation_duration_seconds_bucket{{{echo},le=\"0.01\"}} 1"),
            format!("mcp_server_operation_duration_seconds_bucket{{{echo},le=\"0.1\"}} 1"),
            format!("mcp_server_operation_duration_seconds_bucket{{{echo},le=\"0.2\"}} 2"),
            format!("mcp_server_operation_duration_seconds_bucket{{{echo},le=\"+Inf\"}} 2"),
            format!("mcp_server_operation_duration_seconds_sum{{{echo}}} 0.155"),
            format!("mcp_server_operation_duration_seconds_count{{{echo}}} 2"),
            r#"mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/list",outcome="ok",le="300"} 0"#.into(),
            r#"mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/list",outcome="ok",le="+Inf"} 1"#.into(),
            r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",outcome="denied",error_type="-32602"} 1"#.into(),
            r#"narrowgate_rejections_total{outcome="denied"} 1"#.into(),
            r#"narrowgate_rejections_total{outcome="rate_limited"} 0"#.into(),
            r#"narrowgate_upstream_up{upstream="files"} 1"#.into(),
            r#"narrowgate_upstream_up{upstream="web"} 0"#.into(),
            r#"narrowgate_upstream_tools{upstream="files"} 3"#.into(),
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
    }

    /// Proves: backslash, double quote and newline in label values are escaped.
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_set(&[("a", "x\"y\\z\nw")]), r#"{a="x\"y\\z\nw"}"#);
    }
}
