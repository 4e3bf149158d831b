//! Where the writer sends receipts: the SQLite connection, or PostgreSQL.

use std::time::Duration;

use rusqlite::{Connection, params};

use crate::receipts::postgres::PgWriter;
use crate::receipts::{Receipt, id_floor, millis_ago};

/// Retention deletes at most this many rows per statement, between batches, so a large backlog
/// of old receipts never stalls the calls waiting on the writer.
pub(super) const PRUNE_CHUNK: usize = 5_000;
const INSERT: &str = "INSERT INTO receipts (id, time, caller, tool, upstream, upstream_tool, \
    contract_digest, arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments, \
    reason, approval_id, approval_decision, approver, approval_wait_ms, error_type, fallback, cached) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, \
    ?20, ?21, ?22)";

/// Where receipts are written.
pub(super) enum Backend {
    Sqlite(Connection),
    /// Only ever used on the writer thread. Boxed: it is much larger than a SQLite connection.
    Postgres(Box<PgWriter>),
}

impl Backend {
    /// Inserts `receipts` in one transaction; the error as text, for the log.
    pub(super) fn insert(&mut self, receipts: &[&Receipt]) -> Result<(), String> {
        match self {
            Backend::Sqlite(connection) => insert(connection, receipts).map_err(|e| e.to_string()),
            Backend::Postgres(writer) => writer.insert(receipts).map_err(|e| e.to_string()),
        }
    }

    /// Deletes up to [`PRUNE_CHUNK`] receipts older than `retention`.
    pub(super) fn prune(&mut self, retention: Duration) -> Result<usize, String> {
        match self {
            Backend::Sqlite(connection) => connection
                .execute(
                    "DELETE FROM receipts WHERE id IN \
                     (SELECT id FROM receipts WHERE id < ?1 LIMIT ?2)",
                    params![id_floor(millis_ago(retention)), PRUNE_CHUNK as i64],
                )
                .map_err(|e| e.to_string()),
            Backend::Postgres(writer) => writer
                .prune(retention, PRUNE_CHUNK)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .map_err(|e| e.to_string()),
        }
    }
}

/// Inserts `receipts` in one transaction. The statements are cached: parsing `BEGIN` and
/// `COMMIT` anew for every commit showed in profiles. A lone receipt is its own transaction
/// (SQLite's autocommit): the same commit, without two statements around it.
pub(super) fn insert(connection: &mut Connection, receipts: &[&Receipt]) -> rusqlite::Result<()> {
    if receipts.len() == 1 {
        return insert_rows(connection, receipts);
    }
    connection.prepare_cached("BEGIN")?.execute([])?;
    let written = insert_rows(connection, receipts)
        .and_then(|()| connection.prepare_cached("COMMIT")?.execute([]).map(drop));
    if written.is_err() {
        let _ = connection.execute_batch("ROLLBACK");
    }
    written
}

fn insert_rows(connection: &Connection, receipts: &[&Receipt]) -> rusqlite::Result<()> {
    let mut statement = connection.prepare_cached(INSERT)?;
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
            // The column is NOT NULL (schema 1 and 2): no digest is written as an empty text.
            r.arguments_digest.as_deref().unwrap_or(""),
            r.outcome,
            r.attempts,
            r.replayed,
            r.duration_ms,
            r.trace_id,
            arguments,
            r.reason,
            r.approval_id,
            r.approval_decision,
            r.approver,
            r.approval_wait_ms,
            r.error_type,
            r.fallback,
            r.cached,
        ])?;
    }
    Ok(())
}
