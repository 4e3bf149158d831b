//! Approvals with shared state: pending approvals in Redis (`state: redis://…`) seen, decided and
//! collected through any replica, and approval receipts in PostgreSQL after migrating a
//! version-3 database.

use super::*;
use common::{Postgres, Redis};

/// Two gateways sharing `redis`, each with its own demo upstream and receipts: replicas.
fn replicas(redis: &Redis) -> (Gateway, Gateway) {
    let start = || {
        let callers = callers(&[("bob", BOB, "[]"), ("carol", CAROL, "['*']")]);
        let extra = format!("approvers: [alice, bob]\nstate: {}\n", redis.url());
        Gateway::start(
            &demo_stdio_config(&callers, &extra),
            &[("demo.yaml", CONTRACTS)],
        )
    };
    (start(), start())
}

/// Proves: with `state: redis://…`, a call held by replica A is listed by replica B's
/// `GET /approvals` (and `narrowgate approvals list` against B), B refuses alice deciding her own
/// call, bob's approval through B's `POST /approvals/{id}` releases the call waiting on A, and the
/// approval is then used: neither replica lists it.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_held_on_one_replica_is_decided_through_another() {
    let redis = Redis::start();
    let (a, b) = replicas(&redis);
    let waiting = spawn_call(&a, "refund", json!({"order_id": "R-1", "amount": 7}));
    let id = pending_id(&b, "refund", "R-1").await;
    let (code, listed, err) = cli(&b, BOB, &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(listed.contains(&id), "{listed}");
    let approve = json!({"decision": "approve", "reason": "ok from B"});
    assert_eq!(decide(&b, Some(KEY), &id, approve.clone()).await.0, 403);
    assert!(!waiting.is_finished(), "the call still waits on A");
    let (status, decided) = decide(&b, Some(BOB), &id, approve).await;
    assert_eq!((status, &decided["state"]), (200, &json!("approved")));

    let result = waiting.await.expect("the call's task");
    assert_eq!(result["isError"], false, "{result}\n{}", a.log());
    let receipt = last_receipt(&a, "refund");
    assert_eq!(receipt["approval_id"], id.as_str());
    assert_eq!(receipt["approver"], "bob");
    assert_eq!(list(&a, BOB).await, (200, json!([])));
    assert_eq!(list(&b, BOB).await, (200, json!([])));
}

/// Proves: a call held on replica A whose client went away stays pending in Redis; approved
/// through B, the identical call sent to B collects the approval at once (B's receipt names the
/// approval A opened) and is performed; a second identical call through A waits anew, and a
/// denial through B answers it.
#[tokio::test(flavor = "multi_thread")]
async fn an_approval_opened_on_one_replica_is_collected_on_another() {
    let redis = Redis::start();
    let (a, b) = replicas(&redis);
    let args = json!({"order_id": "R-2", "amount": 8});
    let first = spawn_call(&a, "refund", args.clone());
    let id = pending_id(&b, "refund", "R-2").await;
    first.abort();
    let _ = first.await;
    abandoned_receipt(&a).await;
    let (status, _) = decide(&b, Some(BOB), &id, json!({"decision": "approve"})).await;
    assert_eq!(status, 200);

    let again = call(&b.url, KEY, "refund", args.clone(), json!({})).await;
    assert_eq!(again["isError"], false, "{again}\n{}", b.log());
    let receipt = last_receipt(&b, "refund");
    assert_eq!(receipt["approval_id"], id.as_str());
    assert_eq!(receipt["approval_decision"], "approved");
    assert_eq!(receipt["attempts"], 1);

    let third = spawn_call(&a, "refund", args);
    let new_id = pending_id(&b, "refund", "R-2").await;
    assert_ne!(new_id, id, "an approval is used once");
    let deny = json!({"decision": "deny", "reason": "twice is enough"});
    assert_eq!(decide(&b, Some(BOB), &new_id, deny).await.0, 200);
    let denied = third.await.expect("third call");
    assert_eq!(denied["isError"], true);
    assert!(
        result_text(&denied).contains("denied by bob: twice is enough"),
        "{denied}"
    );
}

