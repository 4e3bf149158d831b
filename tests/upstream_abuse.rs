//! The gateway against a hostile upstream (`tests/hostile`): whatever an upstream sends, the
//! gateway's resources stay bounded, `/healthz` keeps answering, and nothing outside the contract
//! reaches the upstream.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    Gateway, HostileHttp, KEY, Raw, call_ok, callers, client, free_port, hostile_stdio_upstream,
    http_get, recorded, recorded_requests, result_text, text_of, tool_names,
};
use serde_json::{Value, json};

const CONTRACT: &str = r#"upstream: hostile
tools:
  echo:
    privilege: read
    input: { type: object, properties: { text: { type: string } }, required: [text] }
  fresh:
    privilege: read
"#;

/// How the hostile upstream is reached in a test.
#[derive(Clone, Copy, Debug)]
enum Via {
    Stdio,
    Http,
}

/// A gateway in front of the hostile upstream (over `via`) with `attacks` and `extra` arguments,
/// recording to `record`; the HTTP upstream's process, if any, lives as long as the gateway.
fn gateway(
    via: Via,
    attacks: &[&str],
    extra: &[&str],
    record: &Path,
) -> (Gateway, Option<HostileHttp>) {
    let (entry, http) = match via {
        Via::Stdio => (
            hostile_stdio_upstream("hostile", attacks, record, extra),
            None,
        ),
        Via::Http => {
            let upstream = HostileHttp::start(attacks, record, extra);
            (upstream.config("hostile"), Some(upstream))
        }
    };
    let config = format!("upstreams:\n{entry}{}", callers(&[]));
    (Gateway::start(&config, &[("hostile.yaml", CONTRACT)]), http)
}

/// Proves: with no attack the hostile upstream is an ordinary upstream, over stdio and HTTP (so
/// the tests below fail for the attack, not for the harness).
#[tokio::test]
async fn without_an_attack_it_is_an_ordinary_upstream() {
    for via in [Via::Stdio, Via::Http] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let (gw, _upstream) = gateway(via, &[], &[], &record);
        let c = client(&gw.url, KEY).await;
        let r = call_ok(&c, "echo", json!({"text": "hello"})).await;
        assert_eq!(text_of(&r), "hello", "{via:?}");
    }
}

/// The number of open file descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// The resident memory of process `pid`, in KiB (`VmRSS` of `/proc/PID/status`).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Whether `/healthz` answers 200 (within the 5 s read timeout of [`http_get`]).
async fn healthy(base: &str) -> bool {
    let base = base.to_string();
    tokio::task::spawn_blocking(move || http_get(&base, "/healthz"))
        .await
        .ok()
        .flatten()
        .is_some_and(|(status, _)| status == 200)
}

/// The most file descriptors the gateway may hold during a flood: its listener, log, receipts
/// database, the upstream's connections (or pipes) and the bounded answers to the flood.
const MAX_FDS: usize = 200;

/// How many of the hostile upstream's requests with ids starting `prefix` were answered.
fn answered(record: &Path, prefix: &str) -> usize {
    recorded(record)
        .iter()
        .filter(|m| m.get("method").is_none())
        .filter(|m| m["id"].as_str().is_some_and(|id| id.starts_with(prefix)))
        .count()
}

