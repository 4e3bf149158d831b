//! `bench-status-store`: the tools of `bench/status.sh` (issue 29: the status page on a receipts
//! store of 10 million rows). Every subcommand prints one JSON object on stdout.
//!
//! ```text
//! bench-status-store generate --db FILE --rows N --layout day|month [--end-ms MS] [--lean]
//! bench-status-store feed     --db FILE --rate PER_SECOND --seconds S
//! bench-status-store watch    --db FILE --pid PID --started-ms MS --timeout S
//! bench-status-store pages    --target NAME=HOST:PORT... --path P... --n N --key KEY
//!                             [--baseline NAME] [--while-lagging FILE]
//! bench-status-store parts    --db FILE --window 15m|1h|24h --n N
//! ```
//!
//! - `generate` appends N receipts to a database the gateway created (so the schema is the
//!   gateway's own), in one prepared statement and transactions of 200,000 rows: ids UUIDv7-shaped
//!   (the first 12 hex digits are the millisecond the receipt was written), unique and ascending,
//!   spread evenly (with jitter) over the 24 hours (`day`) or 30 days (`month`) before `--end-ms`;
//!   20 tools over 3 upstreams plus a few made-up names (denied, no upstream), outcomes mostly
//!   `ok`, log-normal durations from 0.2 to 2,000 ms. `--lean` leaves `arguments_digest` empty
//!   (a smaller file); by default it is a `sha256:` digest as the gateway writes.
//! - `feed` keeps the store live while the benchmark runs, as a gateway under traffic would: it
//!   first fills the gap from the newest receipt to now at `--rate`, then appends the receipts
//!   due every 250 ms (one transaction each), for at most `--seconds`.
//! - `watch` polls `receipt_minutes_done.until` and the gateway's RSS every 0.5 s until the
//!   roll-up is within 2 minutes of now (or `--timeout`): how long catching up took, from
//!   `--started-ms` (when the gateway was spawned), and the RSS during it.
//! - `pages` times `GET` of each path on each target (HTTP/1.1, a new connection per request, as
//!   a browser's reload; Basic auth with the API key), `--n` rounds, interleaved: each round
//!   requests every path from every target, the targets' order reversed every other round.
//!   Medians and p90 per target and path, and the ratio of medians to `--baseline`'s. With
//!   `--while-lagging FILE`, only rounds that start while the roll-up of FILE lags by more than
//!   2 minutes are run (the page on a store still being summarised).
//! - `parts` runs the SQL the page runs on every request, part by part, as
//!   `receipts::traffic::read` and the receipts panel issue it: opening the file read-only,
//!   `until`, the quarter and minute summaries of the window, the raw receipts of the minutes
//!   not summarised yet, the last 50 receipts and the last 20 rate-limit refusals. Rows are
//!   fetched as the gateway fetches them (histograms parsed), not tallied: where the time of a
//!   slow window goes, SQL or Rust.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
// The gateway's own formatting of `time`, so generated receipts read like written ones.
use narrowgate::harness::format_utc_millis;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Value, json};

const USAGE: &str = "usage: bench-status-store generate|feed|watch|pages|parts [OPTIONS] (see bench/status_store.rs)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        die(USAGE);
    };
    let options = Options::parse(rest);
    let result = match command.as_str() {
        "generate" => generate(&options),
        "feed" => feed(&options),
        "watch" => watch(&options),
        "pages" => pages(&options),
        "parts" => parts(&options),
        _ => die(USAGE),
    };
    println!("{result}");
}

fn die(message: &str) -> ! {
    eprintln!("bench-status-store: {message}");
    std::process::exit(2);
}

/// `--name value` pairs (a name may repeat) and `--flag`s.
struct Options(BTreeMap<String, Vec<String>>);

