//! Child processes the tests run besides the gateway (Python and Node peers, collectors): run
//! one to its end within a deadline, or start one with its output in a log file and wait until
//! it listens. A hung peer fails its test with what it printed instead of hanging the suite.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::wait::{POLL_EVERY, wait_until};

/// What a finished child process left behind.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// stdout as one JSON value, else a panic showing both streams.
    pub fn json(&self) -> Value {
        let parsed = serde_json::from_str(self.stdout.trim());
        parsed.unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e}): {}\n{}", self.stdout, self.stderr)
        })
    }
}

/// Runs `cmd` to completion (stdin closed), killing it and panicking after `within`.
#[track_caller]
pub fn run(cmd: &mut Command, within: Duration) -> Ran {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(POLL_EVERY);
    };
    let ran = Ran {
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    assert!(
        status.is_some(),
        "{what} did not finish within {within:?}\nstdout: {}\nstderr: {}",
        ran.stdout,
        ran.stderr
    );
    ran
}

/// Reads a child's pipe to the end on a thread, so a chatty child never blocks on a full pipe.
pub fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Starts `command` with stdout and stderr both in the file `log`.
pub fn spawn_logged(command: &mut Command, log: &Path, what: &str) -> Child {
    let file = std::fs::File::create(log).expect("log file");
    let stderr = file.try_clone().expect("log file");
    command
        .stdout(file)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

/// Waits until `port` accepts connections, or panics with `log` once `child` exited or 30 s
/// have passed.
#[track_caller]
pub fn wait_listening(port: u16, child: &mut Child, what: &str, log: &Path) {
    let log_text = || std::fs::read_to_string(log).unwrap_or_default();
    wait_until(
        Duration::from_secs(30),
        &format!("{what} listening on {port}"),
        || {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{what} exited ({status}) before listening on {port}:\n{}",
                    log_text()
                );
            }
            Err(format!("log:\n{}", log_text()))
        },
    );
}
