//! Telemetry (SPEC §4.12): OpenTelemetry traces exported over OTLP, Prometheus metrics at
//! `/metrics`, and the logs' format.
//!
//! - [`trace`]: a SERVER span per MCP request and a CLIENT span per upstream attempt, following the
//!   MCP semantic conventions; the client's W3C context is continued from `params._meta` (else the
//!   HTTP `traceparent` header) and the gateway's is injected into every forwarded request.
//! - [`metrics`]: `mcp.server.operation.duration`, `narrowgate.rejections` and upstream health.
//! - [`logs`]: human or JSON lines through `tracing`, each carrying the request's trace id.
//!
//! The state is process-wide, like OpenTelemetry's own globals: [`install`] sets it once at
//! `serve` start (a reload does not change it: telemetry settings need a restart). Until then, and
//! whenever no exporter is configured, no span is ever built: requests still get a trace id (the
//! client's, else a random one) so logs and receipts can be correlated, and a client's context is
//! passed on to the upstream unchanged.

pub mod logs;
pub mod metrics;
pub mod trace;

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};

use crate::config::{OtlpProtocol, TelemetryConfig};

pub use trace::{Inbound, UpstreamAttempt, note_call, serve, span_event, trace_id};

/// The instrumentation scope name of every span the gateway makes.
const SCOPE: &str = "narrowgate";
/// How long spans wait in the batch before export, unless `OTEL_BSP_SCHEDULE_DELAY` says otherwise.
/// Shorter than the SDK's 5 s so a trace shows up while the operator still looks for it; the cost
/// is one export request per second at most.
const DEFAULT_EXPORT_DELAY: Duration = Duration::from_secs(1);

/// Where spans go, once the configuration and the environment are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The URL handed to the exporter: for HTTP the full traces URL, for gRPC the server.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "unsupported OTLP protocol `{value}` in {source_name}: use `grpc` or `http/protobuf` \
         (http/json is not built in)"
    )]
    Protocol { value: String, source_name: String },
    #[error("cannot set up the OTLP exporter for {endpoint}: {reason}")]
    Exporter { endpoint: String, reason: String },
}

/// What the hot path reads: set once by [`install`].
struct State {
    /// `None`: no exporter configured, so no span is built.
    tracer: Option<SdkTracer>,
    /// `telemetry.metrics: true`: record the metrics served at `/metrics`.
    metrics: bool,
}

static STATE: OnceLock<State> = OnceLock::new();

fn state() -> Option<&'static State> {
    STATE.get()
}

/// Whether the metrics at `/metrics` are being recorded (and so served).
pub fn metrics_enabled() -> bool {
    state().is_some_and(|s| s.metrics)
}

/// Keeps the exporter alive; [`shutdown`](Self::shutdown) flushes the spans still in the batch.
#[must_use = "dropping the guard without shutdown() may lose the last spans"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
}

impl Guard {
    /// Exports what is left and stops the exporter (blocking, bounded by the exporter's timeout).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "telemetry: flushing the last spans failed");
        }
    }
}

/// Resolves the configuration and the `OTEL_*` environment, builds the exporter and sets the
/// process-wide state. Must run inside the Tokio runtime (the gRPC exporter's connection lives
/// there). A second call keeps the first state.
pub fn install(config: Option<&TelemetryConfig>) -> Result<Guard, TelemetryError> {
    let export = resolve_export(config, &|name| std::env::var(name).ok())?;
    let provider = match &export {
        None => None,
        Some(export) => Some(provider(export, config)?),
    };
    match &export {
        Some(e) => {
            tracing::info!(endpoint = %e.endpoint, protocol = ?e.protocol, "telemetry: exporting traces over OTLP")
        }
        None => tracing::info!("telemetry: no OTLP endpoint configured, traces are not exported"),
    }
    let state = State {
        tracer: provider.as_ref().map(|p| p.tracer(SCOPE)),
        metrics: config.is_some_and(|c| c.metrics),
    };
    if STATE.set(state).is_err() {
        tracing::warn!("telemetry: already installed; keeping the first settings");
    }
    Ok(Guard { provider })
}

fn provider(
    export: &Export,
    config: Option<&TelemetryConfig>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let failed = |e: opentelemetry_otlp::ExporterBuildError| TelemetryError::Exporter {
        endpoint: export.endpoint.clone(),
        reason: e.to_string(),
    };
    let exporter = match export.protocol {
        OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&export.endpoint)
            .build(),
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(&export.endpoint)
            .build(),
    }
    .map_err(failed)?;
    let mut batch = BatchConfigBuilder::default();
    if std::env::var_os("OTEL_BSP_SCHEDULE_DELAY").is_none() {
        batch = batch.with_scheduled_delay(DEFAULT_EXPORT_DELAY);
    }
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch.build())
        .build();
    // The configured name wins; without a telemetry block, OTEL_SERVICE_NAME, else "narrowgate".
    let service_name = match config {
        Some(c) => c.service_name.clone(),
        None => std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| SCOPE.to_string()),
    };
    let resource = Resource::builder().with_service_name(service_name).build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource)
        .build())
}

