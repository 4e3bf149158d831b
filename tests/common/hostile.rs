//! Starting the hostile upstream (`tests/hostile`, `--attack NAME`): as a stdio upstream in a
//! gateway's config, or serving Streamable HTTP; and reading what it recorded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The hostile upstream built from `tests/hostile` (a binary of the package, built by cargo
/// before the integration tests).
pub fn hostile_upstream_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hostile-upstream"))
}

/// The arguments after the transport: each attack, then `--record FILE`, then `extra`.
fn arguments(attacks: &[&str], record: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = Vec::new();
    for attack in attacks {
        args.extend(["--attack".to_string(), attack.to_string()]);
    }
    args.extend(["--record".to_string(), record.display().to_string()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// An `upstreams:` entry (YAML, indented under `upstreams:`) running the hostile upstream over
/// stdio as `name`, with `attacks` and `extra` arguments, recording to `record`.
pub fn hostile_stdio_upstream(
    name: &str,
    attacks: &[&str],
    record: &Path,
    extra: &[&str],
) -> String {
    let mut args = vec!["stdio".to_string()];
    args.extend(arguments(attacks, record, extra));
    let args = serde_json::to_string(&args).expect("arguments serialize");
    format!(
        "  {name}:\n    command: {}\n    args: {args}\n",
        hostile_upstream_bin().display()
    )
}

/// The hostile upstream serving Streamable HTTP on a free port, killed on drop.
pub struct HostileHttp {
    child: Child,
    pub url: String,
}

impl HostileHttp {
    /// Starts it with `attacks` and `extra` arguments, recording to `record`, and waits for its
    /// `listening on` line.
    pub fn start(attacks: &[&str], record: &Path, extra: &[&str]) -> HostileHttp {
        let mut child = Command::new(hostile_upstream_bin())
            .args(["http", "--port", "0"])
            .args(arguments(attacks, record, extra))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hostile-upstream http");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from hostile-upstream: {line:?}"))
            .to_string();
        HostileHttp { child, url }
    }

    /// An `upstreams:` entry (YAML, indented under `upstreams:`) for it as `name`.
    pub fn config(&self, name: &str) -> String {
        format!("  {name}:\n    url: {}\n", self.url)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HostileHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The messages the hostile upstream recorded in `record` so far (a line being written is
/// skipped).
pub fn recorded(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// How many requests of `method` the hostile upstream recorded in `record`.
pub fn recorded_requests(record: &Path, method: &str) -> usize {
    recorded(record)
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .count()
}
