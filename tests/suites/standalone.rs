//! The integration tests that need nothing outside the repository: the gateway in front of its own demo and hostile upstreams.
//!
//! One test binary per kind of outside peer: each compiles the shared helpers (`tests/common`) once.

#[path = "../caching.rs"]
mod caching;
#[path = "../common/mod.rs"]
mod common;
#[path = "../execution.rs"]
mod execution;
#[path = "../fixed.rs"]
mod fixed;
#[path = "../grafana.rs"]
mod grafana;
#[path = "../hardening.rs"]
mod hardening;
#[path = "../limits.rs"]
mod limits;
#[path = "../receipts.rs"]
mod receipts;
#[path = "../reload.rs"]
mod reload;
#[path = "../schemas.rs"]
mod schemas;
#[path = "../search_replicas.rs"]
mod search_replicas;
#[path = "../stdio.rs"]
mod stdio;
#[path = "../upstream_abuse.rs"]
mod upstream_abuse;
#[path = "../upstream_text.rs"]
mod upstream_text;
