//! The result cache (`cache:`, docs/semantics.md "Caching") with many callers at once, against
//! the demo upstream's `counter` tool, whose every run answers a new number: the numbers a caller
//! sees tell whose run answered it, and the upstream's count tells how many calls reached it.

use crate::common;

use common::{Gateway, KEY, call_answered, client, counter, demo_stdio_config, hash_key};
use serde_json::{Value, json};

/// Callers `c0`..`c{n-1}` (keys `key-c{i}`), each allowed every tool, plus alice (`KEY`).
fn many_callers(n: usize) -> String {
    let mut text = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n",
        hash_key(KEY)
    );
    for i in 0..n {
        text.push_str(&format!(
            "  - name: c{i}\n    api_key_sha256: {}\n    tools: ['*']\n",
            hash_key(&format!("key-c{i}"))
        ));
    }
    text
}

/// `counter` contracted as a cached read (a contract may say so of any tool: the operator's
/// claim), per caller and shared, plus an uncached one to read the upstream's count.
fn contract() -> String {
    let tool = |name: &str, extra: &str| {
        format!(
            "  {name}:\n    upstream_tool: counter\n    privilege: read\n    idempotent: true\n{extra}    \
             input: {{ type: object, properties: {{ delay_ms: {{ type: integer, maximum: 50 }} }}, \
             additionalProperties: false }}\n"
        )
    };
    format!(
        "upstream: demo\ntools:\n{}{}  peek_counter:\n    privilege: read\n",
        tool("count_mine", "    cache: 60s\n"),
        tool("count_shared", "    cache: 60s\n    cache_scope: shared\n"),
    )
}

/// The `count` of a result, or a panic showing it.
fn count_of(r: &rmcp::model::CallToolResult) -> u64 {
    common::structured_u64(r, "count").unwrap_or_else(|| panic!("no count: {r:?}"))
}

fn cached(r: &rmcp::model::CallToolResult) -> bool {
    r.meta
        .as_ref()
        .and_then(|m| m.0.get("narrowgate/cached"))
        .is_some_and(|v| v == &Value::Bool(true))
}

/// Proves: with `cache_scope: caller` (the default), 12 callers each calling 5 times at once see
/// only numbers of their own runs, never another caller's: per caller one run upstream, its later
/// calls answered from the cache (marked), and other arguments are another entry. With
/// `cache_scope: shared`, the first run answers everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cached_answers_never_cross_callers_unless_shared() {
    const CALLERS: usize = 12;
    let config = demo_stdio_config(&many_callers(CALLERS), "");
    let gw = Gateway::start(&config, &[("demo.yaml", &contract())]);
    let alice = client(&gw.url, KEY).await;
    let before = counter(&alice).await;
    // Every caller at once: its first call, then 4 repeats at once.
    let tasks: Vec<_> = (0..CALLERS)
        .map(|i| {
            let url = gw.url.clone();
            tokio::spawn(async move {
                let c = client(&url, &format!("key-c{i}")).await;
                let args = || json!({"delay_ms": 5});
                let first = call_answered(&c, "count_mine", args()).await;
                let (a, b, d, e) = tokio::join!(
                    call_answered(&c, "count_mine", args()),
                    call_answered(&c, "count_mine", args()),
                    call_answered(&c, "count_mine", args()),
                    call_answered(&c, "count_mine", args()),
                );
                (c, vec![first, a, b, d, e])
            })
        })
        .collect();
    let mut clients = Vec::new();
    let mut per_caller = Vec::new();
    for task in tasks {
        let (c, results) = task.await.expect("task");
        clients.push(c);
        per_caller.push(results);
    }
    let mut seen_by: std::collections::BTreeMap<u64, usize> = Default::default();
    for (i, results) in per_caller.iter().enumerate() {
        let first = count_of(&results[0]);
        assert!(!cached(&results[0]), "c{i}: the first call ran upstream");
        for r in &results[1..] {
            assert!(
                cached(r),
                "c{i}: a repeat after the first answer is cached: {r:?}"
            );
            assert_eq!(count_of(r), first, "c{i}: its own first answer");
        }
        if let Some(other) = seen_by.insert(first, i) {
            panic!("callers c{other} and c{i} were answered the same run ({first})");
        }
    }
    let after_mine = counter(&alice).await;
    assert_eq!(after_mine - before, CALLERS as u64, "one run per caller");

    // Other arguments: another entry.
    let other = call_answered(&clients[0], "count_mine", json!({"delay_ms": 6})).await;
    assert!(!cached(&other));

    // Shared: one run answers every caller.
    let first = call_answered(&clients[0], "count_shared", json!({})).await;
    for (i, c) in clients.iter().enumerate() {
        let r = &call_answered(c, "count_shared", json!({})).await;
        assert!(cached(r), "c{i}: {r:?}");
        assert_eq!(count_of(r), count_of(&first), "c{i}");
    }

    // Receipts: a cached answer has outcome ok, cached, no upstream attempt.
    let receipts = common::receipts_json(&gw.config_path(), &["--tool", "count_mine"]);
    let hits = receipts.iter().filter(|r| r["cached"] == true).count();
    assert_eq!(hits, CALLERS * 4, "{receipts:#?}");
    assert!(
        receipts
            .iter()
            .filter(|r| r["cached"] == true)
            .all(|r| r["outcome"] == "ok" && r["attempts"] == 0),
        "{receipts:#?}"
    );
}

/// Proves: with `list_ttl: 5m`, a 2026-07-28 `tools/list` carries `ttlMs: 300000` (and stays
/// `cacheScope: private`: the list depends on who asks); without it, `ttlMs` is 0.
#[tokio::test]
async fn list_ttl_sets_the_lists_ttl() {
    for (extra, ttl) in [("list_ttl: 5m\n", 300_000), ("", 0)] {
        let config = demo_stdio_config(&many_callers(0), extra);
        let gw = Gateway::start(&config, &[("demo.yaml", &contract())]);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let auth = format!("Bearer {KEY}");
        let headers = [
            ("authorization", auth.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ];
        let answer = common::Raw::new(&gw.url)
            .post(&headers, &body.to_string())
            .await
            .message();
        let result = &answer["result"];
        assert_eq!(result["ttlMs"], ttl, "{extra:?}: {answer}");
        assert_eq!(result["cacheScope"], "private", "{answer}");
    }
}
