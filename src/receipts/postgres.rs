//! Receipts in PostgreSQL (`receipts.url: postgres://…`), shared by every replica of the gateway.
//!
//! Same rows, same guarantees as the SQLite store: the writer thread of [`super::store`] commits
//! each batch of queued receipts with one statement (an `INSERT … SELECT FROM unnest(…)` of the
//! whole batch: one round trip, one transaction) before any of their calls is answered, and
//! PostgreSQL's default `synchronous_commit = on` has the batch in its write-ahead log on disk by
//! then. The synchronous `postgres` client runs its own small runtime, so it is only ever used on
//! a plain thread: the writer thread, a scoped thread at start-up, or the `narrowgate receipts`
//! command (which has no runtime).
//!
//! The gateway owns its schema: `narrowgate_schema_version` holds the version, and [`MIGRATIONS`]
//! bring an older database up to [`SCHEMA_VERSION`] in one transaction, under an advisory lock so
//! that replicas starting together migrate once.

use std::str::FromStr;
use std::time::Duration;

use postgres::{Client, NoTls, Statement};

use super::Filter;
use super::ReceiptError;
use super::{Receipt, format_utc_millis, id_floor, millis_ago};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i32 = 6;

/// `MIGRATIONS[v]` brings a database at version `v` to `v + 1` (0: no tables yet).
pub const MIGRATIONS: [&str; SCHEMA_VERSION as usize] = [
    // 1: the table, keyed by the receipt id (a UUIDv7: the key serves `--since`, retention and
    // newest-first order, as in SQLite).
    "CREATE TABLE receipts (
        id               text PRIMARY KEY,
        time             text NOT NULL,
        caller           text NOT NULL,
        tool             text NOT NULL,
        upstream         text,
        upstream_tool    text,
        contract_digest  text,
        arguments_digest text NOT NULL,
        outcome          text NOT NULL,
        attempts         bigint NOT NULL,
        replayed         boolean NOT NULL,
        duration_ms      double precision NOT NULL,
        trace_id         text,
        arguments        jsonb
    );",
    // 2: a table shared by many replicas grows large: the `--tool` and `--caller` filters (the
    // commonest) find their rows through an index, newest first.
    "CREATE INDEX receipts_tool_id ON receipts (tool, id);
     CREATE INDEX receipts_caller_id ON receipts (caller, id);",
    // 3: why a call was denied (the `when` precondition that refused it), as in SQLite.
    "ALTER TABLE receipts ADD COLUMN reason text;",
    // 4: how a call's approval went (`approval: user | approver`), as in SQLite.
    "ALTER TABLE receipts ADD COLUMN approval_id text;
     ALTER TABLE receipts ADD COLUMN approval_decision text;
     ALTER TABLE receipts ADD COLUMN approver text;
     ALTER TABLE receipts ADD COLUMN approval_wait_ms double precision;",
    // 5: the typed error, the fallback taken after a failure, and cache hits, as in SQLite.
    "ALTER TABLE receipts ADD COLUMN error_type text;
     ALTER TABLE receipts ADD COLUMN fallback text;
     ALTER TABLE receipts ADD COLUMN cached boolean;",
    // 6: the per-minute and per-quarter-hour summaries the status page's charts read, and how far
    // they go (`traffic::rollup`).
    "CREATE TABLE receipt_minutes (
         minute   bigint NOT NULL,
         tool     text NOT NULL,
         upstream text NOT NULL,
         outcome  text NOT NULL,
         calls    bigint NOT NULL,
         latency  text NOT NULL,
         PRIMARY KEY (minute, tool, upstream, outcome)
     );
     CREATE TABLE receipt_quarters (
         minute   bigint NOT NULL,
         tool     text NOT NULL,
         upstream text NOT NULL,
         outcome  text NOT NULL,
         calls    bigint NOT NULL,
         latency  text NOT NULL,
         PRIMARY KEY (minute, tool, upstream, outcome)
     );
     CREATE TABLE receipt_minutes_done (
         id    integer PRIMARY KEY CHECK (id = 0),
         until bigint NOT NULL
     );",
];

/// Held while migrating (`pg_advisory_xact_lock`): any fixed number unlikely to collide.
const MIGRATION_LOCK: i64 = 0x6e61_7272_6f77; // "narrow"
/// How long a connection attempt may take before the gateway reports the database unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

