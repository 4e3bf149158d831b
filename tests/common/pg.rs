//! A private PostgreSQL server for the tests of `receipts.url`: `initdb` in a temporary folder, then
//! `postgres` on a free loopback port with its unix socket in that folder, stopped and removed on
//! drop. Debian's `postgresql` package provides the programs (`.ci/run` installs it); they refuse
//! to run as root, so as root the server runs as the `postgres` user the package creates.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::redis::free_port;

/// The database user the tests connect as (trust authentication: no password).
pub const PG_USER: &str = "narrowgate";

/// A running PostgreSQL server, stopped on drop.
pub struct Postgres {
    child: Child,
    pub port: u16,
    /// Holds the data folder, the socket and the server's log.
    pub dir: tempfile::TempDir,
}

impl Postgres {
    /// Creates a cluster and starts it on a free port; returns once it accepts queries.
    pub fn start() -> Postgres {
        let bin = server_bin_dir();
        let dir = tempfile::tempdir().expect("temp dir");
        let as_root = is_root();
        if as_root {
            let ran = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("run chown");
            assert!(
                ran.success(),
                "cannot give the temp dir to the postgres user"
            );
        }
        let data = dir.path().join("data");
        let initdb = as_server_user(&bin.join("initdb"), as_root)
            .arg("-D")
            .arg(&data)
            .args(["-U", PG_USER, "--auth=trust", "-E", "UTF8", "--no-sync"])
            .output()
            .expect("run initdb");
        assert!(
            initdb.status.success(),
            "initdb failed:\n{}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let port = free_port();
        let child = spawn_server(dir.path(), port);
        let pg = Postgres { child, port, dir };
        pg.wait_ready();
        pg
    }

    /// Stops the server and starts it again on the same port and data, as a restart or a
    /// failover does: every open connection is cut.
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn_server(self.dir.path(), self.port);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.try_batch("SELECT 1") {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => {
                    panic!(
                        "PostgreSQL did not accept queries within 30 s: {e}\n{}",
                        self.log()
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// A fast shutdown (SIGINT), then SIGKILL if it has not stopped within 10 s.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A URL for the database `db` over TCP.
    pub fn url_of(&self, db: &str) -> String {
        format!("postgres://{PG_USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// The URL of the `postgres` database, which every cluster has.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Runs `sql` (several statements allowed) in the `postgres` database.
    pub fn batch(&self, sql: &str) {
        self.batch_in("postgres", sql);
    }

    /// Runs `sql` in the database `db`.
    pub fn batch_in(&self, db: &str, sql: &str) {
        let url = self.url_of(db);
        let text = sql.to_string();
        if let Err(e) = on_plain_thread(move || connect(&url)?.batch_execute(&text)) {
            panic!("{sql}: {e}\n{}", self.log());
        }
    }

    fn try_batch(&self, sql: &str) -> Result<(), postgres::Error> {
        let url = self.url();
        let sql = sql.to_string();
        on_plain_thread(move || connect(&url)?.batch_execute(&sql))
    }

    /// The rows of `sql` in the database `db`, every column as text (cast them in the SQL).
    pub fn rows_in(&self, db: &str, sql: &str) -> Vec<Vec<Option<String>>> {
        let url = self.url_of(db);
        let text = sql.to_string();
        let rows = on_plain_thread(move || {
            let rows = connect(&url)?.query(&text, &[])?;
            rows.iter()
                .map(|row| (0..row.len()).map(|i| row.try_get(i)).collect())
                .collect::<Result<Vec<Vec<Option<String>>>, _>>()
        });
        rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The single text value of `sql` in the database `db`.
    pub fn value_in(&self, db: &str, sql: &str) -> Option<String> {
        let rows = self.rows_in(db, sql);
        assert_eq!(rows.len(), 1, "{sql}: one row expected, got {rows:?}");
        rows[0][0].clone()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `postgres` on the cluster in `dir`/data, on `port` and with its socket in `dir`, logging to
/// `dir`/postgres.log (appended: a restart keeps the earlier log).
fn spawn_server(dir: &Path, port: u16) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("postgres.log"))
        .expect("log file");
    as_server_user(&server_bin_dir().join("postgres"), is_root())
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-k")
        .arg(dir)
        .args(["-c", "fsync=off"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start postgres")
}

fn connect(url: &str) -> Result<postgres::Client, postgres::Error> {
    postgres::Client::connect(url, postgres::NoTls)
}

/// The synchronous client runs a runtime of its own, which cannot start inside a tokio test.
fn on_plain_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match std::thread::spawn(work).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `program` run as the `postgres` user when the tests run as root (setpriv execs it directly,
/// so the child is the server itself).
fn as_server_user(program: &Path, as_root: bool) -> Command {
    if !as_root {
        return Command::new(program);
    }
    let mut command = Command::new("setpriv");
    command
        .args([
            "--reuid=postgres",
            "--regid=postgres",
            "--init-groups",
            "--",
        ])
        .arg(program);
    command
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Where `initdb` and `postgres` are: on PATH, or Debian's /usr/lib/postgresql/VERSION/bin
/// (the newest), which the package does not put on PATH.
fn server_bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).find(|dir| dir.join("initdb").is_file()));
    if let Some(dir) = on_path {
        return dir;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL's initdb is neither on PATH nor under /usr/lib/postgresql/*/bin: \
             `.ci/run` installs it (need_apt_packages postgresql); locally: apt-get install postgresql"
        ),
    }
}
