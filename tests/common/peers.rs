//! Paths to the real third-party MCP peers that `tests/setup-peers.sh` installs into `.peers/`,
//! and the Python SDK client drivers of `tests/clients/` run against the gateway.
//!
//! Each function panics with a pointer to the setup script when its peer is missing: tests never
//! skip silently.
#![allow(dead_code)] // each test crate uses only some of these

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::process::run;

/// The repository root (the crate's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `<repo>/.peers`, where `tests/setup-peers.sh` installs the peers.
pub fn peers_dir() -> PathBuf {
    repo_root().join(".peers")
}

/// An npm peer's executable: `mcp-server-everything`, `mcp-server-filesystem`, `mcp-inspector` or
/// `mcp-server-basic-vanillajs` (an MCP Apps example).
pub fn node_bin(name: &str) -> PathBuf {
    existing(name, peers_dir().join("node/node_modules/.bin").join(name))
}

/// The Python of the venv with the `mcp` 2.3.0 SDK (runs `py_client_script("py2_client.py")`).
pub fn py2_python() -> PathBuf {
    existing(
        "python (mcp 2.3.0 venv)",
        peers_dir().join("py2/bin/python"),
    )
}

/// The Python of the venv with the `mcp` 1.30.0 SDK (runs `py_client_script("py1_client.py")`).
pub fn py1_python() -> PathBuf {
    existing(
        "python (mcp 1.30.0 venv)",
        peers_dir().join("py1/bin/python"),
    )
}

/// The `mcp-server-time` stdio MCP server (PyPI `mcp-server-time`, in the py2 venv).
pub fn mcp_server_time() -> PathBuf {
    existing(
        "mcp-server-time",
        peers_dir().join("py2/bin/mcp-server-time"),
    )
}

/// A client script in `tests/clients/`, e.g. `py_client_script("py2_client.py")`.
pub fn py_client_script(name: &str) -> PathBuf {
    let path = repo_root().join("tests/clients").join(name);
    assert!(
        path.is_file(),
        "client script '{name}' is missing at {}",
        path.display()
    );
    path
}

/// Returns `path` if it exists, else panics naming the peer and how to install it.
fn existing(peer: &str, path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "peer '{peer}' is missing at {}: run tests/setup-peers.sh (or tests/run.sh, which runs it)",
        path.display()
    );
    path
}

/// Bounds every client run: a hung peer fails the test instead of hanging it.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(90);

/// One of the Python SDK drivers in `tests/clients/`, run against a gateway's URL.
#[derive(Clone, Copy)]
pub enum PyClient {
    /// `mcp` 2.3.0; the mode is `auto` (2026-07-28 `server/discover` first) or `legacy`.
    V2(&'static str),
    /// `mcp` 1.30.0 (always `initialize` at 2025-11-25).
    V1,
}

impl PyClient {
    /// Runs `steps` (see `tests/clients/steps_common.py`) with `key` (`-`: no Authorization
    /// header) within [`CLIENT_DEADLINE`]; asserts it exits 0 and returns what it printed.
    pub fn run(self, url: &str, key: &str, steps: &Value) -> Value {
        let (python, script, mode) = match self {
            PyClient::V2(mode) => (py2_python(), py_client_script("py2_client.py"), mode),
            PyClient::V1 => (py1_python(), py_client_script("py1_client.py"), "legacy"),
        };
        let ran = run(
            Command::new(python)
                .arg(script)
                .args([url, key, mode, &steps.to_string()])
                .env("PY_CLIENT_TIMEOUT", "20"),
            CLIENT_DEADLINE,
        );
        assert_eq!(ran.code, Some(0), "client failed: {}", ran.stderr);
        ran.json()
    }
}

/// Runs `tests/clients/ts_client.mjs` (the official TypeScript SDK, `@modelcontextprotocol/sdk`
/// 1.32.2 in `.peers/node`) against `url` with `key` (`-`: no Authorization header) and `options`
/// (`{"steps": [...], "capabilities": {...}}`, see the script) within [`CLIENT_DEADLINE`]; asserts
/// it exits 0 and returns what it printed.
pub fn ts_client(url: &str, key: &str, options: &Value) -> Value {
    let node_dir = peers_dir().join("node");
    existing(
        "@modelcontextprotocol/sdk",
        node_dir.join("node_modules/@modelcontextprotocol/sdk/package.json"),
    );
    let ran = run(
        Command::new("node")
            .arg(py_client_script("ts_client.mjs"))
            .arg(&node_dir)
            .args([url, key, &options.to_string()])
            .env("TS_CLIENT_TIMEOUT", "20"),
        CLIENT_DEADLINE,
    );
    assert_eq!(
        ran.code,
        Some(0),
        "TypeScript client failed: {}",
        ran.stderr
    );
    ran.json()
}
