//! A fleet as operators run one: Debian's nginx on the repository's `docker/nginx.conf`, a real
//! Redis (`state:`), a real PostgreSQL (`receipts.url`) and three replicas of the real binary, driven
//! with the official Python SDK through nginx (legacy sessions and stateless 2026-07-28 calls at
//! once) while one replica is killed with SIGKILL mid-run.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::peers::{py_client_script, py2_python};
use common::{
    BOB, Gateway, KEY, Nginx, Postgres, Raw, Redis, callers, contract_file, counter_tool,
    demo_stdio_config, echo_tool, stateless_call_body, stateless_call_headers,
};
use serde_json::{Value, json};

/// Legacy sessions (one Python worker each) and stateless workers in the mixed run.
const SESSIONS: usize = 9;
const STATELESS_WORKERS: usize = 3;
/// Seconds the Python workers call for; the kill happens about a third of the way in.
const RUN_SECONDS: u64 = 9;
/// `bob`'s fleet-wide rate: this many calls a minute, whichever replica answers.
const BOB_PER_MINUTE: usize = 5;
const DB: &str = "fleet";

/// One replica: the demo upstream on stdio, rate limits and idempotency keys in `redis`, receipts
/// (with arguments, to find each call's own) in PostgreSQL.
fn replica(redis: &Redis, pg: &Postgres) -> Gateway {
    let contract = contract_file(
        "demo",
        &[&echo_tool("echo", 80, ""), &counter_tool("count", "")],
    );
    let bob = format!("[echo]\n    rate: {BOB_PER_MINUTE}/m");
    let extra = format!(
        "state: {}\nreceipts:\n  url: {}\n  store_arguments: true\n",
        redis.url(),
        pg.url_of(DB)
    );
    Gateway::start(
        &demo_stdio_config(&callers(&[("bob", BOB, &bob)]), &extra),
        &[("demo.yaml", contract.as_str())],
    )
}

/// The replica (index) that holds `session`: the only one whose own port accepts a `ping` in it
/// (the others answer 404 "session not found"). The ping's id is a string the Python client never
/// uses (a session refuses an id that is in flight).
async fn owner_of(session: &str, replicas: &[Gateway]) -> usize {
    let auth = format!("Bearer {KEY}");
    let headers = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let ping = json!({"jsonrpc": "2.0", "id": "owner-probe", "method": "ping"}).to_string();
    let mut owners = Vec::new();
    let mut answers = Vec::new();
    for (i, gw) in replicas.iter().enumerate() {
        let reply = Raw::new(&gw.url).post(&headers, &ping).await;
        if reply.status == 200 {
            owners.push(i);
        }
        answers.push((reply.status, reply.body));
    }
    assert_eq!(
        owners.len(),
        1,
        "session {session} is held by exactly one replica: {answers:?}"
    );
    owners[0]
}

