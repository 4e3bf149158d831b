//! Why the receipts database cannot be opened, read or written: one type for every backend.

use std::path::PathBuf;

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
         understands ({supported}): upgrade narrowgate or point receipts.path elsewhere"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
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
    #[error(
        "the receipts database {url} (PostgreSQL): {} \
         (check receipts.url in the configuration, that PostgreSQL is running and reachable, and \
         the user's rights on the database)",
        postgres_detail(source)
    )]
    Postgres {
        url: String,
        source: postgres::Error,
    },
    #[error(
        "the receipts database {url} has schema version {found}, newer than this narrowgate \
         understands ({supported}): upgrade narrowgate or point receipts.url elsewhere"
    )]
    NewerPostgresSchema {
        url: String,
        found: i32,
        supported: i32,
    },
    #[error(
        "there are no receipts in {url}: the gateway creates its tables there when it starts \
         with receipts.url set to it"
    )]
    MissingPostgres { url: String },
    #[error(
        "cannot read the traffic of {location} (status page charts, `receipts --summary`): {error}"
    )]
    Traffic { location: String, error: String },
}

/// A PostgreSQL error with the server's own words: the client's `Display` says only "db error".
fn postgres_detail(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => error.to_string(),
    }
}
