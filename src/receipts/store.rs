//! The receipts database and its writer.
//!
//! Durability before the answer, without a lock on the hot path: calls hand their receipt to one
//! writer thread through a channel and wait for it on a oneshot. The writer commits whatever has
//! queued up in one transaction and then wakes every caller of that batch. In WAL mode a committed
//! transaction is in the database's files before anyone is answered, so it survives any crash of
//! the gateway (SIGKILL included). With `receipts.fsync: true` (`synchronous=FULL`) every commit is
//! also flushed to stable storage, surviving power loss; under load one flush then covers a whole
//! batch (group commit), while a lone call waits for exactly one.

use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, params};
use tokio::sync::oneshot;

use super::{Call, Receipt, Settings, utc_time_ago};

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

/// One table; `time` is indexed for `--since` and retention. Other filters scan: the table is an
/// audit log read by an operator, and every extra index would slow the hot path.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS receipts (
    id               TEXT PRIMARY KEY NOT NULL,
    time             TEXT NOT NULL,
    caller           TEXT NOT NULL,
    tool             TEXT NOT NULL,
    upstream         TEXT,
    upstream_tool    TEXT,
    contract_digest  TEXT,
    arguments_digest TEXT NOT NULL,
    outcome          TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    replayed         INTEGER NOT NULL,
    duration_ms      REAL NOT NULL,
    trace_id         TEXT,
    arguments        TEXT
);
CREATE INDEX IF NOT EXISTS receipts_time ON receipts (time);
";

const INSERT: &str = "INSERT INTO receipts (id, time, caller, tool, upstream, upstream_tool, \
    contract_digest, arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";

/// At most this many receipts per transaction, so one commit never holds callers for long.
const MAX_BATCH: usize = 1024;
/// Retention deletes at most this many rows per statement, between batches, so a large backlog
/// of old receipts never stalls the calls waiting on the writer.
const PRUNE_CHUNK: usize = 5_000;
/// How long the writer waits for a lock held by another process (a second gateway, a backup).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the receipts database cannot be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error(
        "cannot create the folder {path} for the receipts database: {source} \
         (set receipts.path in the configuration to a writable place)"
    )]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot open the receipts database {path}: {source} \
         (check receipts.path in the configuration and the file's permissions)"
    )]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "the receipts database {path} has schema version {found}, newer than this narrowgate \
         understands ({SCHEMA_VERSION}): upgrade narrowgate or point receipts.path elsewhere"
    )]
    NewerSchema { path: PathBuf, found: i64 },
    #[error(
        "there is no receipts database at {path}: the gateway creates it when it starts \
         (receipts.path in the configuration, default data/receipts.db next to it)"
    )]
    Missing { path: PathBuf },
    #[error("cannot read the receipts database {path}: {source}")]
    Read {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot start the receipts writer thread: {0}")]
    Thread(std::io::Error),
}

/// A receipt on its way to the writer, and who to tell once it is committed.
struct Pending {
    receipt: Receipt,
    committed: oneshot::Sender<bool>,
}

/// The gateway's handle on the receipts database. Cheap to share: recording only sends on a
/// channel and waits for the writer's answer.
pub struct ReceiptLog {
    queue: std_mpsc::Sender<Pending>,
    path: PathBuf,
    store_arguments: bool,
}

impl std::fmt::Debug for ReceiptLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptLog")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ReceiptLog {
    /// Opens (creating it and its folder if missing) the database of `settings` and starts the
    /// writer thread. Fails at start-up rather than serving calls that could leave no receipt.
    pub fn open(settings: &Settings) -> Result<ReceiptLog, ReceiptError> {
        let connection = open_for_writing(&settings.path, settings.fsync)?;
        let (queue, incoming) = std_mpsc::channel();
        let writer = Writer {
            connection,
            path: settings.path.clone(),
            retention: settings.retention,
        };
        std::thread::Builder::new()
            .name("receipts-writer".into())
            .spawn(move || writer.run(&incoming))
            .map_err(ReceiptError::Thread)?;
        tracing::info!(path = %settings.path.display(), "receipts database open");
        Ok(ReceiptLog {
            queue,
            path: settings.path.clone(),
            store_arguments: settings.store_arguments,
        })
    }

    /// Where the receipts go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the receipt of `call` and returns once it is committed to disk, with its id.
    ///
    /// If it cannot be written, that is logged as an error (with the receipt's id, caller, tool
    /// and outcome, never its arguments) and the call is still answered: refusing answers would
    /// not bring the receipt back, and the upstream may already have acted. Returns `None` then.
    pub async fn record(&self, call: &Call<'_>) -> Option<String> {
        let receipt = Receipt::of(call, self.store_arguments);
        let id = receipt.id.clone();
        let (committed, done) = oneshot::channel();
        let sent = self.queue.send(Pending { receipt, committed }).is_ok();
        if sent && done.await == Ok(true) {
            return Some(id);
        }
        tracing::error!(
            receipt = %id,
            caller = %call.caller,
            tool = %call.tool,
            outcome = %call.outcome,
            path = %self.path.display(),
            "RECEIPT NOT WRITTEN: this call is answered but has no receipt"
        );
        None
    }
}