/// Proves, with three replicas behind nginx sharing Redis and PostgreSQL:
/// - the legacy sessions held by the two surviving replicas never notice that the third was
///   killed (not one failed call), while those held by the killed one see their first failure
///   after the kill, start a new session and go on: no call of theirs fails once it is back;
/// - stateless calls go on through the surviving replicas: at most the call in flight at the kill
///   fails per worker;
/// - every answered call has exactly one receipt in PostgreSQL (its unique argument found once,
///   outcome ok), and no call has two;
/// - a caller's rate limit holds fleet-wide (exactly `BOB_PER_MINUTE` of 3× as many stateless
///   calls spread over the replicas pass), and an idempotency key is performed once whichever
///   replica each repeat reaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_loses_nothing_but_the_dead_replicas_sessions() {
    let redis = Redis::start();
    let pg = Postgres::start();
    pg.batch(&format!("CREATE DATABASE {DB}"));
    let mut replicas = vec![
        replica(&redis, &pg),
        replica(&redis, &pg),
        replica(&redis, &pg),
    ];
    let nginx = Nginx::start(&replicas.iter().collect::<Vec<_>>());

    fleet_wide_limits_and_keys(&nginx, &replicas).await;

    // The mixed run, read line by line as the Python workers report their sessions.
    let plan = json!({"sessions": SESSIONS, "stateless": STATELESS_WORKERS,
                      "seconds": RUN_SECONDS, "tool": "echo", "tag": "fleet"});
    let scratch = tempfile::tempdir().expect("temp dir");
    let stderr_path = scratch.path().join("fleet-client.stderr");
    let mut python = Command::new(py2_python())
        .arg(py_client_script("py2_fleet_client.py"))
        .args([nginx.url().as_str(), KEY, &plan.to_string()])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start the Python SDK fleet client");
    let stdout = python.stdout.take().expect("stdout");
    let client_stderr = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let (lines, events) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            match serde_json::from_str(&line) {
                Ok(v) => {
                    if lines.send(v).is_err() {
                        return;
                    }
                }
                Err(_) => eprintln!("fleet client printed: {line}"),
            }
        }
    });

    // Wait for every worker's first handshake; learn where each session lives.
    let mut first_sessions: BTreeMap<String, String> = BTreeMap::new();
    let mut stateless_started = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while first_sessions.len() < SESSIONS || stateless_started < STATELESS_WORKERS {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = events.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "the fleet client did not start all its workers within 60 s: {}",
                client_stderr()
            )
        });
        if event["event"] != "session" || event["generation"] != 0 {
            continue;
        }
        let worker = event["worker"].as_str().unwrap_or_default().to_string();
        match event["session"].as_str() {
            Some(session) => {
                first_sessions.insert(worker, session.to_string());
            }
            None => {
                assert_eq!(event["protocol"], "2026-07-28", "stateless worker: {event}");
                stateless_started += 1;
            }
        }
    }
    let mut holder: HashMap<String, usize> = HashMap::new();
    for (worker, session) in &first_sessions {
        holder.insert(worker.clone(), owner_of(session, &replicas).await);
    }
    let mut per_replica = [0usize; 3];
    for &r in holder.values() {
        per_replica[r] += 1;
    }
    // The replica with the most sessions dies (with 9 sessions on 3 replicas it holds some).
    let victim = (0..3).max_by_key(|&r| per_replica[r]).unwrap_or(0);
    assert!(
        per_replica[victim] > 0,
        "sessions per replica: {per_replica:?}"
    );

    // Pacing, not waiting for a condition: let load run on all three replicas for a while.
    tokio::time::sleep(Duration::from_secs(RUN_SECONDS / 3)).await;
    let killed_at = Instant::now();
    let victim_gateway = replicas.remove(victim);
    let killed = Command::new("kill")
        .args(["-KILL", &victim_gateway.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "SIGKILL replica {victim}");
    drop(victim_gateway);

    // The rest of the run, then the client's report.
    let mut done = None;
    let deadline = killed_at + Duration::from_secs(RUN_SECONDS + 60);
    while done.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(event) if event["event"] == "done" => done = Some(event),
            Ok(_) => {}
            Err(_) => panic!("the fleet client did not finish: {}", client_stderr()),
        }
    }
    let status = python.wait().expect("wait for the fleet client");
    assert!(
        status.success(),
        "fleet client: {status:?} {}",
        client_stderr()
    );
    let report = done.unwrap_or_default();
    let calls = report["calls"].as_array().cloned().unwrap_or_default();
    let kill_t = first_failure_time(&calls);

    // Sessions on the survivors: not one failure. On the victim: failures, then calls that work.
    for (worker, &r) in &holder {
        let mine: Vec<&Value> = calls.iter().filter(|c| c["worker"] == *worker).collect();
        let failed: Vec<&&Value> = mine.iter().filter(|c| c["ok"] != true).collect();
        if r == victim {
            assert!(
                !failed.is_empty(),
                "{worker}'s session was on the killed replica, yet nothing failed: {mine:?}"
            );
            let last_failure = failed
                .iter()
                .filter_map(|c| c["t"].as_f64())
                .fold(0.0, f64::max);
            let after: Vec<&&Value> = mine
                .iter()
                .filter(|c| c["t"].as_f64().unwrap_or(0.0) > last_failure)
                .collect();
            assert!(
                !after.is_empty() && after.iter().all(|c| c["ok"] == true),
                "{worker} went on in a new session after the kill: {mine:?}"
            );
            assert!(
                failed.len() <= 3,
                "{worker} failed more than a reconnect: {failed:?}"
            );
        } else {
            assert!(
                failed.is_empty(),
                "{worker}'s session was on surviving replica {r}, yet calls failed: {failed:?}\n\
                 replicas {:?} ({victim} killed); nginx: {}",
                replicas.iter().map(|g| g.base.as_str()).collect::<Vec<_>>(),
                nginx
                    .log()
                    .lines()
                    .filter(|l| l.contains(&first_sessions[worker]) || l.contains("error"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    for w in 0..STATELESS_WORKERS {
        let worker = format!("S{w}");
        let mine: Vec<&Value> = calls.iter().filter(|c| c["worker"] == worker).collect();
        let failed: Vec<&&Value> = mine.iter().filter(|c| c["ok"] != true).collect();
        assert!(
            failed.len() <= 2,
            "{worker}: at most the call in flight at the kill (and its client) fails: {failed:?}"
        );
        assert!(
            mine.iter().filter(|c| c["ok"] == true).count() > 10,
            "{worker}: {mine:?}"
        );
    }
    assert!(kill_t.is_some(), "some call saw the kill");

    // Receipts: every answered call exactly once, no call twice.
    let rows = pg.rows_in(
        DB,
        "SELECT arguments->>'message', outcome, count(*)::text FROM receipts \
         WHERE tool = 'echo' AND arguments->>'message' LIKE 'fleet-%' \
         GROUP BY 1, 2",
    );
    let mut receipts: HashMap<String, (String, usize)> = HashMap::new();
    for row in rows {
        let message = row[0].clone().unwrap_or_default();
        let outcome = row[1].clone().unwrap_or_default();
        let count: usize = row[2].as_deref().and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(
            receipts.insert(message.clone(), (outcome, count)).is_none(),
            "{message} has receipts with two outcomes"
        );
    }
    let answered: Vec<&str> = calls
        .iter()
        .filter(|c| c["ok"] == true)
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        answered.len() > 100,
        "only {} calls answered",
        answered.len()
    );
    for message in &answered {
        match receipts.get(*message) {
            Some((outcome, 1)) if outcome == "ok" => {}
            other => panic!("answered call {message}: receipts {other:?}, want one `ok`"),
        }
    }
    let sent: HashSet<&str> = calls.iter().filter_map(|c| c["message"].as_str()).collect();
    for (message, (_, count)) in &receipts {
        assert!(
            sent.contains(message.as_str()),
            "receipt for a call never made: {message}"
        );
        assert_eq!(*count, 1, "{message} has {count} receipts");
    }
    eprintln!(
        "fleet: {} calls answered, {} unanswered, sessions per replica {per_replica:?}, replica \
         {victim} killed",
        answered.len(),
        calls.len() - answered.len()
    );
}

/// Through nginx (stateless calls, spread over the replicas): `bob`'s rate holds fleet-wide and an
/// idempotency key is performed once whichever replica each repeat reaches.
async fn fleet_wide_limits_and_keys(nginx: &Nginx, replicas: &[Gateway]) {
    let raw = Raw::new(&nginx.url());
    let mut passed = 0;
    for i in 0..BOB_PER_MINUTE * 3 {
        let reply = stateless(&raw, BOB, "echo", json!({"message": "metered"}), None, i).await;
        if reply["result"]["isError"] != true {
            passed += 1;
        }
    }
    assert_eq!(
        passed,
        BOB_PER_MINUTE,
        "bob's {BOB_PER_MINUTE}/m holds across the {} replicas",
        replicas.len()
    );

    let mut counts = HashSet::new();
    let mut replays = 0;
    for i in 0..6 {
        let reply = stateless(&raw, KEY, "count", json!({}), Some("refund-7"), i).await;
        let result = &reply["result"];
        assert_ne!(result["isError"], true, "{reply}");
        counts.insert(result["structuredContent"]["count"].to_string());
        if result["_meta"]["narrowgate/replayed"] == true {
            replays += 1;
        }
    }
    assert_eq!(
        counts.len(),
        1,
        "one performance, one recorded answer: {counts:?}"
    );
    assert_eq!(replays, 5, "five of six repeats replayed");
}

/// A stateless `tools/call` through nginx; its JSON-RPC answer.
async fn stateless(
    raw: &Raw,
    key: &str,
    tool: &str,
    arguments: Value,
    idempotency_key: Option<&str>,
    id: usize,
) -> Value {
    let headers = stateless_call_headers(key, tool);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut body = stateless_call_body(json!(id), tool, arguments);
    if let Some(k) = idempotency_key {
        body["params"]["_meta"]["narrowgate/idempotencyKey"] = json!(k);
    }
    let reply = raw.post(&headers, &body.to_string()).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.message()
}

/// When the first call failed (seconds since the client started): the kill, as the client saw it.
fn first_failure_time(calls: &[Value]) -> Option<f64> {
    calls
        .iter()
        .filter(|c| c["ok"] != true)
        .filter_map(|c| c["t"].as_f64())
        .reduce(f64::min)
}

/// `initialize` as `key` on `gw`: the reply (its `Mcp-Session-Id` when it opened a session).
async fn open_session(gw: &Gateway, key: &str) -> common::Reply {
    let auth = format!("Bearer {key}");
    Raw::new(&gw.url)
        .post(
            &[("authorization", auth.as_str())],
            &common::initialize_body("2025-11-25"),
        )
        .await
}

/// Proves: with `state: redis://…`, `http.max_sessions_per_caller` counts a caller's sessions on
/// every replica together (two on two replicas fill a limit of 2: a third is refused 503 with
/// `Retry-After` on either replica, naming the limit), other callers are not affected, deleting a
/// session on one replica makes room on the other, and with Redis gone each replica counts on its
/// own (logged): sessions open within the limit there, and the open ones go on working.
#[tokio::test]
async fn a_callers_sessions_are_counted_across_the_fleet() {
    let mut redis = Some(Redis::start());
    let url = redis.as_ref().map(Redis::url).unwrap_or_default();
    let contract = contract_file("demo", &[&echo_tool("echo", 80, "")]);
    let config = demo_stdio_config(
        &callers(&[("bob", BOB, "['*']")]),
        &format!("state: {url}\nhttp:\n  max_sessions_per_caller: 2\n"),
    );
    let a = Gateway::start(&config, &[("demo.yaml", contract.as_str())]);
    let b = Gateway::start(&config, &[("demo.yaml", contract.as_str())]);

    let first = open_session(&a, KEY).await;
    assert_eq!(first.status, 200, "{first:?}");
    let second = open_session(&b, KEY).await;
    assert_eq!(second.status, 200, "{second:?}");
    for gw in [&a, &b] {
        let third = open_session(gw, KEY).await;
        assert_eq!(
            third.status, 503,
            "the fleet holds alice's 2 sessions: {third:?}"
        );
        assert!(
            third.body.contains("http.max_sessions_per_caller"),
            "{third:?}"
        );
        assert!(third.header("retry-after").is_some(), "{third:?}");
    }
    let bobs = open_session(&b, BOB).await;
    assert_eq!(bobs.status, 200, "bob's sessions are his own: {bobs:?}");

    // alice deletes her session on b: there is room again, on a.
    let session = second.header("mcp-session-id").expect("session id");
    let deleted = reqwest::Client::new()
        .delete(&b.url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("DELETE reaches the gateway");
    assert!(deleted.status().is_success(), "{deleted:?}");
    let again = open_session(&a, KEY).await;
    assert_eq!(
        again.status, 200,
        "room after the DELETE on the other replica: {again:?}"
    );

    // Redis goes away: each replica counts on its own (logged), so sessions still open within
    // the limit there, and the open ones go on working.
    drop(redis.take());
    let bobs_second = open_session(&b, BOB).await;
    assert_eq!(
        bobs_second.status, 200,
        "bob has 1 session on b: {bobs_second:?}"
    );
    let alices_third = open_session(&a, KEY).await;
    assert_eq!(
        alices_third.status, 503,
        "alice holds 2 on a itself: {alices_third:?}"
    );
    a.wait_for_log(
        Duration::from_secs(10),
        "the Redis outage is logged",
        |log| log.contains("cannot count the sessions of `alice` in Redis"),
    );
    let open = first.header("mcp-session-id").expect("session id");
    let raw = Raw::new(&a.url);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let auth = format!("Bearer {KEY}");
    let in_session = [
        ("authorization", auth.as_str()),
        ("mcp-session-id", open.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    assert_eq!(raw.post(&in_session, &note).await.status, 202);
    let call = raw
        .request(
            Some(KEY),
            &open,
            "2025-11-25",
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "still here"}}),
        )
        .await;
    assert_eq!(call.status, 200, "{call:?}");
    assert!(call.body.contains("still here"), "{call:?}");
}