impl Options {
    fn parse(args: &[String]) -> Options {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut i = 0;
        while i < args.len() {
            let Some(name) = args[i].strip_prefix("--") else {
                die(&format!("unexpected argument {}", args[i]));
            };
            let value = match args.get(i + 1) {
                Some(v) if !v.starts_with("--") => {
                    i += 1;
                    v.clone()
                }
                _ => String::new(),
            };
            map.entry(name.to_string()).or_default().push(value);
            i += 1;
        }
        Options(map)
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.last()).map(String::as_str)
    }
    fn all(&self, name: &str) -> Vec<String> {
        self.0.get(name).cloned().unwrap_or_default()
    }
    fn flag(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
    fn need(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| die(&format!("--{name} is required")))
    }
    fn num<T: std::str::FromStr>(&self, name: &str, default: Option<T>) -> T {
        match self.get(name) {
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| die(&format!("--{name}: not a number: {v}"))),
            None => default.unwrap_or_else(|| die(&format!("--{name} is required"))),
        }
    }
    fn db(&self) -> PathBuf {
        PathBuf::from(self.need("db"))
    }
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `q` quantile of `values` by nearest rank (sorted in place).
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// ---------------------------------------------------------------------------------------------
// Receipts as the gateway writes them.

/// SplitMix64: seeded, so every run generates the same store.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-12);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    /// An index drawn with `weights` (cumulative, last = total).
    fn pick(&mut self, cumulative: &[f64]) -> usize {
        let x = self.unit() * cumulative[cumulative.len() - 1];
        cumulative
            .partition_point(|c| *c <= x)
            .min(cumulative.len() - 1)
    }
}

fn cumulative(weights: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut total = 0.0;
    weights
        .map(|w| {
            total += w;
            total
        })
        .collect()
}

/// (name, upstream, calls share, median duration ms). Made-up names have no upstream.
const TOOLS: &[(&str, Option<&str>, f64, f64)] = &[
    ("find_customer", Some("crm"), 14.0, 35.0),
    ("get_order", Some("crm"), 12.0, 25.0),
    ("list_orders", Some("crm"), 8.0, 60.0),
    ("update_customer", Some("crm"), 3.0, 80.0),
    ("refund_order", Some("crm"), 1.0, 150.0),
    ("create_ticket", Some("crm"), 4.0, 120.0),
    ("add_note", Some("crm"), 3.0, 40.0),
    ("web_search", Some("search"), 15.0, 400.0),
    ("fetch_page", Some("search"), 10.0, 250.0),
    ("search_docs", Some("search"), 8.0, 90.0),
    ("summarize_url", Some("search"), 2.0, 700.0),
    ("get_weather", Some("search"), 5.0, 120.0),
    ("read_file", Some("files"), 9.0, 3.0),
    ("list_dir", Some("files"), 6.0, 2.0),
    ("write_file", Some("files"), 2.0, 6.0),
    ("search_files", Some("files"), 4.0, 30.0),
    ("stat_file", Some("files"), 2.0, 1.0),
    ("delete_file", Some("files"), 0.5, 4.0),
    ("move_file", Some("files"), 0.5, 5.0),
    ("diff_files", Some("files"), 1.0, 15.0),
    // Names no contract has: denied before anything else.
    ("shell_exec", None, 0.2, 0.3),
    ("delete_all_records", None, 0.1, 0.3),
    ("admin_export", None, 0.1, 0.3),
    ("run_sql", None, 0.1, 0.3),
];

/// (outcome, share of the calls of a contract's tool, error_type written).
const OUTCOMES: &[(&str, f64, Option<&str>)] = &[
    ("ok", 93.5, None),
    ("tool_error", 2.5, None),
    ("rate_limited", 1.5, Some("rate_limited")),
    ("rejected_input", 1.0, Some("invalid_arguments")),
    ("denied", 0.5, None),
    ("upstream_error", 0.5, Some("upstream_error")),
    ("timeout", 0.3, Some("timeout")),
    ("rejected_output", 0.2, Some("invalid_result")),
];

