//! Reading receipts back, for `narrowgate receipts`. Read-only and WAL-safe: it can run while the
//! gateway writes. [`Source`] chooses between the SQLite file and PostgreSQL.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::types::Value as SqlValue;

use super::store::open_for_reading;
use super::traffic::rollup::{Roller, Store};
use super::traffic::{self, Minutes, Traffic, Window};
use super::{Filter, ReceiptError};
use super::{Receipt, Settings, format_utc_millis, id_floor, millis_ago};

/// Where `narrowgate receipts` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl Source {
    /// Where the gateway with `settings` writes.
    pub fn of(settings: &Settings) -> Source {
        match &settings.url {
            Some(url) => Source::Postgres(url.clone()),
            None => Source::Sqlite(settings.path.clone()),
        }
    }

    /// `--db`'s value: a PostgreSQL URL, or else a SQLite file.
    pub fn named(db: &Path) -> Source {
        match db.to_str() {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Source::Postgres(url.to_string())
            }
            _ => Source::Sqlite(db.to_path_buf()),
        }
    }

    /// The receipts there that match `filter`, oldest first (see [`receipts`]).
    pub fn receipts(&self, filter: &Filter) -> Result<Vec<Receipt>, ReceiptError> {
        match self {
            Source::Sqlite(path) => receipts(path, filter),
            Source::Postgres(url) => super::postgres::receipts(url, filter),
        }
    }
}

impl Source {
    /// Starts summarising this database for the status page's charts, on a thread of its own
    /// (never on a call's path), until the [`Roller`] is dropped.
    pub fn start_rollup(&self) -> Result<Roller, ReceiptError> {
        let source = self.clone();
        Roller::start(self.to_string(), move || source.summarising_store())
    }

    /// A connection that may write summaries (the roll-up's); the schema is the gateway's.
    fn summarising_store(&self) -> Result<Store, ReceiptError> {
        match self {
            Source::Sqlite(path) => {
                let error = |source| ReceiptError::Open {
                    path: path.clone(),
                    source,
                };
                let connection = rusqlite::Connection::open(path).map_err(error)?;
                connection
                    .busy_timeout(std::time::Duration::from_secs(5))
                    .map_err(error)?;
                Ok(Store::Sqlite(connection))
            }
            Source::Postgres(url) => Ok(Store::Postgres(super::postgres::connect(url)?)),
        }
    }

    /// A connection for a window or a summary: never creates or changes anything.
    fn reading_store(&self) -> Result<Store, ReceiptError> {
        match self {
            Source::Sqlite(path) => Ok(Store::Sqlite(open_for_reading(path)?)),
            Source::Postgres(url) => Ok(Store::Postgres(super::postgres::connect(url)?)),
        }
    }

    /// The status page's charts for `window`, ending in the minute of `now_millis`: summaries
    /// where the roll-up has them, raw receipts for the last minutes (see [`traffic`]).
    pub fn traffic(&self, window: Window, now_millis: i64) -> Result<Traffic, ReceiptError> {
        let mut store = self.reading_store()?;
        traffic::read(&mut store, window, now_millis).map_err(|error| ReceiptError::Traffic {
            location: self.to_string(),
            error,
        })
    }

    /// Every receipt written within `since` before now, tallied (`narrowgate receipts
    /// --summary`): read from the raw receipts, not the summaries.
    pub fn tally(&self, since: Duration) -> Result<Minutes, ReceiptError> {
        let mut store = self.reading_store()?;
        store
            .raw(millis_ago(since), None)
            .map_err(|error| ReceiptError::Traffic {
                location: self.to_string(),
                error,
            })
    }
}

impl std::fmt::Display for Source {
    /// The file, or the URL without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Sqlite(path) => write!(f, "{}", path.display()),
            Source::Postgres(url) => f.write_str(&super::postgres::display_url(url)),
        }
    }
}

/// The receipts in the database at `path` that match `filter`, oldest first (the most recent
/// `limit` of them, if set).
pub fn receipts(path: &Path, filter: &Filter) -> Result<Vec<Receipt>, ReceiptError> {
    let connection = open_for_reading(path)?;
    let mut conditions = Vec::new();
    let mut values: Vec<SqlValue> = Vec::new();
    if let Some(tool) = &filter.tool {
        conditions.push("tool = ?");
        values.push(SqlValue::Text(tool.clone()));
    }
    if let Some(caller) = &filter.caller {
        conditions.push("caller = ?");
        values.push(SqlValue::Text(caller.clone()));
    }
    if let Some(outcome) = filter.outcome {
        conditions.push("outcome = ?");
        values.push(SqlValue::Text(outcome.as_str().to_string()));
    }
    if let Some(since) = filter.since {
        // The id range finds the rows through the table's key; `time` makes the cut exact.
        let from = millis_ago(since);
        conditions.push("id >= ?");
        values.push(SqlValue::Text(id_floor(from)));
        conditions.push("time >= ?");
        values.push(SqlValue::Text(format_utc_millis(from)));
    }
    // A database no gateway of this version has opened yet lacks the newer columns: `reason`
    // (version 3), the approval columns (version 4), the recovery columns (version 5).
    let version: i64 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap_or(0);
    let reason = if version >= 3 { "reason" } else { "NULL" };
    let approvals = if version >= 4 {
        "approval_id, approval_decision, approver, approval_wait_ms"
    } else {
        "NULL, NULL, NULL, NULL"
    };
    let recovery = if version >= 5 {
        "error_type, fallback, cached"
    } else {
        "NULL, NULL, NULL"
    };
    let mut sql = format!(
        "SELECT id, time, caller, tool, upstream, upstream_tool, contract_digest, \
         arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments, {reason}, \
         {approvals}, {recovery} FROM receipts",
    );
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
    }
    // Newest first to apply the limit, then turned around: output reads like a log.
    sql.push_str(" ORDER BY id DESC");
    if let Some(limit) = filter.limit {
        sql.push_str(" LIMIT ?");
        values.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
    }
    let read_err = |source| ReceiptError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut statement = connection.prepare(&sql).map_err(read_err)?;
    let rows = statement
        .query_map(rusqlite::params_from_iter(values), |row| {
            let arguments: Option<String> = row.get(13)?;
            // An empty digest is a call without a contract, whose arguments were not digested.
            let arguments_digest: String = row.get(7)?;
            Ok(Receipt {
                id: row.get(0)?,
                time: row.get(1)?,
                caller: row.get(2)?,
                tool: row.get(3)?,
                upstream: row.get(4)?,
                upstream_tool: row.get(5)?,
                contract_digest: row.get(6)?,
                arguments_digest: (!arguments_digest.is_empty()).then_some(arguments_digest),
                outcome: row.get(8)?,
                attempts: row.get(9)?,
                replayed: row.get(10)?,
                duration_ms: row.get(11)?,
                trace_id: row.get(12)?,
                reason: row.get(14)?,
                // Written by the gateway as JSON; anything else is shown as a string.
                arguments: arguments.map(|text| {
                    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
                }),
                approval_id: row.get(15)?,
                approval_decision: row.get(16)?,
                approver: row.get(17)?,
                approval_wait_ms: row.get(18)?,
                error_type: row.get(19)?,
                fallback: row.get(20)?,
                cached: row.get::<_, Option<bool>>(21)?.unwrap_or(false),
            })
        })
        .map_err(read_err)?;
    let mut receipts = rows.collect::<Result<Vec<_>, _>>().map_err(read_err)?;
    receipts.reverse();
    Ok(receipts)
}
