//! Every 2026-07-28 result the gateway gives for resources, prompts and completion is complete as
//! that revision requires (`resultType`, and the caching hints on what may be cached), checked
//! by the Python SDK 2.x client's own validation, over upstreams that speak either revision.

use serde_json::{Value, json};

use super::{CONTRACT, config_over};
use crate::common::peers::PyClient;
use crate::common::{Gateway, KEY};

/// What the SDK client is asked: every method of resources, prompts and completion.
fn steps() -> Value {
    json!([
        {"op": "list_resources"},
        {"op": "list_templates"},
        {"op": "read_resource", "uri": "test://static-text"},
        {"op": "read_resource", "uri": "test://template/7/data"},
        {"op": "list_prompts"},
        {"op": "get_prompt", "name": "greeting", "arguments": {"arg1": "park", "arg2": "bob"}},
        {"op": "complete", "ref": {"type": "ref/prompt", "name": "greeting"},
         "argument": {"name": "arg1", "value": "pa"}},
    ])
}

/// Asserts that each of `out`'s results parsed in the SDK and carries `resultType: complete`,
/// and the lists and reads their caching hints.
fn assert_complete(out: &Value, log: &str) {
    assert_eq!(out["protocol_version"], "2026-07-28", "{out}\n{log}");
    let results = out["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 7, "{out}");
    for (step, result) in steps().as_array().into_iter().flatten().zip(&results) {
        let answer = result.get("page").or_else(|| result.get("result"));
        let Some(answer) = answer else {
            panic!("{step}: the SDK did not accept the answer: {result}\n{log}");
        };
        assert_eq!(answer["resultType"], "complete", "{step}: {answer}");
        if matches!(
            step["op"].as_str(),
            Some("list_resources" | "list_templates" | "list_prompts" | "read_resource")
        ) {
            assert!(answer["ttlMs"].is_u64(), "{step}: no ttlMs: {answer}");
            assert!(
                answer["cacheScope"].is_string(),
                "{step}: no cacheScope: {answer}"
            );
        }
    }
    assert_eq!(
        results[2]["result"]["contents"][0]["uri"],
        "test://static-text"
    );
    assert_eq!(
        results[6]["result"]["completion"]["values"],
        json!(["park", "party"])
    );
}

/// Proves: through the gateway on 2026-07-28, the Python SDK 2.x client accepts every answer to
/// resources/list, resources/templates/list, resources/read, prompts/list, prompts/get and
/// completion/complete, each with `resultType` (and the caching hints where the revision asks
/// for them), whether the upstream speaks 2025-11-25 (its answers carry none of it) or
/// 2026-07-28. Fails without the gateway completing its results: the lists and the relayed
/// answers had no `resultType`, and the SDK raised a ValidationError.
#[test]
fn every_result_is_complete_for_the_python_sdk_2() {
    for legacy_upstream in [true, false] {
        let gw = Gateway::start(&config_over(legacy_upstream), &[("demo.yaml", CONTRACT)]);
        let out = PyClient::V2("auto").run(&gw.url, KEY, &steps());
        assert_complete(&out, &gw.log());
    }
}
