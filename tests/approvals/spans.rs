//! The span events of approvals, as an OTLP collector receives them.

use super::*;
use crate::otel;

/// The `narrowgate.approval.*` events of the SERVER spans of `tool` among `spans`: (name,
/// `approval.id`, `approval.approver`).
fn approval_events(spans: &[Value], tool: &str) -> Vec<(String, String, Option<String>)> {
    let name = format!("tools/call {tool}");
    spans
        .iter()
        .filter(|s| s["name"] == name.as_str() && s["kind"] == "SPAN_KIND_SERVER")
        .flat_map(|s| s["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("narrowgate.approval."))
        })
        .map(|e| {
            let attribute = |k: &str| e["attributes"][k].as_str().map(str::to_string);
            (
                e["name"].as_str().unwrap_or_default().to_string(),
                attribute("approval.id").unwrap_or_default(),
                attribute("approval.approver"),
            )
        })
        .collect()
}

/// Proves: a held call's SERVER span carries `narrowgate.approval.pending` with the approval's
/// id, then `narrowgate.approval.approved` or `.denied` with the approver (or `.timeout`).
#[tokio::test(flavor = "multi_thread")]
async fn approvals_are_span_events() {
    let collector = otel::Collector::start();
    let callers = callers(&[("bob", BOB, "[]")]);
    let extra = format!(
        "approvers: [bob]\ntelemetry:\n  service_name: gw-approvals\n  otlp_endpoint: {}\n  \
         otlp_protocol: http/protobuf\n",
        collector.http
    );
    let gw = Gateway::spawn(
        &demo_stdio_config(&callers, &extra),
        &[("demo.yaml", CONTRACTS)],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    gw.wait_ready(Duration::from_secs(60));
    let approved = spawn_call(&gw, "refund", json!({"order_id": "S-1", "amount": 1}));
    let first = pending_id(&gw, "refund", "S-1").await;
    assert_eq!(
        decide(&gw, Some(BOB), &first, json!({"decision": "approve"}))
            .await
            .0,
        200
    );
    approved.await.expect("approved call");
    let denied = spawn_call(&gw, "refund", json!({"order_id": "S-2", "amount": 2}));
    let second = pending_id(&gw, "refund", "S-2").await;
    assert_eq!(
        decide(&gw, Some(BOB), &second, json!({"decision": "deny"}))
            .await
            .0,
        200
    );
    denied.await.expect("denied call");
    let quick = json!({"order_id": "S-3", "amount": 3});
    call(&gw.url, KEY, "refund_quick", quick, json!({})).await;

    let spans = collector
        .wait_for("the approvals' span events", |spans| {
            approval_events(spans, "refund").len() == 4
                && approval_events(spans, "refund_quick").len() == 2
        })
        .await;
    let mut refund = approval_events(&spans, "refund");
    refund.sort();
    let bob = Some("bob".to_string());
    assert_eq!(refund, {
        let mut expected = vec![
            (
                "narrowgate.approval.approved".to_string(),
                first.clone(),
                bob.clone(),
            ),
            ("narrowgate.approval.pending".to_string(), first, None),
            (
                "narrowgate.approval.denied".to_string(),
                second.clone(),
                bob,
            ),
            ("narrowgate.approval.pending".to_string(), second, None),
        ];
        expected.sort();
        expected
    });
    let quick = approval_events(&spans, "refund_quick");
    let names: Vec<&str> = quick.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["narrowgate.approval.pending", "narrowgate.approval.timeout"]
    );
    assert_eq!(quick[0].1, quick[1].1, "one approval id");
}
