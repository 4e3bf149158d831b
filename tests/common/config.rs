//! The configurations the tests start the gateway (or run its commands) on: callers with known
//! API keys, the demo upstream over stdio, and a folder holding `narrowgate.yaml` and its
//! `contracts/`. One place writes them, so `Gateway` and the `check`/`init` tests lay files out
//! alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::upstream::demo_upstream_bin;

/// The API key every test config gives its main caller, `alice`.
pub const KEY: &str = "test-key-alice";
/// A second caller's API key (the tests name this caller `bob`).
pub const BOB: &str = "test-key-bob";
/// A third caller's API key (the tests name this caller `carol`).
pub const CAROL: &str = "test-key-carol";

/// `sha256(key)` in hex, as `api_key_sha256` wants it (computed by the binary itself).
pub fn hash_key(key: &str) -> String {
    let out = Command::new(super::narrowgate_bin())
        .args(["hash-key", key])
        .output()
        .expect("run narrowgate hash-key");
    assert!(out.status.success(), "hash-key failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A `callers:` block: `alice` (key [`KEY`]) may call every tool, then each `(name, key, tools)`
/// of `others`, `tools` a YAML list such as `[echo]`.
pub fn callers(others: &[(&str, &str, &str)]) -> String {
    let mut text = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n",
        hash_key(KEY)
    );
    for (name, key, tools) in others {
        text.push_str(&format!(
            "  - name: {name}\n    api_key_sha256: {}\n    tools: {tools}\n",
            hash_key(key)
        ));
    }
    text
}

/// A config (without `contracts:`) with the demo upstream over stdio as `demo`, then `callers`
/// and `extra`.
pub fn demo_stdio_config(callers: &str, extra: &str) -> String {
    format!(
        "upstreams:\n  demo:\n    command: {}\n    args: [stdio]\n{callers}{extra}",
        demo_upstream_bin().display()
    )
}

/// A temporary folder holding `narrowgate.yaml` (`contracts: contracts` then the given YAML) and
/// a `contracts/` folder of contract files; removed on drop.
pub struct ConfigDir {
    pub dir: tempfile::TempDir,
}

impl ConfigDir {
    /// `config` is the YAML after `contracts: contracts`; `contracts` are (file name, YAML).
    pub fn new(config: &str, contracts: &[(&str, &str)]) -> ConfigDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("contracts")).expect("contracts dir");
        let setup = ConfigDir { dir };
        setup.write(
            "narrowgate.yaml",
            &format!("contracts: contracts\n{config}"),
        );
        for (file, text) in contracts {
            setup.contract(file, text);
        }
        setup
    }

    /// Writes (or replaces) the contract file `contracts/FILE`.
    pub fn contract(&self, file: &str, text: &str) {
        self.write(&format!("contracts/{file}"), text);
    }

    /// Writes (or replaces) the file at `relative` inside the folder.
    pub fn write(&self, relative: &str, text: &str) {
        let path = self.path().join(relative);
        std::fs::write(&path, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Its `narrowgate.yaml`.
    pub fn config(&self) -> PathBuf {
        self.path().join("narrowgate.yaml")
    }
}