/// Creates the folder and the file (owner-only on Unix: receipts may hold arguments), then opens
/// it in WAL mode (flushing every commit when `fsync`) with the current schema.
fn open_for_writing(path: &Path, fsync: bool) -> Result<Connection, ReceiptError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| ReceiptError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    create_private_file(path);
    let open_err = |source| ReceiptError::Open {
        path: path.to_path_buf(),
        source,
    };
    let connection = Connection::open(path).map_err(open_err)?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    let mode: String = connection
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(open_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(
            path = %path.display(),
            %mode,
            "the receipts database is not in WAL mode: `narrowgate receipts` may wait for the writer"
        );
    }
    // FULL fsyncs the log at every commit (survives a machine crash); NORMAL writes it at every
    // commit without flushing (survives a process crash, at a fraction of the cost).
    let synchronous = if fsync { "FULL" } else { "NORMAL" };
    connection
        .pragma_update(None, "synchronous", synchronous)
        .map_err(open_err)?;
    let found: i64 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(open_err)?;
    if found > SCHEMA_VERSION {
        return Err(ReceiptError::NewerSchema {
            path: path.to_path_buf(),
            found,
        });
    }
    connection.execute_batch(SCHEMA).map_err(open_err)?;
    connection
        .pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(open_err)?;
    Ok(connection)
}

/// Creates `path` empty with mode 0600 if it does not exist (SQLite gives its `-wal` and `-shm`
/// files the same mode). Best effort: if this fails, opening the database reports the problem.
fn create_private_file(path: &Path) {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let _ = options.open(path);
}

/// The writer thread's state. SQLite calls block, so they run on a thread of their own rather
/// than on the async runtime.
struct Writer {
    connection: Connection,
    path: PathBuf,
    retention: Option<Duration>,
}

