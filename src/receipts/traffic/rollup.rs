//! The roll-up: each ended minute of receipts summarised into `receipt_minutes` (one row per
//! minute, tool, upstream and outcome: the calls and their latency histogram), on a thread of its
//! own, so a window of the status page reads summaries instead of every receipt.
//!
//! `receipt_minutes_done.until` says how far it got: every minute before it is summarised. A pass
//! reads the raw receipts of the next minutes (at most [`CHUNK_MINUTES`], so a store full of
//! unsummarised receipts is caught up in steps that hold nothing for long), then writes their rows
//! and moves `until` in one transaction that first checks `until` has not moved: two gateways on
//! one SQLite file, or replicas on one PostgreSQL database, never summarise a minute twice.
//! Summaries older than [`KEPT_MINUTES`] are deleted in the same transaction.
//!
//! Each quarter hour that a pass completes is also summarised whole, into `receipt_quarters` (from
//! its minutes' rows, in the same transaction): the 24-hour window's 15-minute bars read 96
//! quarters' rows, not 1,440 minutes'.

use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use super::{GRACE_MS, KEPT_MINUTES, Key, Minutes};
use crate::receipts::{Outcome, ReceiptError, id_floor};

/// The most minutes one pass summarises.
pub const CHUNK_MINUTES: i64 = 30;
/// How often the roll-up thread looks for ended minutes.
const PERIOD: Duration = Duration::from_secs(15);
/// Held while a PostgreSQL pass writes (`pg_advisory_xact_lock`), so replicas take turns.
const PG_LOCK: i64 = 0x6e61_7272_6f78;

/// A connection able to summarise: the SQLite file or PostgreSQL.
pub enum Store {
    Sqlite(Connection),
    Postgres(postgres::Client),
}

/// Why a pass failed: the store's own error, as text for the log.
type Failed = String;

impl Store {
    /// Every minute before this one is summarised (None: nothing yet).
    fn done_until(&mut self) -> Result<Option<i64>, Failed> {
        let sql = "SELECT until FROM receipt_minutes_done WHERE id = 0";
        match self {
            Store::Sqlite(c) => c
                .query_row(sql, [], |row| row.get(0))
                .optional()
                .map_err(|e| e.to_string()),
            Store::Postgres(c) => c
                .query_opt(sql, &[])
                .map(|row| row.map(|r| r.get(0)))
                .map_err(|e| e.to_string()),
        }
    }

    /// The minute of the oldest receipt.
    fn first_minute(&mut self) -> Result<Option<i64>, Failed> {
        let sql = "SELECT min(id) FROM receipts";
        let id: Option<String> = match self {
            Store::Sqlite(c) => c
                .query_row(sql, [], |row| row.get(0))
                .map_err(|e| e.to_string())?,
            Store::Postgres(c) => c.query_one(sql, &[]).map_err(|e| e.to_string())?.get(0),
        };
        Ok(id
            .as_deref()
            .and_then(super::millis_of_id)
            .map(|m| m.div_euclid(60_000)))
    }

    /// Tallies of the raw receipts written from `from_millis` (to `to_millis`, if given).
    pub fn raw(&mut self, from_millis: i64, to_millis: Option<i64>) -> Result<Minutes, Failed> {
        read_raw(self, from_millis, to_millis)
    }