/// Where to export, if anywhere:
/// - `otlp_endpoint` in the file, with `otlp_protocol`; `none` (or empty) means no export even if
///   the environment names an endpoint;
/// - else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT`, with
///   `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`/`OTEL_EXPORTER_OTLP_PROTOCOL` if set, else `otlp_protocol`;
/// - else nowhere (the SDK's own default of localhost would export to whoever listens there).
///
/// `OTEL_SDK_DISABLED=true` turns export off. For HTTP, `/v1/traces` is appended to a base endpoint.
pub fn resolve_export(
    config: Option<&TelemetryConfig>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Export>, TelemetryError> {
    let set = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let configured_protocol = config.map(|c| c.otlp_protocol).unwrap_or_default();
    let from_file = config
        .and_then(|c| c.otlp_endpoint.as_deref())
        .map(str::trim);
    let (endpoint, protocol, full_url) = match from_file {
        Some(e) if e.is_empty() || e.eq_ignore_ascii_case("none") => return Ok(None),
        Some(e) => (e.to_string(), configured_protocol, false),
        None => {
            let (endpoint, full_url) = match (
                set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                set("OTEL_EXPORTER_OTLP_ENDPOINT"),
            ) {
                (Some(traces), _) => (traces, true),
                (None, Some(base)) => (base, false),
                (None, None) => return Ok(None),
            };
            if endpoint.eq_ignore_ascii_case("none") {
                return Ok(None);
            }
            let protocol = match [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ]
            .into_iter()
            .find_map(|name| set(name).map(|v| (name, v)))
            {
                None => configured_protocol,
                Some((_, v)) if v == "grpc" => OtlpProtocol::Grpc,
                Some((_, v)) if v == "http/protobuf" => OtlpProtocol::HttpProtobuf,
                Some((name, value)) => {
                    return Err(TelemetryError::Protocol {
                        value,
                        source_name: name.to_string(),
                    });
                }
            };
            (endpoint, protocol, full_url)
        }
    };
    let endpoint = match protocol {
        OtlpProtocol::HttpProtobuf if !full_url => traces_url(&endpoint),
        _ => endpoint,
    };
    Ok(Some(Export { endpoint, protocol }))
}

/// `http://host:4318` → `http://host:4318/v1/traces` (OTLP/HTTP's signal path), unless already there.
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(endpoint: Option<&str>, protocol: OtlpProtocol) -> TelemetryConfig {
        TelemetryConfig {
            service_name: "gw".into(),
            otlp_endpoint: endpoint.map(str::to_string),
            otlp_protocol: protocol,
            metrics: false,
        }
    }

    fn resolve(
        config: Option<&TelemetryConfig>,
        env: &[(&str, &str)],
    ) -> Result<Option<Export>, TelemetryError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        resolve_export(config, &|name| env.get(name).cloned())
    }

    fn export(endpoint: &str, protocol: OtlpProtocol) -> Option<Export> {
        Some(Export {
            endpoint: endpoint.into(),
            protocol,
        })
    }

    /// Proves: `otlp_endpoint` in the file beats the environment, `/v1/traces` is appended for
    /// HTTP, `none`/empty and `OTEL_SDK_DISABLED=true` turn export off.
    #[test]
    fn the_file_wins_and_none_disables() {
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4317")];
        let grpc = config(Some("http://127.0.0.1:4317"), OtlpProtocol::Grpc);
        assert_eq!(
            resolve(Some(&grpc), &env).ok().flatten(),
            export("http://127.0.0.1:4317", OtlpProtocol::Grpc)
        );
        let http = config(Some("http://127.0.0.1:4318/"), OtlpProtocol::HttpProtobuf);
        assert_eq!(
            resolve(Some(&http), &env).ok().flatten(),
            export(
                "http://127.0.0.1:4318/v1/traces",
                OtlpProtocol::HttpProtobuf
            )
        );
        for off in ["none", "None", ""] {
            let c = config(Some(off), OtlpProtocol::Grpc);
            assert_eq!(resolve(Some(&c), &env).ok().flatten(), None, "{off:?}");
        }
        let disabled = [("OTEL_SDK_DISABLED", "true")];
        assert_eq!(resolve(Some(&grpc), &disabled).ok().flatten(), None);
    }

    /// Proves: without a file endpoint the `OTEL_EXPORTER_OTLP_*` variables apply (per-signal ones
    /// first, used as is), the protocol falls back to the file's, and nothing set means no export.
    #[test]
    fn the_environment_fills_in() {
        assert_eq!(
            resolve(None, &[]).ok().flatten(),
            None,
            "no endpoint, no export"
        );
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        assert_eq!(
            resolve(None, &env).ok().flatten(),
            export("http://c:4318/v1/traces", OtlpProtocol::HttpProtobuf)
        );
        // Without a protocol variable, the file's (default grpc) applies.
        let c = config(None, OtlpProtocol::HttpProtobuf);
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")];
        assert_eq!(
            resolve(Some(&c), &env).ok().flatten(),
            export("http://c:4318/v1/traces", OtlpProtocol::HttpProtobuf)
        );
        assert_eq!(
            resolve(None, &env).ok().flatten(),
            export("http://c:4318", OtlpProtocol::Grpc)
        );
        // The per-signal variables win and a traces URL is used as is.
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/custom"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ];
        assert_eq!(
            resolve(None, &env).ok().flatten(),
            export("http://t:9/custom", OtlpProtocol::HttpProtobuf)
        );
    }

    /// Proves: an unsupported protocol in the environment is an error naming the value and variable.
    #[test]
    fn an_unsupported_protocol_is_named() {
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ];
        let e = resolve(None, &env)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("http/json") && e.contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{e}"
        );
    }
}
