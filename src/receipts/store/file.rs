//! The SQLite file of the receipts: its schema, the migrations from older versions, and opening
//! it for writing (WAL, private mode 0600, migrated in one transaction) or for reading.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::receipts::ReceiptError;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 6;

/// One table, keyed by the receipt id: a UUIDv7 of when it was written, so the key serves
/// `--since`, retention and newest-first order, and a commit writes one b-tree page where a
/// separate time index and id index made three (version 1; three times the cost per receipt).
/// Other filters scan: the table is an audit log read by an operator.
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
    arguments        TEXT,
    reason           TEXT,
    approval_id      TEXT,
    approval_decision TEXT,
    approver         TEXT,
    approval_wait_ms REAL,
    error_type       TEXT,
    fallback         TEXT,
    cached           INTEGER
) WITHOUT ROWID;
";

/// Version 6: the per-minute and per-quarter-hour summaries of the status page's charts
/// (`receipts::traffic::rollup` writes them), and how far they go.
const SUMMARIES: &str = "
CREATE TABLE IF NOT EXISTS receipt_minutes (
    minute   INTEGER NOT NULL,
    tool     TEXT NOT NULL,
    upstream TEXT NOT NULL,
    outcome  TEXT NOT NULL,
    calls    INTEGER NOT NULL,
    latency  TEXT NOT NULL,
    PRIMARY KEY (minute, tool, upstream, outcome)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipt_quarters (
    minute   INTEGER NOT NULL,
    tool     TEXT NOT NULL,
    upstream TEXT NOT NULL,
    outcome  TEXT NOT NULL,
    calls    INTEGER NOT NULL,
    latency  TEXT NOT NULL,
    PRIMARY KEY (minute, tool, upstream, outcome)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipt_minutes_done (
    id    INTEGER PRIMARY KEY CHECK (id = 0),
    until INTEGER NOT NULL
);
";

/// From version 2: `reason` (why a call was denied, e.g. the precondition that was false).
const ADD_REASON: &str = "ALTER TABLE receipts ADD COLUMN reason TEXT;";

/// From version 3: the approval columns (version 4), NULL for the receipts written before.
const ADD_APPROVALS: &str = "
ALTER TABLE receipts ADD COLUMN approval_id TEXT;
ALTER TABLE receipts ADD COLUMN approval_decision TEXT;
ALTER TABLE receipts ADD COLUMN approver TEXT;
ALTER TABLE receipts ADD COLUMN approval_wait_ms REAL;
";

/// From version 4: the typed error, the fallback taken and the cache hit (version 5), NULL for
/// the receipts written before.
const ADD_RECOVERY: &str = "
ALTER TABLE receipts ADD COLUMN error_type TEXT;
ALTER TABLE receipts ADD COLUMN fallback TEXT;
ALTER TABLE receipts ADD COLUMN cached INTEGER;
";

/// From version 1 (a rowid table with indexes on `id` and `time`): the old table is renamed,
/// [`SCHEMA`] creates the new one, then this copies the rows over and drops the old table.
const COPY_FROM_1: &str = "
INSERT INTO receipts (id, time, caller, tool, upstream, upstream_tool, contract_digest,
    arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments)
SELECT id, time, caller, tool, upstream, upstream_tool, contract_digest,
    arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments FROM receipts_v1;
DROP TABLE receipts_v1;
";

/// How long the writer waits for a lock held by another process (a second gateway, a backup).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Creates the folder and the file (owner-only on Unix: receipts may hold arguments), then opens
/// it in WAL mode (flushing every commit when `fsync`) with the current schema.
pub(in crate::receipts) fn open_for_writing(
    path: &Path,
    fsync: bool,
) -> Result<Connection, ReceiptError> {
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
    let mut connection = Connection::open(path).map_err(open_err)?;
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
            supported: SCHEMA_VERSION,
        });
    }
    let transaction = connection.transaction().map_err(open_err)?;
    if found == 1 {
        transaction
            .execute_batch("ALTER TABLE receipts RENAME TO receipts_v1")
            .map_err(open_err)?;
    }
    if found == 2 {
        transaction.execute_batch(ADD_REASON).map_err(open_err)?;
    }
    if found == 2 || found == 3 {
        transaction.execute_batch(ADD_APPROVALS).map_err(open_err)?;
    }
    if (2..=4).contains(&found) {
        transaction.execute_batch(ADD_RECOVERY).map_err(open_err)?;
    }
    transaction.execute_batch(SCHEMA).map_err(open_err)?;
    // Version 6: the per-minute summaries of the status page's charts, empty until the roll-up
    // runs (new tables only, so an older database needs nothing else).
    transaction.execute_batch(SUMMARIES).map_err(open_err)?;
    if (2..=5).contains(&found) {
        tracing::info!(path = %path.display(), "receipts database upgraded to schema version {SCHEMA_VERSION}");
    }
    if found == 1 {
        transaction.execute_batch(COPY_FROM_1).map_err(open_err)?;
        tracing::info!(path = %path.display(), "receipts database upgraded to schema version {SCHEMA_VERSION}");
    }
    transaction
        .pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(open_err)?;
    transaction.commit().map_err(open_err)?;
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
    let found: i64 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(read_err)?;
    if found > SCHEMA_VERSION {
        return Err(ReceiptError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(connection)
}
