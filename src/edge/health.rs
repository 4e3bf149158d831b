//! `/healthz` (the process answers) and `/readyz` (each upstream's and each tool's state).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::runtime::Version;
use crate::runtime::catalog::Entry;
use crate::runtime::live::Live;
use crate::telemetry;
use crate::telemetry::metrics::UpstreamHealth;
use crate::upstream::Status;

/// `GET /metrics`: the OpenMetrics (Prometheus) text, 404 unless `telemetry.metrics: true`.
pub async fn metrics(State(live): State<Arc<Live>>, request: HeaderMap) -> Response {
    let gateway = live.current();
    let upstreams: Vec<UpstreamHealth> = gateway
        .kept
        .upstreams
        .iter()
        .map(|(name, u)| {
            let snapshot = u.snapshot();
            UpstreamHealth {
                name: name.clone(),
                up: snapshot.status == Status::Up,
                tools: snapshot.tools.len(),
            }
        })
        .collect();
    telemetry::metrics::render(&upstreams, &request).unwrap_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            "Not Found: metrics are off (set telemetry.metrics: true)",
        )
            .into_response()
    })
}

pub async fn healthz() -> &'static str {
    "ok"
}

/// 503 until every upstream has been tried once; then 200 with the state of everything.
pub async fn readyz(State(live): State<Arc<Live>>) -> (StatusCode, Json<Value>) {
    let gateway = live.current();
    let report = readiness(&gateway);
    let status = if gateway.all_upstreams_tried() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(report))
}

/// The readiness report, also used by `check`.
pub fn readiness(gateway: &Version) -> Value {
    let mut upstreams = Map::new();
    for (name, upstream) in &gateway.kept.upstreams {
        let snapshot = upstream.snapshot();
        let mut entry = serde_json::to_value(&snapshot.status).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut entry {
            map.insert("tools".into(), json!(snapshot.tools.len()));
            // Which MCP version the gateway speaks to it (2026-07-28 when it offers it).
            if let Some(protocol) = &snapshot.protocol {
                map.insert("protocol".into(), json!(protocol));
            }
        }
        upstreams.insert(name.clone(), entry);
    }
    let catalog = gateway.catalog();
    let mut tools = Map::new();
    for (name, entry) in &catalog.entries {
        let value = match entry {
            Entry::Exposed(tool) => match &tool.upstream_schemas {
                Some(s) => json!({
                    "state": "enabled",
                    "upstream": tool.contract.upstream,
                    "narrowing": s.verdict.to_string(),
                    "output_narrowing": s.output_verdict.as_ref().map(ToString::to_string),
                }),
                None => json!({
                    "state": "unavailable",
                    "upstream": tool.contract.upstream,
                    "reason": format!("upstream {} has not listed its tools yet", tool.contract.upstream),
                }),
            },
            Entry::Disabled { contract, reason } => json!({
                "state": "disabled",
                "upstream": contract.upstream,
                "reason": reason,
            }),
        };
        tools.insert(name.clone(), value);
    }
    json!({
        "ready": gateway.all_upstreams_tried(),
        "upstreams": upstreams,
        "tools": tools,
    })
}