const CALLERS: &[(&str, f64)] = &[
    ("support-agent", 30.0),
    ("research-agent", 25.0),
    ("sales-agent", 15.0),
    ("ci-bot", 12.0),
    ("ops-agent", 8.0),
    ("alice", 5.0),
    ("bob", 3.0),
    ("carol", 2.0),
];

/// Draws receipts: the same store for the same seed.
struct Receipts {
    rng: Rng,
    tools: Vec<f64>,
    outcomes: Vec<f64>,
    callers: Vec<f64>,
    /// Each tool's contract digest (`sha256:` + 64 hex).
    digests: Vec<String>,
    lean: bool,
    /// The last id's millisecond and its sequence number within it (ids stay unique, ascending).
    last_ms: i64,
    seq: u16,
}

/// One row, as the gateway writes it (only the columns a plain call fills).
struct Row {
    id: String,
    time: String,
    caller: &'static str,
    tool: &'static str,
    upstream: Option<&'static str>,
    contract_digest: Option<String>,
    arguments_digest: String,
    outcome: &'static str,
    attempts: u32,
    duration_ms: f64,
    error_type: Option<&'static str>,
}

impl Receipts {
    fn new(seed: u64, lean: bool) -> Receipts {
        let mut rng = Rng(seed);
        let digests = TOOLS.iter().map(|_| hex_digest(&mut rng)).collect();
        Receipts {
            rng,
            tools: cumulative(TOOLS.iter().map(|t| t.2)),
            outcomes: cumulative(OUTCOMES.iter().map(|o| o.1)),
            callers: cumulative(CALLERS.iter().map(|c| c.1)),
            digests,
            lean,
            last_ms: i64::MIN,
            seq: 0,
        }
    }

    /// The receipt written at `written_ms` (never before the previous one).
    fn row(&mut self, written_ms: i64) -> Row {
        let written_ms = written_ms.max(self.last_ms);
        if written_ms == self.last_ms {
            self.seq += 1;
        } else {
            self.last_ms = written_ms;
            self.seq = 0;
        }
        let r = self.rng.next();
        let id = format!(
            "{:08x}-{:04x}-7{:03x}-{:x}{:03x}-{:012x}",
            written_ms >> 16,
            written_ms & 0xffff,
            self.seq & 0xfff,
            8 | (r >> 62),
            (r >> 50) & 0xfff,
            r & 0xffff_ffff_ffff,
        );
        let t = self.rng.pick(&self.tools);
        let (tool, upstream, _, median_ms) = TOOLS[t];
        let caller = CALLERS[self.rng.pick(&self.callers)].0;
        let (outcome, error_type) = match upstream {
            None => ("denied", None),
            Some(_) => {
                let o = OUTCOMES[self.rng.pick(&self.outcomes)];
                (o.0, o.2)
            }
        };
        let refused = matches!(outcome, "denied" | "rejected_input" | "rate_limited");
        let duration_ms = if refused {
            0.2 + 0.8 * self.rng.unit()
        } else if outcome == "timeout" {
            1990.0 + 10.0 * self.rng.unit()
        } else {
            (median_ms * (1.0 * self.rng.normal()).exp()).clamp(0.2, 2000.0)
        };
        // Microseconds, as the gateway records them.
        let duration_ms = (duration_ms * 1000.0).round() / 1000.0;
        let started = written_ms - duration_ms.ceil() as i64;
        let arguments_digest = match upstream {
            Some(_) if !self.lean => hex_digest(&mut self.rng),
            _ => String::new(),
        };
        Row {
            id,
            time: format_utc_millis(started),
            caller,
            tool,
            upstream,
            contract_digest: upstream.map(|_| self.digests[t].clone()),
            arguments_digest,
            outcome,
            attempts: if refused { 0 } else { 1 },
            duration_ms,
            error_type,
        }
    }
}

