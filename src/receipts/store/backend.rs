//! Where the writer sends receipts: the SQLite connection, or PostgreSQL.

use std::time::Duration;

use rusqlite::{Connection, params};

use super::{PRUNE_CHUNK, insert};
use crate::receipts::postgres::PgWriter;
use crate::receipts::{Receipt, id_floor, millis_ago};

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