impl Writer {
    /// Commits batches until every [`ReceiptLog`] handle is gone, pruning between batches.
    fn run(mut self, incoming: &std_mpsc::Receiver<Pending>) {
        let mut next_prune = Instant::now();
        loop {
            let first = match self.retention {
                None => incoming
                    .recv()
                    .map_err(|_| std_mpsc::RecvTimeoutError::Disconnected),
                Some(_) => {
                    incoming.recv_timeout(next_prune.saturating_duration_since(Instant::now()))
                }
            };
            match first {
                Ok(pending) => {
                    let mut batch = vec![pending];
                    while batch.len() < MAX_BATCH {
                        match incoming.try_recv() {
                            Ok(p) => batch.push(p),
                            Err(_) => break,
                        }
                    }
                    self.commit(batch);
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
            if let Some(retention) = self.retention
                && Instant::now() >= next_prune
            {
                next_prune = Instant::now() + self.prune(retention);
            }
        }
    }

    /// Writes `batch` in one transaction and tells each caller whether its receipt is on disk.
    /// If the batch fails, each receipt is retried alone, so one bad row cannot cost the others.
    fn commit(&mut self, batch: Vec<Pending>) {
        let receipts: Vec<&Receipt> = batch.iter().map(|p| &p.receipt).collect();
        let result = insert(&mut self.connection, &receipts);
        if let Err(e) = &result {
            tracing::error!(
                path = %self.path.display(),
                receipts = batch.len(),
                error = %e,
                "cannot write receipts{}",
                if batch.len() > 1 { "; retrying them one by one" } else { "" }
            );
        }
        if result.is_ok() || batch.len() == 1 {
            let ok = result.is_ok();
            for pending in batch {
                let _ = pending.committed.send(ok);
            }
            return;
        }
        for pending in batch {
            let ok = insert(&mut self.connection, &[&pending.receipt]).is_ok();
            let _ = pending.committed.send(ok);
        }
    }

    /// Deletes one chunk of receipts older than `retention`; returns when to prune next: at once
    /// if there may be more, else after a tenth of the retention (between 1 s and 10 min).
    fn prune(&mut self, retention: Duration) -> Duration {
        let cutoff = utc_time_ago(retention);
        let deleted = self.connection.execute(
            "DELETE FROM receipts WHERE rowid IN \
             (SELECT rowid FROM receipts WHERE time < ?1 LIMIT ?2)",
            params![cutoff, PRUNE_CHUNK as i64],
        );
        match deleted {
            Ok(n) if n >= PRUNE_CHUNK => Duration::ZERO,
            Ok(n) => {
                if n > 0 {
                    tracing::info!(deleted = n, "pruned receipts older than the retention");
                }
                (retention / 10).clamp(Duration::from_secs(1), Duration::from_secs(600))
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "cannot prune old receipts");
                Duration::from_secs(60)
            }
        }
    }
}

/// Inserts `receipts` in one transaction.
fn insert(connection: &mut Connection, receipts: &[&Receipt]) -> rusqlite::Result<()> {
    let transaction = connection.transaction()?;
    {
        let mut statement = transaction.prepare_cached(INSERT)?;
        for r in receipts {
            let arguments = r.arguments.as_ref().map(|a| a.to_string());
            statement.execute(params![
                r.id,
                r.time,
                r.caller,
                r.tool,
                r.upstream,
                r.upstream_tool,
                r.contract_digest,
                r.arguments_digest,
                r.outcome,
                r.attempts,
                r.replayed,
                r.duration_ms,
                r.trace_id,
                arguments,
            ])?;
        }
    }
    transaction.commit()
}

/// Opens an existing database read-only, for queries. In WAL mode this never blocks the writer.
pub fn open_for_reading(path: &Path) -> Result<Connection, ReceiptError> {
    if !path.exists() {
        return Err(ReceiptError::Missing {
            path: path.to_path_buf(),
        });
    }
    let read_err = |source| ReceiptError::Read {
        path: path.to_path_buf(),
        source,
    };
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(read_err)?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(read_err)?;
    Ok(connection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipts::Outcome;
    use serde_json::json;
    use std::time::SystemTime;

    fn call<'a>(tool: &'a str, arguments: &'a serde_json::Value) -> Call<'a> {
        Call {
            caller: "alice",
            tool,
            contract: None,
            arguments,
            outcome: Outcome::Denied,
            attempts: 0,
            replayed: false,
            started: SystemTime::now(),
            duration: Duration::from_millis(3),
            trace_id: None,
        }
    }

    #[tokio::test]
    async fn concurrent_records_are_all_committed_and_readable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = Settings {
            path: dir.path().join("nested/folder/receipts.db"),
            store_arguments: true,
            retention: None,
            fsync: false,
        };
        let log = std::sync::Arc::new(ReceiptLog::open(&settings).expect("open"));
        let mut tasks = Vec::new();
        for i in 0..200 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let args = json!({ "i": i });
                log.record(&call("nope", &args)).await
            }));
        }
        for task in tasks {
            assert!(task.await.expect("task").is_some(), "every receipt commits");
        }
        let connection = open_for_reading(&settings.path).expect("read");
        let count: i64 = connection
            .query_row("SELECT count(*) FROM receipts", [], |r| r.get(0))
            .expect("count");
        assert_eq!(count, 200);
        let kept: Option<String> = connection
            .query_row("SELECT arguments FROM receipts LIMIT 1", [], |r| r.get(0))
            .expect("row");
        assert_eq!(kept, None, "arguments of an unknown tool are never kept");
    }

    #[tokio::test]
    async fn a_failed_write_is_reported_and_does_not_block_the_call() {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = Settings {
            path: dir.path().join("r.db"),
            store_arguments: false,
            retention: None,
            fsync: false,
        };
        let log = ReceiptLog::open(&settings).expect("open");
        let args = json!({});
        assert!(log.record(&call("a", &args)).await.is_some());
        // Sabotage the database from outside, as a full disk or an operator's mistake would.
        let other = Connection::open(&settings.path).expect("open");
        other
            .execute_batch("DROP TABLE receipts")
            .expect("drop table");
        let answered = tokio::time::timeout(Duration::from_secs(10), log.record(&call("b", &args)))
            .await
            .expect("record returns although the write failed");
        assert_eq!(answered, None);
    }

    /// Not a check but a measurement, for the benchmark notes:
    /// `cargo test --release --lib receipt_log_write_cost -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "benchmark"]
    async fn receipt_log_write_cost() {
        for base in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
            let dir = tempfile::tempdir_in(&base).expect("tempdir");
            let settings = Settings {
                path: dir.path().join("r.db"),
                store_arguments: false,
                retention: None,
                fsync: false,
            };
            let log = std::sync::Arc::new(ReceiptLog::open(&settings).expect("open"));
            let args = json!({"message": "hello"});
            const N: usize = 500;
            let started = Instant::now();
            for _ in 0..N {
                assert!(log.record(&call("echo", &args)).await.is_some());
            }
            let sequential = started.elapsed();
            const TASKS: usize = 64;
            let started = Instant::now();
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..TASKS {
                let log = log.clone();
                tasks.spawn(async move {
                    let args = json!({"message": "hello"});
                    for _ in 0..N / 10 {
                        assert!(log.record(&call("echo", &args)).await.is_some());
                    }
                });
            }
            tasks.join_all().await;
            let concurrent = started.elapsed();
            eprintln!(
                "{}: one at a time {:.0} receipts/s ({:.2} ms each); {TASKS} concurrent \
                 writers {:.0} receipts/s",
                base.display(),
                N as f64 / sequential.as_secs_f64(),
                sequential.as_secs_f64() * 1000.0 / N as f64,
                (TASKS * N / 10) as f64 / concurrent.as_secs_f64()
            );
        }
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.db");
        let c = Connection::open(&path).expect("open");
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .expect("set version");
        drop(c);
        let settings = Settings {
            path,
            store_arguments: false,
            retention: None,
            fsync: false,
        };
        let e = ReceiptLog::open(&settings).expect_err("refused");
        assert!(e.to_string().contains("newer"), "{e}");
    }
}