    /// Moves `until` from `expected` to `to`, writing `minutes` and deleting summaries before
    /// `keep_from`, in one transaction; false (and nothing written) if `until` moved meanwhile.
    pub(super) fn write(
        &mut self,
        expected: Option<i64>,
        (from, to): (i64, i64),
        minutes: &Minutes,
        keep_from: i64,
    ) -> Result<bool, Failed> {
        let done = Done {
            expected,
            from,
            to,
            keep_from,
        };
        match self {
            Store::Sqlite(c) => write_sqlite(c, &done, minutes).map_err(|e| e.to_string()),
            Store::Postgres(c) => write_pg(c, &done, minutes).map_err(|e| e.to_string()),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Summarised minutes up to (not including) this one; more may be due.
    Summarised { until: i64, more: bool },
    /// Nothing had ended since the last pass.
    UpToDate,
    /// Another gateway moved `until` first; nothing written.
    Raced,
}

/// One pass at `now_millis`: summarises the next ended minutes, at most [`CHUNK_MINUTES`].
pub fn pass(store: &mut Store, now_millis: i64) -> Result<Pass, Failed> {
    let now_minute = now_millis.div_euclid(60_000);
    let ended_until = (now_millis - GRACE_MS).div_euclid(60_000);
    let keep_from = now_minute - KEPT_MINUTES;
    let done = store.done_until()?;
    let start = match done {
        Some(until) => until,
        None => store.first_minute()?.unwrap_or(ended_until),
    }
    .max(keep_from);
    if start >= ended_until && done.is_some() {
        return Ok(Pass::UpToDate);
    }
    let to = (start + CHUNK_MINUTES).min(ended_until).max(start);
    let minutes = store.raw(start * 60_000, Some(to * 60_000))?;
    if !store.write(done, (start, to), &minutes, keep_from)? {
        return Ok(Pass::Raced);
    }
    Ok(Pass::Summarised {
        until: to,
        more: to < ended_until,
    })
}

/// The roll-up thread: passes until caught up, then every [`PERIOD`], until dropped.
pub struct Roller {
    _stop: mpsc::Sender<()>,
}

impl Roller {
    /// Starts summarising on a thread of its own, through connections made by `open`
    /// (`location` names the database in logs). Failures (the database away for a while) are
    /// logged and tried again at the next period: the summaries only lag.
    pub fn start(
        location: String,
        open: impl FnMut() -> Result<Store, ReceiptError> + Send + 'static,
    ) -> Result<Roller, ReceiptError> {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("receipts-rollup".into())
            .spawn(move || run(&location, open, &stopped))
            .map_err(ReceiptError::Thread)?;
        Ok(Roller { _stop: stop })
    }
}

fn run(
    location: &str,
    mut open: impl FnMut() -> Result<Store, ReceiptError>,
    stopped: &mpsc::Receiver<()>,
) {
    let mut store: Option<Store> = None;
    loop {
        let connected = match store.take() {
            Some(open) => Ok(open),
            None => open().map_err(|e| e.to_string()),
        };
        match connected {
            Ok(mut open) => {
                // A connection that failed is opened anew at the next period.
                if let Err(e) = catch_up(&mut open, stopped) {
                    tracing::warn!(%location, error = %e, "cannot summarise receipts for the status page's charts; trying again shortly");
                } else {
                    store = Some(open);
                }
            }
            Err(e) => {
                tracing::warn!(%location, error = %e, "cannot open the receipts database to summarise it; trying again shortly");
            }
        }
        match stopped.recv_timeout(PERIOD) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => return,
        }
    }
}

/// Passes until nothing more has ended, or the roller is stopped.
fn catch_up(store: &mut Store, stopped: &mpsc::Receiver<()>) -> Result<(), Failed> {
    loop {
        match pass(store, now_millis())? {
            Pass::Summarised { more: true, .. } | Pass::Raced => {}
            Pass::Summarised { more: false, .. } | Pass::UpToDate => return Ok(()),
        }
        if !matches!(stopped.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            return Ok(());
        }
    }
}

pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The raw receipts written from `from_millis` (to `to_millis`, if given), tallied.
fn read_raw(
    store: &mut Store,
    from_millis: i64,
    to_millis: Option<i64>,
) -> Result<Minutes, Failed> {
    let mut minutes = Minutes::default();
    let floor = id_floor(from_millis);
    let ceiling = to_millis.map(id_floor);
    // Only the id range: the table's key finds the rows, newest receipts are a range scan.
    let sql = match ceiling {
        Some(_) => {
            "SELECT id, tool, upstream, outcome, duration_ms FROM receipts \
                    WHERE id >= $1 AND id < $2"
        }
        None => "SELECT id, tool, upstream, outcome, duration_ms FROM receipts WHERE id >= $1",
    };
    match store {
        Store::Sqlite(c) => {
            let sql = sql.replace('$', "?");
            let mut statement = c.prepare_cached(&sql).map_err(|e| e.to_string())?;
            let mut rows = match &ceiling {
                Some(ceiling) => statement.query(params![floor, ceiling]),
                None => statement.query(params![floor]),
            }
            .map_err(|e| e.to_string())?;
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                let mut read = || -> rusqlite::Result<()> {
                    let id: String = row.get(0)?;
                    let tool: String = row.get(1)?;
                    let upstream: Option<String> = row.get(2)?;
                    let outcome: String = row.get(3)?;
                    minutes.add(&id, &tool, upstream.as_deref(), &outcome, row.get(4)?);
                    Ok(())
                };
                read().map_err(|e| e.to_string())?;
            }
        }
        Store::Postgres(c) => {
            let rows = match &ceiling {
                Some(ceiling) => c.query(sql, &[&floor, ceiling]),
                None => c.query(sql, &[&floor]),
            }
            .map_err(|e| e.to_string())?;
            for row in rows {
                let mut read = || -> Result<(), postgres::Error> {
                    let id: String = row.try_get(0)?;
                    let tool: String = row.try_get(1)?;
                    let upstream: Option<String> = row.try_get(2)?;
                    let outcome: String = row.try_get(3)?;
                    minutes.add(&id, &tool, upstream.as_deref(), &outcome, row.try_get(4)?);
                    Ok(())
                };
                read().map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(minutes)
}

/// Which summaries to read: per minute, or per quarter hour (keyed by its first minute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    Minute,
    Quarter,
}

impl Width {
    fn table(self) -> &'static str {
        match self {
            Width::Minute => "receipt_minutes",
            Width::Quarter => "receipt_quarters",
        }
    }
}

/// The summaries of `width` starting in minutes `[from, to)`.
pub fn summaries(store: &mut Store, width: Width, from: i64, to: i64) -> Result<Minutes, Failed> {
    if from >= to {
        return Ok(Minutes::default());
    }
    match store {
        Store::Sqlite(c) => sqlite_rows(c, width, from, to).map_err(|e| e.to_string()),
        Store::Postgres(c) => pg_rows(c, width, from, to).map_err(|e| e.to_string()),
    }
}

/// `until`, for a reader: None when nothing is summarised or the tables are not there yet (a
/// store no gateway of this version has opened).
pub fn done_until(store: &mut Store) -> Option<i64> {
    store.done_until().ok().flatten()
}

/// A summary row read back; one whose outcome or histogram this build cannot read is left out.
fn add_row(minutes: &mut Minutes, row: (i64, String, String, String, String)) {
    let (minute, tool, upstream, outcome, latency) = row;
    if let (Some(outcome), Some(histogram)) =
        (Outcome::parse(&outcome), super::Histogram::decode(&latency))
    {
        let key = Key {
            minute,
            tool,
            upstream,
        };
        minutes.add_row(key, outcome, &histogram);
    }
}

fn select(width: Width) -> String {
    format!(
        "SELECT minute, tool, upstream, outcome, latency FROM {} WHERE minute >= $1 AND minute < $2",
        width.table()
    )
}

fn sqlite_rows(c: &Connection, width: Width, from: i64, to: i64) -> rusqlite::Result<Minutes> {
    let mut minutes = Minutes::default();
    let mut statement = c.prepare_cached(&select(width).replace('$', "?"))?;
    let mut rows = statement.query(params![from, to])?;
    while let Some(row) = rows.next()? {
        add_row(
            &mut minutes,
            (
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ),
        );
    }
    Ok(minutes)
}

fn pg_rows(
    c: &mut impl postgres::GenericClient,
    width: Width,
    from: i64,
    to: i64,
) -> Result<Minutes, postgres::Error> {
    let mut minutes = Minutes::default();
    for row in c.query(select(width).as_str(), &[&from, &to])? {
        add_row(
            &mut minutes,
            (
                row.try_get(0)?,
                row.try_get(1)?,
                row.try_get(2)?,
                row.try_get(3)?,
                row.try_get(4)?,
            ),
        );
    }
    Ok(minutes)
}

/// What a pass writes besides its rows: `until` moves from `expected` to `to` (the pass
/// summarised minutes `[from, to)`), and summaries before `keep_from` go.
struct Done {
    expected: Option<i64>,
    from: i64,
    to: i64,
    keep_from: i64,
}

impl Done {
    /// The quarter hours this pass completes: those ending in `(from, to]`.
    fn quarters(&self) -> impl Iterator<Item = i64> {
        // The quarter holding `from` is the first to end after it.
        let first = self.from.div_euclid(15) * 15;
        let to = self.to;
        (0..)
            .map(move |i| first + i * 15)
            .take_while(move |q| q + 15 <= to)
    }