/// Proves: a PostgreSQL receipts database at schema version 3 (with a denied receipt and its
/// `reason`) is read by `narrowgate receipts` as it is, then migrated to version 4 when the
/// gateway starts: the old receipt keeps its reason, and a call that timed out waiting for an
/// approver records its approval id, decision and reason, which `narrowgate receipts --outcome
/// denied` shows.
#[tokio::test(flavor = "multi_thread")]
async fn postgresql_receipts_gain_the_approval_columns() {
    let pg = Postgres::start();
    pg.batch("CREATE DATABASE old");
    for step in &narrowgate::harness::MIGRATIONS[..3] {
        pg.batch_in("old", step);
    }
    pg.batch_in(
        "old",
        "CREATE TABLE narrowgate_schema_version (version integer NOT NULL);
         INSERT INTO narrowgate_schema_version VALUES (3);
         INSERT INTO receipts VALUES ('00000000-0000-7000-8000-000000000001',
           '2025-01-01T00:00:00.000Z', 'alice', 'refund', 'demo', 'refund_order', NULL,
           'sha256:00', 'denied', 0, false, 0.5, NULL, NULL, 'precondition 0: no');",
    );
    let url = pg.url_of("old");
    let before = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(["receipts", "--json", "--db", &url])
        .output()
        .expect("run narrowgate receipts");
    let text = String::from_utf8_lossy(&before.stdout);
    assert!(
        before.status.success() && text.contains("precondition 0: no"),
        "a version-3 database reads as it is: {before:?}"
    );

    let callers = callers(&[("bob", BOB, "[]")]);
    let extra = format!("approvers: [bob]\nreceipts:\n  url: {url}\n");
    let gw = Gateway::start(
        &demo_stdio_config(&callers, &extra),
        &[("demo.yaml", CONTRACTS)],
    );
    let version = pg.value_in(
        "old",
        "SELECT max(version)::text FROM narrowgate_schema_version",
    );
    let current = narrowgate::harness::SCHEMA_VERSION.to_string();
    assert_eq!(version.as_deref(), Some(current.as_str()));
    let result = call(
        &gw.url,
        KEY,
        "refund_quick",
        json!({"order_id": "P-1", "amount": 1}),
        json!({}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    let denied = receipts_json(&gw.config_path(), &["--outcome", "denied"]);
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert_eq!(denied[0]["reason"], "precondition 0: no");
    assert_eq!(denied[0]["approval_decision"], Value::Null);
    let id = denied[1]["approval_id"].as_str().unwrap_or_default();
    assert!(!id.is_empty(), "{denied:?}");
    assert_eq!(denied[1]["approval_decision"], "timeout");
    assert_eq!(denied[1]["reason"], format!("approval {id} timed out"));
    let (code, table, err) = common::receipts_command(&gw.config_path(), &["--outcome", "denied"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("timeout after") && table.contains(&format!("approval {id} timed out")),
        "{table}"
    );
}

/// Proves: with `state: redis://…` pointing where no Redis answers, a call of an
/// `approval: approver` tool is refused at once without reaching the upstream (decision
/// `unavailable`), and the approvals API answers 503: fail closed, never an unshared approval.
#[tokio::test(flavor = "multi_thread")]
async fn without_redis_approver_calls_are_refused() {
    let callers = callers(&[("bob", BOB, "[]")]);
    let extra = format!(
        "approvers: [bob]\nstate: redis://127.0.0.1:{}\n",
        common::free_port()
    );
    let gw = Gateway::start(
        &demo_stdio_config(&callers, &extra),
        &[("demo.yaml", CONTRACTS)],
    );
    let result = call(
        &gw.url,
        KEY,
        "refund",
        json!({"order_id": "U-1", "amount": 1}),
        json!({}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result_text(&result).contains("the pending approvals cannot be reached"),
        "{result}"
    );
    let receipt = last_receipt(&gw, "refund");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
    assert_eq!(receipt["approval_decision"], "unavailable");
    assert_eq!(list(&gw, BOB).await.0, 503);
}
