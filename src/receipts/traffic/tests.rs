//! The traffic summaries: histograms, tallies, charts, and the roll-up against a real SQLite file
//! (PostgreSQL's roll-up runs in tests/status.rs against a real server).

use std::path::Path;

use rusqlite::{Connection, params};

use super::rollup::{self, Pass, Store};
use super::*;
use crate::receipts::store::open_for_writing;

/// A UUIDv7-shaped receipt id written at `millis`, unique by `n`.
fn id_at(millis: i64, n: u64) -> String {
    format!(
        "{:08x}-{:04x}-7000-8000-{:012x}",
        millis >> 16,
        millis & 0xffff,
        n
    )
}

const NOW: i64 = 1_800_000_000_000; // 2027-01-15T08:00:00Z, a whole minute
const MINUTE: i64 = 60_000;

/// Proves: every latency falls in a bucket whose upper bound is at least it and less than 9%
/// (one eighth of a doubling) above it, so a percentile read from buckets is at most 9% high;
/// quantiles take the bucket of the call ranked ⌈q·n⌉; the stored form reads back equal and
/// anything else is refused.
#[test]
fn histograms_bound_their_error_and_round_trip() {
    for ms in [0.011, 0.5, 1.0, 3.7, 42.0, 999.9, 12_345.0] {
        let upper = Histogram::upper_bound(Histogram::bucket(ms));
        assert!(upper >= ms * (1.0 - 1e-12), "{ms} -> {upper}");
        assert!(upper < ms * 1.0906, "{ms} -> {upper}");
    }
    let mut h = Histogram::default();
    for ms in 1..=100 {
        h.record(f64::from(ms));
    }
    assert_eq!(h.count(), 100);
    let p50 = h.quantile(0.5).expect("p50");
    assert!((50.0..50.0 * 1.0906).contains(&p50), "{p50}");
    let p99 = h.quantile(0.99).expect("p99");
    assert!((99.0..99.0 * 1.0906).contains(&p99), "{p99}");
    assert_eq!(Histogram::default().quantile(0.5), None);
    assert_eq!(Histogram::decode(&h.encode()), Some(h.clone()));
    for bad in ["x", "1:", "1:-2", "999:1", "1;2"] {
        assert_eq!(Histogram::decode(bad), None, "{bad}");
    }
    // Zero, negative and NaN durations land in the first bucket, never panic.
    let mut odd = Histogram::default();
    for ms in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        odd.record(ms);
    }
    assert_eq!(odd.count(), 4);
}

/// Proves: the time in a UUIDv7 id is read back exactly, including from ids made by the uuid
/// crate, and ids of another shape are refused.
#[test]
fn receipt_ids_tell_when_they_were_written() {
    assert_eq!(millis_of_id(&id_at(NOW + 123, 7)), Some(NOW + 123));
    let real = uuid::Uuid::now_v7().to_string();
    let millis = millis_of_id(&real).expect("a v7 id");
    assert!((rollup::now_millis() - millis).abs() < 5_000, "{real}");
    assert_eq!(millis_of_id("not-an-id"), None);
    assert_eq!(millis_of_id("0123456789abcdef"), None);
}

/// Proves: a window's bars hold the calls of their minutes, by outcome, per tool and summed per
/// upstream; latency percentiles leave out calls refused before the upstream; minutes outside
/// the window are left out; 24-hour bars span 15 minutes; tools come most called first.
#[test]
fn charts_place_each_call_in_its_bar() {
    let mut minutes = Minutes::default();
    let at = |ago_minutes: i64| id_at(NOW - ago_minutes * MINUTE + 5_000, 0);
    minutes.add(&at(0), "echo", Some("demo"), "ok", 2.0);
    minutes.add(&at(0), "echo", Some("demo"), "rate_limited", 0.01);
    minutes.add(&at(1), "echo", Some("demo"), "ok", 4.0);
    minutes.add(&at(1), "add", Some("demo"), "tool_error", 8.0);
    minutes.add(&at(1), "add", Some("demo"), "ok", 8.0);
    minutes.add(&at(1), "<x>", None, "denied", 0.01);
    minutes.add(&at(90), "echo", Some("demo"), "ok", 1.0); // outside the hour
    minutes.add(&at(0), "echo", Some("demo"), "no_such_outcome", 1.0); // left out
    let now_minute = NOW / MINUTE;
    let hour = minutes.clone().chart(Window::Hour, now_minute, None);
    assert_eq!(hour.first_minute, now_minute - 59);
    assert_eq!(hour.tools.len(), 3);
    let echo = &hour.tools[0];
    assert_eq!(
        (echo.name.as_str(), echo.upstream.as_deref()),
        ("echo", Some("demo"))
    );
    assert_eq!(echo.buckets.len(), 60);
    assert_eq!(echo.buckets[59].count(Outcome::Ok), 1);
    assert_eq!(echo.buckets[59].count(Outcome::RateLimited), 1);
    assert_eq!(echo.buckets[58].calls(), 1);
    assert_eq!(echo.total.calls(), 3);
    // The refusal's 0.01 ms is not the upstream's latency.
    assert_eq!(echo.total.latency().count(), 2);
    assert!(echo.total.p50().expect("p50") >= 2.0);
    let unknown = hour
        .tools
        .iter()
        .find(|t| t.name == "<x>")
        .expect("the made-up name");
    assert_eq!(unknown.upstream, None);
    assert_eq!(unknown.total.p50(), None);
    assert_eq!(hour.upstreams.len(), 1);
    assert_eq!(hour.upstreams[0].total.calls(), 5);
    assert_eq!(hour.upstreams[0].buckets[58].count(Outcome::ToolError), 1);
    let day = minutes.clone().chart(Window::Day, now_minute, None);
    assert_eq!(day.tools[0].buckets.len(), 96);
    assert_eq!(
        day.tools[0].total.calls(),
        4,
        "the call 90 minutes ago is in the day"
    );
    assert_eq!(day.first_minute % 15, 0);
    let quarter = minutes.chart(Window::FifteenMinutes, now_minute, Some(now_minute - 100));
    assert_eq!(
        quarter.missing_before, None,
        "a gap before the window is no gap in it"
    );
}