fn hex_digest(rng: &mut Rng) -> String {
    format!(
        "sha256:{:016x}{:016x}{:016x}{:016x}",
        rng.next(),
        rng.next(),
        rng.next(),
        rng.next()
    )
}

const INSERT: &str = "INSERT INTO receipts (id, time, caller, tool, upstream, upstream_tool, \
    contract_digest, arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, \
    arguments, reason, approval_id, approval_decision, approver, approval_wait_ms, error_type, \
    fallback, cached) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0, ?11, NULL, NULL, NULL, \
    NULL, NULL, NULL, NULL, ?12, NULL, 0)";

fn insert(statement: &mut rusqlite::CachedStatement<'_>, row: &Row) -> rusqlite::Result<()> {
    statement.execute(params![
        row.id,
        row.time,
        row.caller,
        row.tool,
        row.upstream,
        row.upstream.map(|_| row.tool),
        row.contract_digest,
        row.arguments_digest,
        row.outcome,
        row.attempts,
        row.duration_ms,
        row.error_type,
    ])?;
    Ok(())
}

/// The database the gateway created (schema version 6 or later), for writing.
fn open_gateway_file(path: &PathBuf) -> Connection {
    if !path.exists() {
        die(&format!(
            "{} does not exist: start the gateway on it once first (it creates the schema)",
            path.display()
        ));
    }
    let c = Connection::open(path).unwrap_or_else(|e| die(&format!("open: {e}")));
    c.busy_timeout(Duration::from_secs(10))
        .expect("busy_timeout");
    let version: i64 = c
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("user_version");
    let has_minutes: bool = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'receipt_minutes_done'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .unwrap_or(false);
    if version < 6 || !has_minutes {
        die(&format!(
            "{}: schema version {version}, no roll-up tables: not a file this gateway created",
            path.display()
        ));
    }
    c
}

// ---------------------------------------------------------------------------------------------
// generate