const INSERT: &str = "INSERT INTO receipts (id, time, caller, tool, upstream, upstream_tool, \
    contract_digest, arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments, \
    reason, approval_id, approval_decision, approver, approval_wait_ms, error_type, fallback, cached) \
    SELECT id, time, caller, tool, upstream, upstream_tool, contract_digest, arguments_digest, \
    outcome, attempts, replayed, duration_ms, trace_id, arguments::jsonb, reason, approval_id, \
    approval_decision, approver, approval_wait_ms, error_type, fallback, cached FROM unnest(\
    $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], \
    $8::text[], $9::text[], $10::int8[], $11::bool[], $12::float8[], $13::text[], $14::text[], \
    $15::text[], $16::text[], $17::text[], $18::text[], $19::float8[], $20::text[], $21::text[], \
    $22::bool[]) \
    AS t(id, time, caller, tool, upstream, upstream_tool, contract_digest, arguments_digest, \
    outcome, attempts, replayed, duration_ms, trace_id, arguments, reason, approval_id, \
    approval_decision, approver, approval_wait_ms, error_type, fallback, cached) \
    ON CONFLICT (id) DO NOTHING";

/// `url` without its password, for messages and logs.
pub fn display_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// A connection for the writer thread: reconnects when PostgreSQL closed it (a restart, a
/// failover), so one outage costs the receipts written during it, not every later one.
pub struct PgWriter {
    config: postgres::Config,
    client: Option<(Client, Statement)>,
    location: String,
}

impl PgWriter {
    /// Connects to `url` and creates or migrates the schema. Called from the gateway's runtime at
    /// start-up: the work runs on a scoped thread of its own (the client blocks on a runtime).
    pub fn open(url: &str) -> Result<PgWriter, ReceiptError> {
        let location = display_url(url);
        let error = |source| ReceiptError::Postgres {
            url: location.clone(),
            source,
        };
        let mut config = postgres::Config::from_str(url).map_err(error)?;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("narrowgate");
        let connected = std::thread::scope(|s| {
            s.spawn(|| -> Result<(Client, Statement), ReceiptError> {
                let mut client = config.connect(NoTls).map_err(error)?;
                migrate(&mut client, &location)?;
                let insert = client.prepare(INSERT).map_err(error)?;
                Ok((client, insert))
            })
            .join()
        });
        let client = match connected {
            Ok(result) => result?,
            Err(_) => {
                return Err(ReceiptError::Thread(std::io::Error::other(
                    "the PostgreSQL connection thread panicked",
                )));
            }
        };
        Ok(PgWriter {
            config,
            client: Some(client),
            location,
        })
    }

    /// The database, without its password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The open connection, reconnecting first if it was lost.
    fn client(&mut self) -> Result<&mut (Client, Statement), postgres::Error> {
        let open = match self.client.take() {
            Some(open) if !open.0.is_closed() => open,
            _ => {
                let mut client = self.config.connect(NoTls)?;
                let insert = client.prepare(INSERT)?;
                tracing::info!(url = %self.location, "connected to the receipts database again");
                (client, insert)
            }
        };
        Ok(self.client.insert(open))
    }

    /// Inserts `receipts` in one statement (so one transaction). A connection found broken (the
    /// server restarted, a failover) is opened again and the batch sent once more: ids are unique,
    /// so a batch that was committed before the connection broke is not written twice.
    pub fn insert(&mut self, receipts: &[&Receipt]) -> Result<(), postgres::Error> {
        match self.insert_once(receipts) {
            Err(e) if e.is_closed() || self.client.as_ref().is_some_and(|(c, _)| c.is_closed()) => {
                tracing::warn!(url = %self.location, error = %e, "the receipts database connection broke; reconnecting");
                self.client = None;
                self.insert_once(receipts)
            }
            result => result,
        }
    }

