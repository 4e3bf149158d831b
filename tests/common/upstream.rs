//! The repository's demo upstream (`tests/upstream`, the package's `demo-upstream` binary) as a
//! program: its path for stdio configs, and a Streamable HTTP instance that says when it listens.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The demo upstream built from `tests/upstream`: cargo builds the package's binaries before
/// its integration tests and says where.
pub fn demo_upstream_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_demo-upstream"))
}

/// The demo upstream serving Streamable HTTP on a free port, killed on drop.
pub struct HttpUpstream {
    child: Child,
    pub url: String,
}

impl HttpUpstream {
    pub fn start(extra_args: &[&str]) -> HttpUpstream {
        HttpUpstream::start_at(0, extra_args)
    }

    /// Like [`start`](Self::start) on a given port (0: any free port). Returns once the upstream
    /// has printed its `listening on URL` line: the socket is bound, no polling needed.
    pub fn start_at(port: u16, extra_args: &[&str]) -> HttpUpstream {
        let mut child = Command::new(demo_upstream_bin())
            .args(["http", "--port", &port.to_string()])
            .args(extra_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start demo-upstream http");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from demo-upstream: {line:?}"))
            .to_string();
        HttpUpstream { child, url }
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
