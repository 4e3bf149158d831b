//! docker/nginx.conf in front of two real gateway replicas, with Debian's nginx: requests of a
//! legacy session stick to the replica that holds the session, while stateless 2026-07-28 calls
//! (and `initialize`) are spread over both.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use common::{
    Gateway, KEY, Raw, callers, demo_stdio_config, echo_tool, free_port, receipts_json,
    stateless_call_body, stateless_call_headers,
};
use serde_json::json;

const SESSIONS: usize = 8;
const CALLS_PER_SESSION: usize = 5;
const STATELESS_CALLS: usize = 24;

/// nginx running docker/nginx.conf with its upstreams and port replaced; stopped on drop.
struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// The repository's docker/nginx.conf, its two `server` lines pointing at `replicas` and
    /// listening on a free loopback port.
    fn start(replicas: [&Gateway; 2]) -> Nginx {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/nginx.conf");
        let mut conf = std::fs::read_to_string(&example).expect("docker/nginx.conf");
        for i in 1..=2 {
            let line = format!("server narrowgate-{i}:8080;");
            // Both upstream blocks name each replica.
            assert_eq!(conf.matches(&line).count(), 2, "{line} in both upstreams");
        }
        let mut replace = |from: &str, to: String| {
            assert!(conf.contains(from), "docker/nginx.conf has no `{from}`");
            conf = conf.replace(from, &to);
        };
        for (i, gw) in replicas.iter().enumerate() {
            let address = gw.base.trim_start_matches("http://");
            replace(
                &format!("server narrowgate-{}:8080;", i + 1),
                format!("server {address};"),
            );
        }
        replace("listen 8080;", format!("listen 127.0.0.1:{port};"));
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("write nginx.conf");
        let log = dir.path().join("nginx.log");
        let pid = dir.path().join("nginx.pid");
        let mut command = Command::new(nginx_bin());
        command
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(&log)
            .arg("-g")
            .arg(format!("daemon off; pid {};", pid.display()));
        let mut child = common::process::spawn_logged(&mut command, &log, "nginx");
        common::process::wait_listening(port, &mut child, "nginx", &log);
        Nginx { child, port, dir }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// nginx on PATH, or Debian's /usr/sbin/nginx (not on a non-root PATH).
fn nginx_bin() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nginx"))
            .find(|bin| bin.is_file())
    });
    match on_path {
        Some(bin) => bin,
        None if Path::new("/usr/sbin/nginx").is_file() => PathBuf::from("/usr/sbin/nginx"),
        None => panic!(
            "nginx is not installed: `.ci/run` installs it (need_apt_packages nginx-light); \
             locally: apt-get install nginx-light"
        ),
    }
}

fn replica() -> Gateway {
    let contract = common::contract_file(
        "demo",
        &[
            &echo_tool("echo", 40, ""),
            &echo_tool("stateless_echo", 40, ""),
        ],
    );
    Gateway::start(
        &demo_stdio_config(&callers(&[]), ""),
        &[("demo.yaml", contract.as_str())],
    )
}

/// Proves: through docker/nginx.conf, every request of each of 8 sessions reaches the replica
/// that opened it (the replicas share no state here, so a request routed to the other one would
/// be answered 404 "session not found"), and each session's calls are all on one replica's
/// receipts; stateless calls, which carry no session id, reach both replicas (with a consistent
/// hash of the empty header they would all go to one).
#[tokio::test]
async fn sessions_stick_to_their_replica_and_stateless_calls_reach_both() {
    let replicas = [replica(), replica()];
    let nginx = Nginx::start([&replicas[0], &replicas[1]]);
    let raw = Raw::new(&nginx.url());

    for s in 0..SESSIONS {
        let session = raw.open_session(Some(KEY), "2025-06-18").await;
        for c in 0..CALLS_PER_SESSION {
            let message = format!("session {s} call {c}");
            let params = json!({"name": "echo", "arguments": {"message": message}});
            let reply = raw
                .request(Some(KEY), &session, "2025-06-18", "tools/call", params)
                .await;
            assert_eq!(
                reply.status, 200,
                "call {c} of session {s} left its replica: {reply:?}"
            );
            assert!(reply.body.contains(&message), "{reply:?}");
        }
    }

    for i in 0..STATELESS_CALLS {
        let headers = stateless_call_headers(KEY, "stateless_echo");
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = stateless_call_body(json!(i), "stateless_echo", json!({"message": "hi"}));
        let reply = raw.post(&headers, &body.to_string()).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert!(reply.body.contains("hi"), "{reply:?}");
    }

    let receipts = |gw: &Gateway, tool: &str| receipts_json(&gw.config_path(), &["--tool", tool]);
    let session_receipts: Vec<usize> = replicas
        .iter()
        .map(|gw| receipts(gw, "echo").len())
        .collect();
    assert_eq!(
        session_receipts.iter().sum::<usize>(),
        SESSIONS * CALLS_PER_SESSION
    );
    assert!(
        session_receipts.iter().all(|n| n % CALLS_PER_SESSION == 0),
        "each replica served whole sessions: {session_receipts:?}"
    );
    let stateless: Vec<usize> = replicas
        .iter()
        .map(|gw| receipts(gw, "stateless_echo").len())
        .collect();
    assert_eq!(stateless.iter().sum::<usize>(), STATELESS_CALLS);
    assert!(
        stateless.iter().all(|&n| n > 0),
        "stateless calls reached both replicas: {stateless:?}"
    );
}