    fn insert_once(&mut self, receipts: &[&Receipt]) -> Result<(), postgres::Error> {
        let column = |f: fn(&Receipt) -> Option<String>| receipts.iter().map(|r| f(r)).collect();
        let ids: Vec<Option<String>> = column(|r| Some(r.id.clone()));
        let times: Vec<Option<String>> = column(|r| Some(r.time.clone()));
        let callers: Vec<Option<String>> = column(|r| Some(r.caller.clone()));
        let tools: Vec<Option<String>> = column(|r| Some(r.tool.clone()));
        let upstreams: Vec<Option<String>> = column(|r| r.upstream.clone());
        let upstream_tools: Vec<Option<String>> = column(|r| r.upstream_tool.clone());
        let contracts: Vec<Option<String>> = column(|r| r.contract_digest.clone());
        // A call without a contract has no digest: stored empty, as the SQLite store does.
        let digests: Vec<Option<String>> =
            column(|r| Some(r.arguments_digest.clone().unwrap_or_default()));
        let outcomes: Vec<Option<String>> = column(|r| Some(r.outcome.clone()));
        let attempts: Vec<i64> = receipts.iter().map(|r| i64::from(r.attempts)).collect();
        let replayed: Vec<bool> = receipts.iter().map(|r| r.replayed).collect();
        let durations: Vec<f64> = receipts.iter().map(|r| r.duration_ms).collect();
        let traces: Vec<Option<String>> = column(|r| r.trace_id.clone());
        let arguments: Vec<Option<String>> =
            column(|r| r.arguments.as_ref().map(|a| a.to_string()));
        let reasons: Vec<Option<String>> = column(|r| r.reason.clone());
        let approval_ids: Vec<Option<String>> = column(|r| r.approval_id.clone());
        let decisions: Vec<Option<String>> = column(|r| r.approval_decision.clone());
        let approvers: Vec<Option<String>> = column(|r| r.approver.clone());
        let waits: Vec<Option<f64>> = receipts.iter().map(|r| r.approval_wait_ms).collect();
        let error_types: Vec<Option<String>> = column(|r| r.error_type.clone());
        let fallbacks: Vec<Option<String>> = column(|r| r.fallback.clone());
        let cached: Vec<bool> = receipts.iter().map(|r| r.cached).collect();
        let (client, insert) = self.client()?;
        let result = client.execute(
            &*insert,
            &[
                &ids,
                &times,
                &callers,
                &tools,
                &upstreams,
                &upstream_tools,
                &contracts,
                &digests,
                &outcomes,
                &attempts,
                &replayed,
                &durations,
                &traces,
                &arguments,
                &reasons,
                &approval_ids,
                &decisions,
                &approvers,
                &waits,
                &error_types,
                &fallbacks,
                &cached,
            ],
        );
        result.map(drop)
    }

    /// Deletes up to `chunk` receipts older than `retention`; how many it deleted.
    pub fn prune(&mut self, retention: Duration, chunk: usize) -> Result<u64, postgres::Error> {
        let cutoff = id_floor(millis_ago(retention));
        let (client, _) = self.client()?;
        client.execute(
            "DELETE FROM receipts WHERE id IN \
             (SELECT id FROM receipts WHERE id < $1 ORDER BY id LIMIT $2)",
            &[&cutoff, &i64::try_from(chunk).unwrap_or(i64::MAX)],
        )
    }
}

impl Drop for PgWriter {
    /// The client owns a runtime, which may not be dropped inside the gateway's: when that is
    /// where the last handle goes, the client is closed on a thread of its own.
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let _ = std::thread::Builder::new()
                .name("receipts-close".into())
                .spawn(move || drop(client));
        }
    }
}

