//! Resource updates from the shared upstream connection reach only the sessions that subscribed,
//! whichever protocol the stdio upstream speaks.

use serde_json::json;

use crate::common::{self, Gateway, KEY, listening};

/// The gateway with the demo upstream on `legacy`'s protocol, which `/readyz` reports.
fn start_over(legacy: bool) -> (Gateway, &'static str) {
    let spoken = if legacy { "2025-11-25" } else { "2026-07-28" };
    let gw = Gateway::start(
        &super::config_over(legacy),
        &[("demo.yaml", super::CONTRACT)],
    );
    gw.wait_tools_joined("demo", &["touch_resource"]);
    let ready = gw.readyz();
    assert_eq!(ready["upstreams"]["demo"]["protocol"], spoken, "{ready}");
    (gw, spoken)
}

/// Proves `notifications/resources/updated` from the shared upstream connection reaches only the
/// session that subscribed to the URI: session A subscribes to the static text, session B to a
/// template URI; both are touched, the text first; B's first update is its own URI (the gateway
/// passes events on in order, so a leak of the text's update to B would have come first), and A
/// hears of the text. On a 2026-07-28 upstream (the gateway subscribes on a
/// `subscriptions/listen` stream: `upstream::watch`) and on a 2025-11-25 one
/// (`resources/subscribe`). Fails if the gateway broadcast updates to every session, or dropped
/// them.
#[tokio::test]
async fn updates_reach_only_the_subscribed_session() {
    for legacy in [false, true] {
        updates_reach_only_the_subscribed_session_over(legacy).await;
    }
}

#[allow(deprecated)]
async fn updates_reach_only_the_subscribed_session_over(legacy: bool) {
    use rmcp::model::SubscribeRequestParams;
    let (gw, spoken) = start_over(legacy);
    let (a, mut a_updates) = listening(&gw.url, KEY).await;
    let (b, mut b_updates) = listening(&gw.url, KEY).await;
    a.subscribe(SubscribeRequestParams::new("test://static-text"))
        .await
        .expect("A subscribes");
    b.subscribe(SubscribeRequestParams::new("test://template/42/data"))
        .await
        .expect("B subscribes");
    for uri in ["test://static-text", "test://template/42/data"] {
        a.call_tool(common::tool_params("touch_resource", json!({"uri": uri})))
            .await
            .expect("touch_resource");
    }
    let within = std::time::Duration::from_secs(20);
    let b_first = tokio::time::timeout(within, b_updates.recv()).await;
    assert_eq!(
        b_first.ok().flatten().as_deref(),
        Some("test://template/42/data"),
        "{spoken}"
    );
    let a_first = tokio::time::timeout(within, a_updates.recv()).await;
    assert_eq!(
        a_first.ok().flatten().as_deref(),
        Some("test://static-text"),
        "{spoken}"
    );
}
