//! Shared harness of the integration tests: start the real `narrowgate` binary on a config written
//! to a temporary folder, start the repository's demo upstream (and a real `redis-server` for
//! `state: redis://…`), talk MCP to it (with rmcp's client, or raw over HTTP), read receipts back,
//! run third-party peers, and wait for conditions without sleeping.
//!
//! One module per concern; everything is re-exported here, so a test file writes
//! `common::Gateway`, `common::call`, ... whichever module it lives in:
//! - [`config`]: API keys, `callers:` blocks, the demo upstream's stdio config, config folders;
//! - [`contracts`]: contract YAML several files declare the same way;
//! - [`gateway`]: `narrowgate serve` as a child process, and waiting on its `/readyz` and log;
//! - [`upstream`]: the demo upstream as a program (stdio path, Streamable HTTP instance);
//! - [`raw`]: MCP over plain HTTP, and a dependency-free GET;
//! - [`mcp`]: rmcp's client through the gateway, and the demo upstream's counters;
//! - [`receipts`]: `narrowgate receipts` as an operator runs it;
//! - [`process`]: other child processes, run within a deadline or waited on until they listen;
//! - [`peers`]: the third-party peers in `.peers/` and the Python SDK client drivers;
//! - `hostile`: the hostile upstream (`tests/hostile`), on stdio or Streamable HTTP;
//! - [`wait`]: polling a condition with a deadline, instead of sleeping;
//! - `nginx`: docker/nginx.conf in front of gateway replicas, with Debian's nginx;
//! - `pg`: a private PostgreSQL server (`initdb` + `postgres` in a temporary folder);
//! - `redis`: free ports and a real `redis-server` (std only: `src/` unit tests include it).
#![allow(dead_code)] // each test crate uses a part of it

pub mod config;
pub mod contracts;
pub mod gateway;
mod hostile;
pub mod mcp;
mod nginx;
pub mod peers;
mod pg;
pub mod process;
pub mod raw;
pub mod receipts;
mod redis;
pub mod upstream;
pub mod wait;

#[allow(unused_imports)]
pub use config::{BOB, CAROL, ConfigDir, KEY, callers, demo_stdio_config, hash_key};
#[allow(unused_imports)]
pub use contracts::{BAD_WEATHER_TOOL, contract_file, counter_tool, echo_tool, slow_tool};
#[allow(unused_imports)]
pub use gateway::Gateway;
#[allow(unused_imports)] // each test crate uses a part of them
pub use hostile::{
    HostileHttp, hostile_stdio_upstream, hostile_upstream_bin, recorded, recorded_requests,
};
#[allow(unused_imports)]
pub use mcp::{
    UpstreamCounts, assert_same_structured_content, call, call_answered, call_ok, client,
    concurrent_calls, counter, listening, published_output, structured_u64, text_of, tool_names,
    tool_params, upstream_counts, wait_for_counts, without_error_types,
};
#[allow(unused_imports)]
pub use nginx::Nginx;
#[allow(unused_imports)]
pub use pg::{PG_USER, Postgres};
#[allow(unused_imports)]
pub use raw::{
    Raw, Reply, http_get, initialize_body, result_text, sorted_tool_names, stateless_call_body,
    stateless_call_headers,
};
#[allow(unused_imports)]
pub use receipts::{receipts_command, receipts_json};
#[allow(unused_imports)]
pub use redis::{Redis, free_port};
#[allow(unused_imports)]
pub use upstream::{HttpUpstream, demo_upstream_bin};
#[allow(unused_imports)]
pub use wait::{POLL_EVERY, judged, wait_for_value, wait_until, wait_until_async};

use std::time::Duration;

/// The `narrowgate` binary the tests run: `NARROWGATE_TEST_BIN` when set (a target directory
/// shared by several checkouts holds whichever one built last under `debug/narrowgate`), else
/// cargo's.
pub fn narrowgate_bin() -> std::path::PathBuf {
    std::env::var_os("NARROWGATE_TEST_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_narrowgate").into())
}

/// Runs `attempt` every `pause` until it returns `Ok`, and returns that; once `within` has passed,
/// panics saying `what` did not happen, with the last attempt's `Err` and the gateway's log.
pub async fn retry_until<T>(
    gw: &Gateway,
    within: Duration,
    pause: Duration,
    what: &str,
    attempt: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    wait_until_async(
        within,
        pause,
        what,
        || format!("log:\n{}", gw.log()),
        attempt,
    )
    .await
}