/// Creates the tables, or brings them from an older version, in one transaction.
fn migrate(client: &mut Client, location: &str) -> Result<(), ReceiptError> {
    let error = |source| ReceiptError::Postgres {
        url: location.to_string(),
        source,
    };
    let mut transaction = client.transaction().map_err(error)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(error)?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS narrowgate_schema_version (version integer NOT NULL)",
        )
        .map_err(error)?;
    let found: i32 = transaction
        .query_one(
            "SELECT coalesce(max(version), 0) FROM narrowgate_schema_version",
            &[],
        )
        .map_err(error)?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(ReceiptError::NewerPostgresSchema {
            url: location.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (version, step) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        transaction.batch_execute(step).map_err(error)?;
        tracing::info!(url = %location, "receipts schema migrated to version {}", version + 1);
    }
    transaction
        .batch_execute("DELETE FROM narrowgate_schema_version")
        .map_err(error)?;
    transaction
        .execute(
            "INSERT INTO narrowgate_schema_version (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .map_err(error)?;
    transaction.commit().map_err(error)
}

/// A connection for a reader (`narrowgate receipts`, the status page, the roll-up), with the
/// writer's connection timeout.
pub fn connect(url: &str) -> Result<Client, ReceiptError> {
    let error = |source| ReceiptError::Postgres {
        url: display_url(url),
        source,
    };
    let mut config = postgres::Config::from_str(url).map_err(error)?;
    config.connect_timeout(CONNECT_TIMEOUT);
    config.application_name("narrowgate");
    config.connect(NoTls).map_err(error)
}

/// The receipts at `url` that match `filter`, oldest first (the most recent `limit` of them, if
/// set), for `narrowgate receipts`. Never creates or changes anything.
pub fn receipts(url: &str, filter: &Filter) -> Result<Vec<Receipt>, ReceiptError> {
    let location = display_url(url);
    let error = |source| ReceiptError::Postgres {
        url: location.clone(),
        source,
    };
    let mut client = connect(url)?;
    let version: Option<i32> = client
        .query_one(
            "SELECT CASE WHEN to_regclass('narrowgate_schema_version') IS NULL THEN NULL \
             ELSE (SELECT max(version) FROM narrowgate_schema_version) END",
            &[],
        )
        .map_err(error)?
        .get(0);
    let found = match version {
        None => return Err(ReceiptError::MissingPostgres { url: location }),
        Some(found) if found > SCHEMA_VERSION => {
            return Err(ReceiptError::NewerPostgresSchema {
                url: location,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        Some(found) => found,
    };
    let mut conditions: Vec<String> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut condition = |column: &str, op: &str, value: String| {
        texts.push(value);
        conditions.push(format!("{column} {op} ${}", texts.len()));
    };
    if let Some(tool) = &filter.tool {
        condition("tool", "=", tool.clone());
    }
    if let Some(caller) = &filter.caller {
        condition("caller", "=", caller.clone());
    }
    if let Some(outcome) = filter.outcome {
        condition("outcome", "=", outcome.as_str().to_string());
    }
    if let Some(since) = filter.since {
        let from = millis_ago(since);
        condition("id", ">=", id_floor(from));
        condition("time", ">=", format_utc_millis(from));
    }
    // A database no gateway of this version has migrated yet lacks the newer columns.
    let reason = if found >= 3 { "reason" } else { "NULL::text" };
    let approvals = if found >= 4 {
        "approval_id, approval_decision, approver, approval_wait_ms"
    } else {
        "NULL::text, NULL::text, NULL::text, NULL::float8"
    };
    let recovery = if found >= 5 {
        "error_type, fallback, cached"
    } else {
        "NULL::text, NULL::text, NULL::boolean"
    };
    let mut sql = format!(
        "SELECT id, time, caller, tool, upstream, upstream_tool, contract_digest, \
         arguments_digest, outcome, attempts, replayed, duration_ms, trace_id, arguments::text, \
         {reason}, {approvals}, {recovery} FROM receipts",
    );
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
    }
    sql.push_str(" ORDER BY id DESC");
    let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> = texts
        .iter()
        .map(|t| t as &(dyn postgres::types::ToSql + Sync))
        .collect();
    if let Some(limit) = &limit {
        sql.push_str(&format!(" LIMIT ${}", params.len() + 1));
        params.push(limit);
    }
    let rows = client.query(&sql, &params).map_err(error)?;
    let mut receipts = Vec::with_capacity(rows.len());
    for row in rows {
        let read = || -> Result<Receipt, postgres::Error> {
            let attempts: i64 = row.try_get(9)?;
            let arguments: Option<String> = row.try_get(13)?;
            Ok(Receipt {
                id: row.try_get(0)?,
                time: row.try_get(1)?,
                caller: row.try_get(2)?,
                tool: row.try_get(3)?,
                upstream: row.try_get(4)?,
                upstream_tool: row.try_get(5)?,
                contract_digest: row.try_get(6)?,
                arguments_digest: Some(row.try_get::<_, String>(7)?).filter(|d| !d.is_empty()),
                outcome: row.try_get(8)?,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                replayed: row.try_get(10)?,
                duration_ms: row.try_get(11)?,
                trace_id: row.try_get(12)?,
                arguments: arguments.map(|text| {
                    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
                }),
                reason: row.try_get(14)?,
                approval_id: row.try_get(15)?,
                approval_decision: row.try_get(16)?,
                approver: row.try_get(17)?,
                approval_wait_ms: row.try_get(18)?,
                error_type: row.try_get(19)?,
                fallback: row.try_get(20)?,
                cached: row.try_get::<_, Option<bool>>(21)?.unwrap_or(false),
            })
        };
        receipts.push(read().map_err(error)?);
    }
    receipts.reverse();
    Ok(receipts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            display_url("postgres://gw:s3cret@db:5432/receipts?sslmode=disable"),
            "postgres://gw@db:5432/receipts?sslmode=disable"
        );
        assert_eq!(
            display_url("postgresql://db/receipts"),
            "postgresql://db/receipts"
        );
        assert_eq!(
            display_url("postgres://gw@%2Frun%2Fpg/r"),
            "postgres://gw@%2Frun%2Fpg/r"
        );
    }
}