/// Makes one `echo` call through `gw`, which sets off a ping flood (request ids starting
/// `prefix`), and watches the gateway until the call is answered and the gateway's answers to
/// the flood stop coming (none for a second): its descriptors stay under [`MAX_FDS`] and
/// `/healthz` answers every time. Returns the most descriptors seen and the pings answered.
async fn watch_ping_flood(gw: &Gateway, record: &Path, prefix: &str, via: Via) -> (usize, usize) {
    let c = client(&gw.url, KEY).await;
    let call = tokio::spawn(async move {
        let r = call_ok(&c, "echo", json!({"text": "after the flood"})).await;
        text_of(&r)
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut most_fds = 0;
    let mut last = (0, Instant::now());
    while !call.is_finished() || last.1.elapsed() < Duration::from_secs(1) {
        most_fds = most_fds.max(open_fds(gw.pid()));
        assert!(
            most_fds < MAX_FDS,
            "{via:?}: the gateway holds {most_fds} descriptors during the flood"
        );
        assert!(
            healthy(&gw.base).await,
            "{via:?}: /healthz stopped answering during the flood; log:\n{}",
            tail(&gw.log())
        );
        assert!(
            Instant::now() < deadline,
            "{via:?}: the flood did not end within 120 s"
        );
        let now = answered(record, prefix);
        if now != last.0 {
            last = (now, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(call.await.expect("call task"), "after the flood", "{via:?}");
    (most_fds, last.0)
}

/// Proves: an upstream sending 20,000 `ping` requests on one call's answer stream gets them
/// answered with bounded concurrency: the gateway's open file descriptors stay under
/// [`MAX_FDS`] throughout (one socket per answer opened ~19,500 before), `/healthz` answers
/// every time it is asked during the flood, and the call itself is still answered. Over stdio
/// and over HTTP.
#[tokio::test]
async fn a_ping_flood_is_answered_with_bounded_resources() {
    for via in [Via::Stdio, Via::Http] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let (gw, _upstream) = gateway(via, &["ping-flood"], &[], &record);
        let (fds, answered) = watch_ping_flood(&gw, &record, "flood-", via).await;
        eprintln!("{via:?}: {answered} pings answered, at most {fds} descriptors");
    }
}

/// Proves: 20,000 `ping` requests on the standalone stream (unrelated to any call) leave the
/// gateway's descriptors under [`MAX_FDS`] and `/healthz` answering, and the call that set
/// them off is still answered. Over stdio and HTTP.
#[tokio::test]
async fn a_standalone_ping_flood_is_answered_with_bounded_resources() {
    for via in [Via::Stdio, Via::Http] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let (gw, _upstream) = gateway(via, &["ping-flood-standalone"], &[], &record);
        let (fds, answered) = watch_ping_flood(&gw, &record, "standalone-", via).await;
        eprintln!("{via:?}: {answered} pings answered, at most {fds} descriptors");
    }
}

/// The last 40 lines of a log, for failure messages.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The longest stderr line the gateway may log: the 4 KiB cap (on the escaped text), the note of
/// what was dropped and the log line's own fields.
const MAX_LOG_LINE: usize = 4096 + 512;

/// Proves: 400 MiB of stderr without a newline (opening with terminal control sequences) does not
/// become 400 MiB of the gateway's memory or one 400 MB log line: the gateway's RSS stays under
/// 100 MiB while it reads it, no log line is longer than the cap (plus its fields), no raw
/// control character reaches the log, the dropped bytes are counted, and the line after the
/// flood is still logged.
#[tokio::test]
async fn a_stderr_flood_is_read_in_bounded_pieces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record.jsonl");
    let (gw, _upstream) = gateway(Via::Stdio, &["stderr-flood"], &[], &record);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut most_rss = 0;
    while !gw.log().contains("after the flood") {
        most_rss = most_rss.max(rss_kib(gw.pid()));
        assert!(
            most_rss < 100 * 1024,
            "the gateway's RSS reached {most_rss} KiB reading stderr"
        );
        assert!(
            Instant::now() < deadline,
            "the line after the flood was not logged within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = gw.log();
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest <= MAX_LOG_LINE, "a log line of {longest} bytes");
    assert!(
        !log.contains('\u{1b}') && !log.contains('\u{7}') && !log.contains('\u{8}'),
        "a raw control character reached the log"
    );
    assert!(log.contains("bytes dropped"), "{}", tail(&log));
    eprintln!("stderr flood: at most {most_rss} KiB RSS, longest log line {longest} bytes");
}

/// Proves: 5,000 `notifications/tools/list_changed` in a row do not cause 5,000 re-lists, but
/// at most one in flight and one pending: with the gateway's first re-list held by the upstream
/// until the whole flood has been read (the call that set it off is answered after it, on the
/// same stream), the upstream sees at most four `tools/list` requests (the first list, the held
/// one, the one more it owes, and one for a notification handler still running when the call's
/// answer arrived), and the list the gateway ends with is the current one (`fresh`, added just
/// before the last notification, is published). Over stdio and over HTTP.
#[tokio::test]
async fn a_list_changed_flood_is_coalesced() {
    for via in [Via::Stdio, Via::Http] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let hold = dir.path().join("hold-lists");
        let hold_arg = hold.display().to_string();
        let (gw, _upstream) = gateway(
            via,
            &["list-changed-flood"],
            &["--hold-lists", &hold_arg],
            &record,
        );
        let c = client(&gw.url, KEY).await;
        std::fs::write(&hold, "").expect("hold the lists");
        call_ok(&c, "echo", json!({"text": "flood"})).await;
        std::fs::remove_file(&hold).expect("release the lists");
        // The re-lists settle: the count holds still for a second (or the deadline passes).
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = (recorded_requests(&record, "tools/list"), Instant::now());
        while last.1.elapsed() < Duration::from_secs(1) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = recorded_requests(&record, "tools/list");
            if now != last.0 {
                last = (now, Instant::now());
            }
        }
        let lists = last.0;
        assert!(
            lists <= 4,
            "{via:?}: {lists} tools/list requests for one flood of 5,000 notifications"
        );
        let names = tool_names(&c).await;
        assert!(names.contains(&"fresh".to_string()), "{via:?}: {names:?}");
        eprintln!("{via:?}: {lists} tools/list requests");
    }
}

/// A traceparent for trace `trace` and span `span` (hex).
fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// Proves: the trace context the upstream receives in `params._meta` is the gateway's, never
/// the client's `tracestate`: the client's traceparent is continued (same trace id; without a
/// tracer, the same parent; with one, the gateway's CLIENT span as parent) but its `tracestate`,
/// sent in `_meta` or as an HTTP header, never reaches the upstream. Over stdio and HTTP, with
/// and without a tracer.
#[tokio::test]
async fn the_clients_tracestate_never_reaches_the_upstream() {
    const VERSION: &str = "2025-11-25";
    for (via, traced) in [
        (Via::Stdio, false),
        (Via::Http, false),
        (Via::Stdio, true),
        (Via::Http, true),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let (entry, _upstream) = match via {
            Via::Stdio => (hostile_stdio_upstream("hostile", &[], &record, &[]), None),
            Via::Http => {
                let upstream = HostileHttp::start(&[], &record, &[]);
                (upstream.config("hostile"), Some(upstream))
            }
        };
        // A collector that is not there: spans are made, their export fails quietly.
        let telemetry = if traced {
            format!(
                "telemetry:\n  otlp_endpoint: http://127.0.0.1:{}\n  otlp_protocol: http/protobuf\n",
                free_port()
            )
        } else {
            String::new()
        };
        let config = format!("upstreams:\n{entry}{}{telemetry}", callers(&[]));
        let gw = Gateway::start(&config, &[("hostile.yaml", CONTRACT)]);
        let raw = Raw::new(&gw.url);
        let session = raw.open_session(Some(KEY), VERSION).await;
        let auth = format!("Bearer {KEY}");
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", VERSION),
            ("authorization", auth.as_str()),
        ];
        let (trace, span) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
        let in_meta = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "meta"},
            "_meta": {"traceparent": traceparent(trace, span), "tracestate": "client=secret"}}});
        let reply = raw.post(&headers, &in_meta.to_string()).await.message();
        assert_eq!(result_text(&reply["result"]), "meta", "{reply}");
        let mut with_header = headers.to_vec();
        let header = traceparent(trace, span);
        with_header.push(("traceparent", header.as_str()));
        with_header.push(("tracestate", "client=secret"));
        let in_header = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "header"}}});
        let reply = raw
            .post(&with_header, &in_header.to_string())
            .await
            .message();
        assert_eq!(result_text(&reply["result"]), "header", "{reply}");

        let calls: Vec<Value> = recorded(&record)
            .into_iter()
            .filter(|m| m["method"] == "tools/call")
            .collect();
        assert_eq!(calls.len(), 2, "{via:?} traced={traced}: {calls:?}");
        for call in &calls {
            let meta = &call["params"]["_meta"];
            let sent = meta["traceparent"].as_str().unwrap_or_else(|| {
                panic!("{via:?} traced={traced}: no traceparent upstream: {call}")
            });
            assert!(
                sent.starts_with(&format!("00-{trace}-")),
                "{via:?} traced={traced}: the client's trace is continued: {call}"
            );
            assert_eq!(
                sent == traceparent(trace, span),
                !traced,
                "{via:?} traced={traced}: the parent is the gateway's span when it has one: {call}"
            );
            assert!(
                meta.get("tracestate").is_none() && !call.to_string().contains("client=secret"),
                "{via:?} traced={traced}: the client's tracestate reached the upstream: {call}"
            );
        }
    }
}

