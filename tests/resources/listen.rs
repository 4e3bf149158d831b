//! A 2026-07-28 client's `subscriptions/listen` stream through the gateway: resource updates
//! reach it only for URIs it named and may read, as on a session's `resources/subscribe`.

use rmcp::RoleClient;
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService, Subscription};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::common::{self, BOB, KEY};

/// A stateless 2026-07-28 client of the gateway at `url` with `key`.
async fn modern(url: &str, key: &str) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    ().serve_with_lifecycle(
        StreamableHttpClientTransport::from_config(config),
        lifecycle,
    )
    .await
    .expect("a 2026-07-28 client connects through the gateway")
}

/// A `subscriptions/listen` stream for `uris`.
async fn listen(client: &RunningService<RoleClient, ()>, uris: &[&str]) -> Subscription {
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions(uris.iter().copied())
        .build();
    client
        .listen(filter)
        .await
        .expect("the gateway acknowledges the stream")
}

/// The URI of the next `notifications/resources/updated` on `stream` within `within`.
async fn next_update(stream: &mut Subscription, within: std::time::Duration) -> Option<String> {
    loop {
        match tokio::time::timeout(within, stream.next()).await {
            Ok(Ok(Some(ServerNotification::ResourceUpdatedNotification(updated)))) => {
                return Some(updated.params.uri);
            }
            Ok(Ok(Some(_))) => continue,
            _ => return None,
        }
    }
}

/// Proves: a 2026-07-28 client that names resource URIs on its `subscriptions/listen` stream
/// hears of their updates from the shared upstream connection, in order (the gateway subscribed
/// them upstream for it), and a caller who may read no resource (bob) hears of none although it
/// named the same URI: the stream's acknowledgment is the same for both. Fails without the
/// gateway's listen relay (it accepted only tool-list changes, and the client heard nothing).
#[tokio::test]
async fn a_listen_stream_hears_of_the_resources_it_named_and_may_read() {
    let gw = super::start();
    let alice = modern(&gw.url, KEY).await;
    let bob = modern(&gw.url, BOB).await;
    let named = ["test://static-text", "test://template/42/data"];
    let mut alices = listen(&alice, &named).await;
    let mut bobs = listen(&bob, &named[..1]).await;
    assert_eq!(
        bobs.acknowledged().resource_subscriptions.as_deref(),
        Some(&["test://static-text".to_string()][..]),
        "acknowledged alike, whoever may read it"
    );
    let toucher = common::client(&gw.url, KEY).await;
    for uri in named {
        toucher
            .call_tool(common::tool_params("touch_resource", json!({"uri": uri})))
            .await
            .expect("touch_resource");
    }
    let within = std::time::Duration::from_secs(20);
    for uri in named {
        assert_eq!(next_update(&mut alices, within).await.as_deref(), Some(uri));
    }
    let leaked = next_update(&mut bobs, std::time::Duration::from_secs(1)).await;
    assert_eq!(leaked, None, "bob may read no resource");
    let _ = toucher.cancel().await;
    drop((alices, bobs));
    let _ = (alice.cancel().await, bob.cancel().await);
}