/// A receipts database at `path` with the current schema.
fn database(path: &Path) -> Connection {
    open_for_writing(path, false).expect("the receipts database")
}

fn insert(
    c: &Connection,
    millis: i64,
    n: u64,
    tool: &str,
    upstream: Option<&str>,
    outcome: &str,
    ms: f64,
) {
    c.execute(
        "INSERT INTO receipts (id, time, caller, tool, upstream, arguments_digest, outcome, attempts, \
         replayed, duration_ms) VALUES (?1, '', 'alice', ?2, ?3, '', ?4, 1, 0, ?5)",
        params![id_at(millis, n), tool, upstream, outcome, ms],
    )
    .expect("insert");
}

/// Receipts over the last `minutes` minutes before [`NOW`], several tools and outcomes per
/// minute, with varied latencies.
fn fill(c: &Connection, minutes: i64) {
    let outcomes = [
        "ok",
        "ok",
        "ok",
        "tool_error",
        "rate_limited",
        "denied",
        "timeout",
    ];
    let mut n = 0;
    for minute in 0..minutes {
        for i in 0..7 {
            n += 1;
            let millis = NOW - (minute + 1) * MINUTE + i * 7_000;
            let tool = ["echo", "add", "slow"][(n % 3) as usize];
            let upstream = (tool != "slow").then_some("demo");
            insert(
                c,
                millis,
                n,
                tool,
                upstream,
                outcomes[(n % 7) as usize],
                (n % 97) as f64 * 1.3,
            );
        }
    }
}

fn pass_until_done(store: &mut Store, now: i64) -> usize {
    let mut passes = 0;
    loop {
        passes += 1;
        match rollup::pass(store, now).expect("a pass") {
            Pass::Summarised { more: true, .. } => continue,
            _ => return passes,
        }
    }
}

/// Proves: the roll-up summarises every ended minute in chunks of at most 30 minutes, and a
/// window read from its summaries (plus the raw receipts of the last minutes) equals the same
/// window tallied from every raw receipt, for each window; a second pass finds nothing to do.
#[test]
fn a_window_from_summaries_equals_the_raw_receipts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("receipts.db");
    let c = database(&path);
    fill(&c, 3 * 60);
    let mut store = Store::Sqlite(Connection::open(&path).expect("open"));
    let passes = pass_until_done(&mut store, NOW);
    assert!(passes >= 6, "three hours in chunks of 30 minutes: {passes}");
    assert_eq!(rollup::pass(&mut store, NOW), Ok(Pass::UpToDate));
    let summarised: i64 = c
        .query_row("SELECT sum(calls) FROM receipt_minutes", [], |r| r.get(0))
        .expect("sum");
    // The last minute ended less than GRACE_MS ago: not summarised yet.
    assert_eq!(
        summarised,
        (3 * 60 - 1) * 7,
        "every receipt of an ended minute"
    );
    let everything = store.raw(0, None).expect("raw");
    // Two minutes later, so the last minutes come from the raw receipts.
    let later = NOW + 2 * MINUTE;
    for window in Window::ALL {
        let read = read(&mut store, window, later).expect("a window");
        let raw = everything.clone().chart(window, later / MINUTE, None);
        assert_eq!(read, raw, "{window}");
    }
}

