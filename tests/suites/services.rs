//! The integration tests with the services a fleet runs beside the gateway: Redis, PostgreSQL, nginx and Chromium (and SDK clients where a test needs one).
//!
//! One test binary per kind of outside peer: each compiles the shared helpers (`tests/common`) once.

#[path = "../approvals.rs"]
mod approvals;
#[path = "../common/mod.rs"]
mod common;
#[path = "../dedupe_shared.rs"]
mod dedupe_shared;
#[path = "../fleet.rs"]
mod fleet;
#[path = "../idempotency.rs"]
mod idempotency;
#[path = "../identity.rs"]
mod identity;
#[path = "../nginx.rs"]
mod nginx;
#[allow(dead_code)] // the OTLP collector; each test uses a part of it
#[path = "../otel/mod.rs"]
mod otel;
#[path = "../receipts_postgres.rs"]
mod receipts_postgres;
#[path = "../relays.rs"]
mod relays;
#[path = "../status.rs"]
mod status;