    /// A quarter's minutes merged into one row per tool, upstream and outcome.
    fn quarter(minutes: Minutes, quarter: i64) -> Minutes {
        let mut whole = Minutes::default();
        for (key, tally) in minutes.tallies {
            let key = Key {
                minute: quarter,
                ..key
            };
            whole.tallies.entry(key).or_default().merge(&tally);
        }
        whole
    }
}

const SQLITE_INSERT: &str = "INSERT OR IGNORE INTO {table} (minute, tool, upstream, outcome, calls, \
    latency) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

fn sqlite_insert(c: &Connection, width: Width, minutes: &Minutes) -> rusqlite::Result<()> {
    let mut insert = c.prepare_cached(&SQLITE_INSERT.replace("{table}", width.table()))?;
    for (key, outcome, histogram) in minutes.rows() {
        insert.execute(params![
            key.minute,
            key.tool,
            key.upstream,
            outcome.as_str(),
            i64::try_from(histogram.count()).unwrap_or(i64::MAX),
            histogram.encode(),
        ])?;
    }
    Ok(())
}

fn write_sqlite(c: &mut Connection, done: &Done, minutes: &Minutes) -> rusqlite::Result<bool> {
    // IMMEDIATE: the write lock from the start, so the check of `until` cannot go stale.
    let transaction = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found: Option<i64> = transaction
        .query_row(
            "SELECT until FROM receipt_minutes_done WHERE id = 0",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if found != done.expected {
        return Ok(false);
    }
    sqlite_insert(&transaction, Width::Minute, minutes)?;
    for quarter in done.quarters() {
        let rows = sqlite_rows(&transaction, Width::Minute, quarter, quarter + 15)?;
        sqlite_insert(&transaction, Width::Quarter, &Done::quarter(rows, quarter))?;
    }
    transaction.execute(
        "INSERT INTO receipt_minutes_done (id, until) VALUES (0, ?1) \
         ON CONFLICT (id) DO UPDATE SET until = excluded.until",
        params![done.to],
    )?;
    for width in [Width::Minute, Width::Quarter] {
        transaction.execute(
            &format!("DELETE FROM {} WHERE minute < ?1", width.table()),
            params![done.keep_from],
        )?;
    }
    transaction.commit()?;
    Ok(true)
}

/// One statement for all of `minutes`, as the receipts writer does.
fn pg_insert(
    c: &mut impl postgres::GenericClient,
    width: Width,
    minutes: &Minutes,
) -> Result<(), postgres::Error> {
    type Columns<'a> = (
        Vec<i64>,
        Vec<&'a str>,
        Vec<&'a str>,
        Vec<&'a str>,
        Vec<i64>,
        Vec<String>,
    );
    let mut columns: Columns = Default::default();
    for (key, outcome, histogram) in minutes.rows() {
        columns.0.push(key.minute);
        columns.1.push(&key.tool);
        columns.2.push(&key.upstream);
        columns.3.push(outcome.as_str());
        columns
            .4
            .push(i64::try_from(histogram.count()).unwrap_or(i64::MAX));
        columns.5.push(histogram.encode());
    }
    let sql = format!(
        "INSERT INTO {} (minute, tool, upstream, outcome, calls, latency) \
         SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::int8[], \
         $6::text[]) ON CONFLICT DO NOTHING",
        width.table()
    );
    c.execute(
        sql.as_str(),
        &[
            &columns.0, &columns.1, &columns.2, &columns.3, &columns.4, &columns.5,
        ],
    )
    .map(drop)
}

fn write_pg(
    c: &mut postgres::Client,
    done: &Done,
    minutes: &Minutes,
) -> Result<bool, postgres::Error> {
    let mut transaction = c.transaction()?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&PG_LOCK])?;
    let found: Option<i64> = transaction
        .query_opt("SELECT until FROM receipt_minutes_done WHERE id = 0", &[])?
        .map(|r| r.get(0));
    if found != done.expected {
        return Ok(false);
    }
    pg_insert(&mut transaction, Width::Minute, minutes)?;
    for quarter in done.quarters() {
        let rows = pg_rows(&mut transaction, Width::Minute, quarter, quarter + 15)?;
        pg_insert(
            &mut transaction,
            Width::Quarter,
            &Done::quarter(rows, quarter),
        )?;
    }
    transaction.execute(
        "INSERT INTO receipt_minutes_done (id, until) VALUES (0, $1) \
         ON CONFLICT (id) DO UPDATE SET until = excluded.until",
        &[&done.to],
    )?;
    for width in [Width::Minute, Width::Quarter] {
        transaction.execute(
            format!("DELETE FROM {} WHERE minute < $1", width.table()).as_str(),
            &[&done.keep_from],
        )?;
    }
    transaction.commit()?;
    Ok(true)
}