fn generate(o: &Options) -> Value {
    let path = o.db();
    let rows: u64 = o.num("rows", Some(10_000_000));
    let span_ms: i64 = match o.get("layout").unwrap_or("day") {
        "day" => 86_400_000,
        "month" => 30 * 86_400_000,
        other => die(&format!("--layout day|month, not {other}")),
    };
    let end_ms: i64 = o.num("end-ms", Some(now_millis()));
    let batch: u64 = o.num("batch", Some(200_000));
    let mut c = open_gateway_file(&path);
    let existing: i64 = c
        .query_row(
            "SELECT count(*) FROM (SELECT 1 FROM receipts LIMIT 1)",
            [],
            |r| r.get(0),
        )
        .expect("count");
    if existing > 0 {
        die(&format!("{} already holds receipts", path.display()));
    }
    // The gateway that created the file summarised its (empty) past already: `until` is the
    // minute it stopped. The generated receipts stand for receipts written before the roll-up
    // existed (a store upgraded to schema 6), so the summaries of nothing go and the roll-up
    // starts from the oldest receipt, as on the first start after an upgrade.
    c.execute_batch(
        "DELETE FROM receipt_minutes; DELETE FROM receipt_quarters; DELETE FROM receipt_minutes_done;",
    )
    .expect("clear the summaries");
    // A bulk load: no flush per commit, a large page cache. The file stays in WAL mode (the
    // gateway's), so the WAL is checkpointed into the file at the end.
    c.pragma_update(None, "synchronous", "OFF")
        .expect("synchronous");
    c.pragma_update(None, "cache_size", -262_144)
        .expect("cache_size");
    let mut receipts = Receipts::new(o.num("seed", Some(29)), o.flag("lean"));
    let start_ms = end_ms - span_ms;
    let gap = span_ms as f64 / rows as f64;
    let started = Instant::now();
    let mut written = 0u64;
    let mut first_id = String::new();
    let mut last_id = String::new();
    while written < rows {
        let transaction = c.transaction().expect("begin");
        {
            let mut statement = transaction.prepare_cached(INSERT).expect("prepare");
            let end = (written + batch).min(rows);
            for i in written..end {
                // Stratified: one receipt in each slot of `gap` ms, at a random point of it.
                let at = start_ms + ((i as f64 + receipts.rng.unit()) * gap) as i64;
                let row = receipts.row(at.min(end_ms - 1));
                if i == 0 {
                    first_id = row.id.clone();
                }
                if i + 1 == rows {
                    last_id = row.id.clone();
                }
                insert(&mut statement, &row).unwrap_or_else(|e| die(&format!("insert: {e}")));
            }
            written = end;
        }
        transaction.commit().expect("commit");
        if written % 1_000_000 < batch {
            eprintln!(
                "bench-status-store: {written} receipts in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let inserted = started.elapsed();
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    let total = started.elapsed();
    drop(c);
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    json!({
        "db": path.display().to_string(),
        "rows": rows,
        "layout": o.get("layout").unwrap_or("day"),
        "first_id": first_id,
        "last_id": last_id,
        "end_ms": end_ms,
        "insert_seconds": round3(inserted.as_secs_f64()),
        "seconds": round3(total.as_secs_f64()),
        "rows_per_second": (rows as f64 / inserted.as_secs_f64()).round(),
        "bytes": bytes,
        "bytes_per_row": (bytes as f64 / rows as f64).round(),
        "lean": o.flag("lean"),
    })
}

// ---------------------------------------------------------------------------------------------
// feed

fn feed(o: &Options) -> Value {
    let path = o.db();
    let rate: f64 = o.num("rate", None);
    let seconds: f64 = o.num("seconds", Some(3600.0));
    let mut c = open_gateway_file(&path);
    c.pragma_update(None, "synchronous", "NORMAL")
        .expect("synchronous");
    let newest: Option<String> = c
        .query_row("SELECT max(id) FROM receipts", [], |r| r.get(0))
        .expect("max(id)");
    let mut receipts = Receipts::new(o.num("seed", Some(2929)), o.flag("lean"));
    let gap = 1000.0 / rate;
    let mut next = newest
        .as_deref()
        .and_then(millis_of_id)
        .map(|m| m as f64 + gap)
        .unwrap_or(now_millis() as f64);
    let started = Instant::now();
    let (mut written, mut backfilled, mut commits) = (0u64, None, 0u64);
    while started.elapsed().as_secs_f64() < seconds {
        let now = now_millis();
        let transaction = c.transaction().expect("begin");
        {
            let mut statement = transaction.prepare_cached(INSERT).expect("prepare");
            let mut in_batch = 0;
            // Up to 20,000 per transaction, so a backfill never holds the write lock for long.
            while next < now as f64 && in_batch < 20_000 {
                let at = next as i64;
                insert(&mut statement, &receipts.row(at)).expect("insert");
                next += gap * 2.0 * receipts.rng.unit();
                in_batch += 1;
            }
            written += in_batch;
        }
        transaction.commit().expect("commit");
        commits += 1;
        if next >= now as f64 {
            if backfilled.is_none() {
                backfilled = Some(written);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    json!({ "written": written, "backfilled": backfilled, "commits": commits, "rate": rate })
}

fn millis_of_id(id: &str) -> Option<i64> {
    let high = i64::from_str_radix(id.get(0..8)?, 16).ok()?;
    let low = i64::from_str_radix(id.get(9..13)?, 16).ok()?;
    Some((high << 16) | low)
}

// ---------------------------------------------------------------------------------------------
// watch

fn open_reading(path: &PathBuf) -> Connection {
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap_or_else(|e| die(&format!("open {}: {e}", path.display())));
    c.busy_timeout(Duration::from_secs(5))
        .expect("busy_timeout");
    c
}

fn until(c: &Connection) -> Option<i64> {
    // The table holds one row (its key column was renamed once: not named here).
    c.query_row("SELECT until FROM receipt_minutes_done", [], |r| r.get(0))
        .optional()
        .ok()
        .flatten()
}

/// (VmRSS, VmHWM) in KiB.
fn rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn watch(o: &Options) -> Value {
    let path = o.db();
    let pid: u32 = o.num("pid", None);
    let started_ms: i64 = o.num("started-ms", Some(now_millis()));
    let timeout = Duration::from_secs_f64(o.num("timeout", Some(1800.0)));
    let within: i64 = o.num("within-minutes", Some(2));
    let c = open_reading(&path);
    let begin = Instant::now();
    let mut samples = Vec::new();
    let (mut rss_max, mut caught_up) = (0u64, None);
    let mut first_until = None;
    loop {
        let now = now_millis();
        let done = until(&c);
        if first_until.is_none() {
            first_until = Some(done);
        }
        let Some((rss_kib, hwm)) = rss(pid) else {
            break;
        };
        rss_max = rss_max.max(rss_kib);
        let lag = done.map(|u| now.div_euclid(60_000) - u);
        samples.push(json!([
            round3((now - started_ms) as f64 / 1000.0),
            rss_kib,
            hwm,
            lag
        ]));
        if lag.is_some_and(|l| l <= within) {
            caught_up = Some((now - started_ms) as f64 / 1000.0);
            break;
        }
        if begin.elapsed() > timeout {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let after = rss(pid);
    // At most ~200 samples kept in the output.
    let step = samples.len().div_ceil(200).max(1);
    let kept: Vec<&Value> = samples.iter().step_by(step).collect();
    json!({
        "caught_up_seconds": caught_up.map(round3),
        "lag_minutes_at_start": first_until.flatten().map(|u| started_ms.div_euclid(60_000) - u),
        "rss_kib_max_sampled": rss_max,
        "rss_kib_at_caught_up": after.map(|a| a.0),
        "hwm_kib_at_caught_up": after.map(|a| a.1),
        "samples_t_rss_hwm_lag": kept,
    })
}

// ---------------------------------------------------------------------------------------------
// pages

struct Answer {
    status: u16,
    bytes: usize,
    ms: f64,
}

fn get(address: &str, path: &str, authorization: &str) -> Result<Answer, String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(address).map_err(|e| format!("connect {address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Basic {authorization}\r\n\
         Accept: text/html\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::with_capacity(256 * 1024);
    stream
        .read_to_end(&mut answer)
        .map_err(|e| format!("read {address}{path}: {e}"))?;
    let elapsed = started.elapsed();
    let head = String::from_utf8_lossy(&answer[..answer.len().min(64)]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP status in {head:?}"))?;
    Ok(Answer {
        status,
        bytes: answer.len(),
        ms: ms(elapsed),
    })
}

fn pages(o: &Options) -> Value {
    let targets: Vec<(String, String)> = o
        .all("target")
        .iter()
        .map(|t| match t.split_once('=') {
            Some((name, address)) => (name.to_string(), address.to_string()),
            None => die("--target NAME=HOST:PORT"),
        })
        .collect();
    let paths = o.all("path");
    if targets.is_empty() || paths.is_empty() {
        die("pages needs --target and --path");
    }
    let n: usize = o.num("n", Some(30));
    let key = o.need("key");
    let authorization =
        base64::engine::general_purpose::STANDARD.encode(format!("bench:{key}").as_bytes());
    let lagging = o
        .get("while-lagging")
        .map(|p| open_reading(&PathBuf::from(p)));
    let pause = Duration::from_millis(o.num("pause-ms", Some(0)));
    // (target, path) -> times, statuses, bytes
    let mut times: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut statuses: BTreeMap<(String, String), BTreeMap<u16, usize>> = BTreeMap::new();
    let mut bytes: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut lags = Vec::new();
    let started = Instant::now();
    for round in 0..n {
        if let Some(c) = &lagging {
            let lag = until(c).map(|u| now_millis().div_euclid(60_000) - u);
            if lag.is_some_and(|l| l <= 2) {
                break;
            }
            lags.push(json!(lag));
        }
        let mut order: Vec<&(String, String)> = targets.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for path in &paths {
            for (name, address) in &order {
                let answer = get(address, path, &authorization).unwrap_or_else(|e| die(&e));
                let key = (name.clone(), path.clone());
                times.entry(key.clone()).or_default().push(answer.ms);
                *statuses
                    .entry(key.clone())
                    .or_default()
                    .entry(answer.status)
                    .or_default() += 1;
                bytes.insert(key, answer.bytes);
            }
        }
        std::thread::sleep(pause);
    }
    let baseline = o.get("baseline");
    let mut results = Vec::new();
    for path in &paths {
        let base_median = baseline
            .and_then(|b| times.get(&(b.to_string(), path.clone())))
            .map(|t| median(&mut t.clone()));
        for (name, _) in &targets {
            let key = (name.clone(), path.clone());
            let Some(all) = times.get(&key) else { continue };
            let mut t = all.clone();
            let med = median(&mut t);
            results.push(json!({
                "target": name,
                "path": path,
                "n": t.len(),
                "median_ms": round3(med),
                "p90_ms": round3(quantile(&mut t, 0.9)),
                "min_ms": round3(t[0]),
                "max_ms": round3(t[t.len() - 1]),
                "statuses": statuses.get(&key),
                "bytes": bytes.get(&key),
                "ratio_to_baseline": base_median.filter(|_| Some(name.as_str()) != baseline)
                    .map(|b| round3(med / b)),
            }));
        }
    }
    json!({
        "rounds_run": times.values().next().map(Vec::len).unwrap_or(0),
        "seconds": round3(started.elapsed().as_secs_f64()),
        "lag_minutes_per_round": lagging.as_ref().map(|_| lags),
        "results": results,
    })
}

// ---------------------------------------------------------------------------------------------
// parts

/// Fetches every row of `sql` as the gateway does (text columns as Strings, a histogram column
/// parsed into its pairs): (rows, histogram pairs).
fn fetch(
    c: &Connection,
    sql: &str,
    values: &[&dyn rusqlite::ToSql],
    histogram_column: Option<usize>,
) -> (u64, u64) {
    let mut statement = c.prepare_cached(sql).expect("prepare");
    let columns = statement.column_count();
    let mut rows = statement.query(values).expect("query");
    let (mut n, mut pairs) = (0u64, 0u64);
    while let Some(row) = rows.next().expect("row") {
        for i in 0..columns {
            match row.get_ref(i).expect("column") {
                rusqlite::types::ValueRef::Text(t) => {
                    let text = std::str::from_utf8(t).unwrap_or("").to_string();
                    if Some(i) == histogram_column {
                        for pair in text.split_ascii_whitespace() {
                            if let Some((b, c)) = pair.split_once(':') {
                                let _: (u16, u64) =
                                    (b.parse().unwrap_or(0), c.parse().unwrap_or(0));
                                pairs += 1;
                            }
                        }
                    }
                    std::hint::black_box(text);
                }
                other => {
                    std::hint::black_box(other);
                }
            }
        }
        n += 1;
    }
    (n, pairs)
}

fn id_floor(millis: i64) -> String {
    format!("{:08x}-{:04x}", millis >> 16, millis & 0xffff)
}

fn parts(o: &Options) -> Value {
    let path = o.db();
    let n: usize = o.num("n", Some(30));
    let (minutes, width) = match o.get("window").unwrap_or("1h") {
        "15m" => (15, 1),
        "1h" => (60, 1),
        "24h" => (1440, 15),
        other => die(&format!("--window 15m|1h|24h, not {other}")),
    };
    let mut timings: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut counts: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut lag = None;
    for _ in 0..n {
        let whole = Instant::now();
        let mut t = Instant::now();
        let mut lap = |name: &'static str, timings: &mut BTreeMap<&str, Vec<f64>>| {
            timings.entry(name).or_default().push(ms(t.elapsed()));
            t = Instant::now();
        };
        let c = open_reading(&path);
        let _: i64 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("user_version");
        lap("open", &mut timings);
        // receipts::traffic::read, step by step.
        let now_minute = now_millis().div_euclid(60_000);
        let first = now_minute.div_euclid(width) * width - (minutes / width - 1) * width;
        let done = until(&c);
        lap("until", &mut timings);
        let live_floor = now_minute - 10 + 1;
        let live_from = done.unwrap_or(live_floor).max(live_floor).max(first);
        lag = done.map(|u| now_minute - u);
        let select = |table: &str| {
            format!(
                "SELECT minute, tool, upstream, outcome, latency FROM {table} \
                 WHERE minute >= ?1 AND minute < ?2"
            )
        };
        let (mut quarter_rows, mut minute_rows) = ((0, 0), (0, 0));
        if let Some(done) = done.filter(|u| *u > first) {
            let summarised_to = done.min(live_from);
            let minutes_from = if width == 15 {
                let quarters_to = summarised_to.div_euclid(15) * 15;
                if first < quarters_to {
                    quarter_rows = fetch(
                        &c,
                        &select("receipt_quarters"),
                        &[&first, &quarters_to],
                        Some(4),
                    );
                }
                quarters_to.max(first)
            } else {
                first
            };
            lap("quarters", &mut timings);
            if minutes_from < summarised_to {
                minute_rows = fetch(
                    &c,
                    &select("receipt_minutes"),
                    &[&minutes_from, &summarised_to],
                    Some(4),
                );
            }
            lap("minutes", &mut timings);
        } else {
            lap("quarters", &mut timings);
            lap("minutes", &mut timings);
        }
        let raw = fetch(
            &c,
            "SELECT id, tool, upstream, outcome, duration_ms FROM receipts WHERE id >= ?1",
            &[&id_floor(live_from * 60_000)],
            None,
        );
        lap("raw", &mut timings);
        // The receipts panel: the latest 50, and the latest 20 rate-limit refusals.
        const ALL: &str = "id, time, caller, tool, upstream, upstream_tool, contract_digest, \
             arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments, \
             reason, approval_id, approval_decision, approver, approval_wait_ms, error_type, \
             fallback, cached";
        let latest = fetch(
            &c,
            &format!("SELECT {ALL} FROM receipts ORDER BY id DESC LIMIT ?1"),
            &[&50i64],
            None,
        );
        lap("latest_50", &mut timings);
        let refused = fetch(
            &c,
            &format!("SELECT {ALL} FROM receipts WHERE outcome = ?1 ORDER BY id DESC LIMIT ?2"),
            &[&"rate_limited", &20i64],
            None,
        );
        lap("rate_limited_20", &mut timings);
        timings
            .entry("total")
            .or_default()
            .push(ms(whole.elapsed()));
        counts.insert("quarters", quarter_rows);
        counts.insert("minutes", minute_rows);
        counts.insert("raw", raw);
        counts.insert("latest_50", latest);
        counts.insert("rate_limited_20", refused);
    }
    let medians: BTreeMap<&str, f64> = timings
        .iter_mut()
        .map(|(k, v)| (*k, round3(median(v))))
        .collect();
    let rows: BTreeMap<&str, Value> = counts
        .iter()
        .map(|(k, (rows, pairs))| (*k, json!({"rows": rows, "histogram_pairs": pairs})))
        .collect();
    json!({
        "window": o.get("window").unwrap_or("1h"),
        "n": n,
        "lag_minutes": lag,
        "median_ms": medians,
        "rows": rows,
    })
}
