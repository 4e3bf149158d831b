//! Debian's nginx running the repository's `docker/nginx.conf` in front of gateway replicas on
//! loopback: the example's `server narrowgate-N:8080;` lines are replaced by the replicas'
//! addresses (as many as the test starts) and its `listen` by a free port.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::gateway::Gateway;
use super::redis::free_port;

/// nginx on `docker/nginx.conf`, stopped on drop.
pub struct Nginx {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Nginx {
    /// The example configuration with both of its upstream blocks listing `replicas` (the
    /// example names two; a fleet test runs three).
    pub fn start(replicas: &[&Gateway]) -> Nginx {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("docker/nginx.conf");
        let example = std::fs::read_to_string(&example).expect("docker/nginx.conf");
        let servers: String = replicas
            .iter()
            .map(|gw| format!("server {};", gw.base.trim_start_matches("http://")))
            .collect::<Vec<_>>()
            .join(" ");
        let mut conf = String::new();
        for line in example.lines() {
            let trimmed = line.trim();
            if trimmed == "server narrowgate-1:8080;" {
                conf.push_str(&servers);
            } else if trimmed.starts_with("access_log") {
                // Which replica answered, and how: what a failing test needs to say.
                conf.push_str(
                    "log_format fleet '$msec $http_mcp_session_id $status $upstream_addr \
                 $upstream_status';\naccess_log /dev/stdout fleet;",
                );
            } else if trimmed.starts_with("server narrowgate-") {
                // The example's other replicas: replaced by the list above.
                continue;
            } else {
                conf.push_str(line);
            }
            conf.push('\n');
        }
        assert_eq!(
            conf.matches(&servers).count(),
            2,
            "docker/nginx.conf no longer names `server narrowgate-1:8080;` in both upstreams"
        );
        let listen = "listen 8080;";
        assert!(conf.contains(listen), "docker/nginx.conf has no `{listen}`");
        conf = conf.replace(listen, &format!("listen 127.0.0.1:{port};"));
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
        let mut child = super::process::spawn_logged(&mut command, &log, "nginx");
        super::process::wait_listening(port, &mut child, "nginx", &log);
        Nginx { child, port, dir }
    }

    /// What nginx wrote: its access log (one line per request) and errors.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nginx.log")).unwrap_or_default()
    }

    /// The MCP endpoint through nginx.
    pub fn url(&self) -> String {
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