/// Proves: a pass that finds `until` moved by another gateway writes nothing (no minute is
/// summarised twice); summaries older than the longest window are deleted; a roll-up that lags
/// far behind (a large store just upgraded) leaves the charts' older minutes reported missing
/// rather than read from millions of raw receipts.
#[test]
fn the_roll_up_is_single_and_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("receipts.db");
    let c = database(&path);
    fill(&c, 60);
    let mut store = Store::Sqlite(Connection::open(&path).expect("open"));
    let mut other = Store::Sqlite(Connection::open(&path).expect("open"));
    // `other` read `until` before `store` moved it: its write is refused and changes nothing.
    let before = rollup::done_until(&mut other);
    let first = rollup::pass(&mut store, NOW).expect("pass");
    assert!(
        matches!(first, Pass::Summarised { more: true, .. }),
        "{first:?}"
    );
    let stale = Minutes::default();
    assert_eq!(other.write(before, (0, NOW / MINUTE), &stale, 0), Ok(false));
    assert_ne!(rollup::done_until(&mut other), Some(NOW / MINUTE));
    pass_until_done(&mut other, NOW);
    let rows_once: i64 = c
        .query_row("SELECT sum(calls) FROM receipt_minutes", [], |r| r.get(0))
        .expect("sum");
    assert_eq!(rows_once, 59 * 7, "each ended minute once");
    // Summaries older than KEPT_MINUTES go, at the next pass that writes.
    let much_later = NOW + (KEPT_MINUTES + 5) * MINUTE;
    pass_until_done(&mut store, much_later);
    let left: i64 = c
        .query_row("SELECT count(*) FROM receipt_minutes", [], |r| r.get(0))
        .expect("count");
    assert_eq!(left, 0);
    // A roll-up that stopped 3 hours ago: the day's window reads at most LIVE_MINUTES of raw
    // receipts and says where its data starts.
    c.execute(
        "UPDATE receipt_minutes_done SET until = ?1",
        params![NOW / MINUTE - 180],
    )
    .expect("set back");
    let day = read(&mut store, Window::Day, NOW).expect("day");
    assert_eq!(day.missing_before, Some(NOW / MINUTE - LIVE_MINUTES + 1));
    let calls: u64 = day.tools.iter().map(|t| t.total.calls()).sum();
    assert_eq!(
        calls,
        (LIVE_MINUTES as u64 - 1) * 7,
        "only the live minutes' receipts"
    );
}

/// Proves: a store whose roll-up has not run yet (no `until`) is summarised from its oldest
/// receipt, and an empty store just marks the ended minutes done.
#[test]
fn a_first_pass_starts_at_the_oldest_receipt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("receipts.db");
    let c = database(&path);
    let mut store = Store::Sqlite(Connection::open(&path).expect("open"));
    assert_eq!(
        rollup::pass(&mut store, NOW),
        Ok(Pass::Summarised {
            until: (NOW - GRACE_MS) / MINUTE,
            more: false
        })
    );
    let dir2 = tempfile::tempdir().expect("tempdir");
    let path2 = dir2.path().join("receipts.db");
    let c2 = database(&path2);
    insert(&c2, NOW - 10 * MINUTE, 1, "echo", Some("demo"), "ok", 1.0);
    let mut store2 = Store::Sqlite(Connection::open(&path2).expect("open"));
    assert_eq!(
        rollup::pass(&mut store2, NOW),
        Ok(Pass::Summarised {
            until: (NOW - GRACE_MS) / MINUTE,
            more: false
        })
    );
    let calls: i64 = c2
        .query_row(
            "SELECT sum(calls) FROM receipt_minutes WHERE minute = ?1",
            params![NOW / MINUTE - 10],
            |r| r.get(0),
        )
        .expect("sum");
    assert_eq!(calls, 1);
    drop(c);
}

/// Proves: merging histograms (the sparse, sorted form) gives exactly the histogram of recording
/// every latency into one, whatever the overlap of their buckets, and decoding tolerates pairs
/// out of order or repeated (another writer's text) by adding them up.
#[test]
fn merging_equals_recording_everything_once() {
    let mut seed = 7_u64;
    let mut next = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as f64 / f64::from(u32::MAX) * 3_000.0
    };
    for round in 0..50 {
        let (mut a, mut b, mut all) = (
            Histogram::default(),
            Histogram::default(),
            Histogram::default(),
        );
        for i in 0..(round * 7 % 40) {
            let ms = next();
            if i % 3 == 0 {
                a.record(ms)
            } else {
                b.record(ms)
            }
            all.record(ms);
        }
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged, all, "round {round}");
        let mut other_way = b.clone();
        other_way.merge(&a);
        assert_eq!(other_way, all, "round {round}");
        // Every bucket already there: merged in place, each count doubled.
        let mut twice = all.clone();
        twice.merge(&all);
        assert_eq!(twice.count(), 2 * all.count());
        assert_eq!(twice.quantile(0.5), all.quantile(0.5));
        assert_eq!(
            twice.encode().split(' ').count(),
            all.encode().split(' ').count()
        );
    }
    assert_eq!(
        Histogram::decode("5:1 3:2 5:4"),
        Histogram::decode("3:2 5:5")
    );
}
