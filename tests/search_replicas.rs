//! Tool search across replicas (docs/discovery.md): two gateways on the same configuration and
//! catalogue, the example contracts on the demo upstream, answer every search alike.

use crate::common;

use common::{Gateway, KEY, call_answered, client, demo_stdio_config, hash_key};
use serde_json::json;
use std::time::Duration;

/// Proves: the same queries through two replicas (each its own process and index, built on its
/// first search) answer the same tools in the same order with the same availability, including
/// after a reload of one of them rebuilt its catalogue.
#[tokio::test]
async fn replicas_answer_every_search_alike() {
    let callers = format!(
        "callers:\n  - name: agent\n    api_key_sha256: {}\n    tools: ['*']\n    discovery: search\n",
        hash_key(KEY)
    );
    let demo = std::fs::read_to_string(common::peers::repo_root().join("contracts/demo.yaml"))
        .expect("contracts/demo.yaml");
    let config = demo_stdio_config(&callers, "approvers: [agent]\n");
    let replicas = [
        Gateway::start(&config, &[("demo.yaml", &demo)]),
        Gateway::start(&config, &[("demo.yaml", &demo)]),
    ];
    let queries = [
        "weather in Chicago",
        "add two numbers",
        "refund an order",
        "echo a message back",
        "add",
        "numbers",
    ];
    let answers = |gw: &Gateway| {
        let url = gw.url.clone();
        async move {
            let c = client(&url, KEY).await;
            let mut all = Vec::new();
            for q in queries {
                let r = call_answered(&c, "search_tools", json!({"query": q})).await;
                all.push(r.structured_content.expect("structured"));
            }
            all
        }
    };
    let first = answers(&replicas[0]).await;
    assert!(
        first
            .iter()
            .all(|a| a["tools"].as_array().is_some_and(|t| !t.is_empty())),
        "{first:#?}"
    );
    assert_eq!(answers(&replicas[1]).await, first);
    // A reload rebuilds the catalogue (and, on its next search, the index): the same answers.
    let gw = &replicas[1];
    gw.write_file(
        "narrowgate.yaml",
        &format!("contracts: contracts\n{config}list_ttl: 1m\n"),
    );
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    gw.wait_for_log(Duration::from_secs(15), "the reload", |log| {
        log.contains("configuration reloaded")
    });
    assert_eq!(answers(gw).await, first);
}
