//! The real `narrowgate serve` as a child process on a config written to a temporary folder,
//! with what tests need to wait on it: `/readyz` answering, a report in `/readyz` turning true,
//! a line reaching its log. Every wait polls the condition with a deadline (see [`super::wait`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::config::ConfigDir;
use super::raw::http_get;
use super::redis::free_port;
use super::wait::{POLL_EVERY, judged, wait_for_value, wait_until, wait_until_async};

/// A running gateway process, killed on drop. Its log is kept in its temporary folder.
pub struct Gateway {
    child: Child,
    pub base: String,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Gateway {
    /// Writes `config` (YAML without `listen`/`contracts`) and `contracts` (file name, YAML) and
    /// starts `narrowgate serve` on a free port, waiting until `/readyz` answers 200.
    ///
    /// The port is free when chosen but may be taken before the gateway binds it (tests run in
    /// parallel): a gateway that exits saying so is started again on another port, twice at
    /// most. One that exits for any other reason fails the test at once, with its log.
    pub fn start(config: &str, contracts: &[(&str, &str)]) -> Gateway {
        for _ in 0..3 {
            let mut gateway = Gateway::spawn(config, contracts, &[]);
            if gateway.ready_unless_exited(Duration::from_secs(60)) {
                return gateway;
            }
            let log = gateway.log();
            if !log.contains("Address already in use") {
                panic!("the gateway exited before it was ready; log:\n{log}");
            }
        }
        panic!("the gateway lost the race for a free port three times in a row");
    }

    /// Polls until `/readyz` answers 200 (true) or the process has exited (false); panics with
    /// the log when neither happens `within`.
    #[track_caller]
    fn ready_unless_exited(&mut self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some((200, _)) = http_get(&self.base, "/readyz") {
                return true;
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "the gateway's /readyz did not answer 200 within {within:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// Like [`start`](Self::start) without waiting, with extra environment variables.
    pub fn spawn(config: &str, contracts: &[(&str, &str)], env: &[(&str, &str)]) -> Gateway {
        let ConfigDir { dir } = ConfigDir::new(config, contracts);
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("gateway.log")).expect("log file");
        let child = Command::new(super::narrowgate_bin())
            .args(["serve", "--config"])
            .arg(dir.path().join("narrowgate.yaml"))
            .env("NARROWGATE_LISTEN", format!("127.0.0.1:{port}"))
            .env("NARROWGATE_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start narrowgate");
        let base = format!("http://127.0.0.1:{port}");
        Gateway {
            child,
            url: format!("{base}/mcp"),
            base,
            dir,
        }
    }

    /// Blocks until `/readyz` answers 200, or panics with the gateway's log.
    #[track_caller]
    pub fn wait_ready(&self, within: Duration) {
        wait_until(
            within,
            "the gateway's /readyz answering 200",
            || match http_get(&self.base, "/readyz") {
                Some((200, _)) => Ok(()),
                other => Err(format!("{other:?}; log:\n{}", self.log())),
            },
        );
    }

    /// The gateway's process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The folder holding `narrowgate.yaml` and `contracts/`.
    pub fn config_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Its `narrowgate.yaml`.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("narrowgate.yaml")
    }

    /// Writes (or replaces) `relative` in the config folder, e.g. `contracts/add.yaml` or
    /// `narrowgate.yaml` (which then needs its own `contracts: contracts` line).
    pub fn write_file(&self, relative: &str, text: &str) {
        let path = self.dir.path().join(relative);
        std::fs::write(&path, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Everything the gateway has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }

    /// Polls the log until `predicate` holds for it, and returns that log; panics after `within`
    /// saying `what` was never logged.
    #[track_caller]
    pub fn wait_for_log(
        &self,
        within: Duration,
        what: &str,
        predicate: impl Fn(&str) -> bool,
    ) -> String {
        let show = |log: &String| format!("log:\n{log}");
        wait_for_value(within, what, || self.log(), |log| predicate(log), show)
    }

    /// The `/readyz` report.
    pub fn readyz(&self) -> Value {
        let (_, body) = http_get(&self.base, "/readyz").expect("readyz answers");
        serde_json::from_str(&body).expect("readyz is JSON")
    }

    /// Polls `/readyz` until `predicate` holds, or panics after `within`.
    #[track_caller]
    pub fn wait_for(&self, within: Duration, what: &str, predicate: impl Fn(&Value) -> bool) {
        wait_for_value(within, what, || self.readyz(), predicate, |r| self.shown(r));
    }

    /// A `/readyz` report and the log, for a failed wait's message.
    fn shown(&self, readyz: &Value) -> String {
        format!("readyz: {readyz}\nlog:\n{}", self.log())
    }

    /// Like [`wait_for`](Self::wait_for), pausing without blocking the test's runtime: for
    /// tests whose own tasks (a load, a call in flight) must keep running meanwhile.
    pub async fn wait_for_async(
        &self,
        within: Duration,
        what: &str,
        predicate: impl Fn(&Value) -> bool,
    ) {
        let log = || format!("log:\n{}", self.log());
        let check = async || judged(self.readyz(), &predicate, |r| format!("readyz: {r}"));
        wait_until_async(within, POLL_EVERY, what, log, check).await;
    }

    /// Runs `attempt` every 100 ms (attempts are calls or commands, not cheap reads) until it
    /// returns `Ok`, and returns that; once `within` has passed, panics saying `what` did not
    /// happen, with the last attempt's `Err` and this gateway's log. Async: the test's own tasks
    /// keep running meanwhile.
    pub async fn retry_until<T>(
        &self,
        within: Duration,
        what: &str,
        attempt: impl AsyncFnMut() -> Result<T, String>,
    ) -> T {
        let log = || format!("log:\n{}", self.log());
        wait_until_async(within, Duration::from_millis(100), what, log, attempt).await
    }

    /// Waits until `upstream` is up and the catalog has joined its tool list with `tools`'
    /// contracts: /readyz can answer 200 a moment before the catalog rebuild that follows the
    /// upstream's listing.
    #[track_caller]
    pub fn wait_tools_joined(&self, upstream: &str, tools: &[&str]) {
        self.wait_for(
            Duration::from_secs(30),
            "the upstream's tools joined",
            |r| {
                let joined = tools
                    .iter()
                    .all(|t| r["tools"][t]["state"] != "unavailable");
                r["upstreams"][upstream]["state"] == "up" && joined
            },
        );
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