/// Proves: 100,000 short stderr lines as fast as a child can write them are not 100,000 log
/// lines: at most 100 a second are logged, and the rest are counted in warnings (even once the
/// child falls silent), so that logged and counted lines add up to exactly what was written.
#[tokio::test]
async fn stderr_lines_are_rate_limited_and_counted() {
    const LINES: usize = 100_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record.jsonl");
    let started = Instant::now();
    let (gw, _upstream) = gateway(Via::Stdio, &["stderr-lines"], &[], &record);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (logged, counted) = loop {
        let log = gw.log();
        let logged = log
            .lines()
            .filter(|l| l.contains("stderr: stderr line "))
            .count();
        let counted: usize = log
            .lines()
            .filter(|l| l.contains("stderr: lines not logged"))
            .filter_map(|l| l.split("suppressed=").nth(1))
            .filter_map(|v| v.split_whitespace().next()?.parse::<usize>().ok())
            .sum();
        if logged + counted >= LINES {
            break (logged, counted);
        }
        assert!(
            Instant::now() < deadline,
            "{logged} logged and {counted} counted of {LINES} lines within 60 s:\n{}",
            tail(&log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let seconds = started.elapsed().as_secs() as usize + 1;
    assert_eq!(logged + counted, LINES, "every line logged or counted once");
    assert!(
        logged <= 100 * seconds,
        "{logged} lines logged in {seconds} s"
    );
    eprintln!("stderr lines: {logged} logged, {counted} counted, in {seconds} s");
}
