//! Free loopback ports and a real `redis-server`, for the integration tests (through
//! `tests/common`) and for the unit tests of `src/state/dedupe/redis` (which include this file
//! by path): so it uses nothing but `std`.
#![allow(dead_code)] // each test crate uses a part of it

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A real `redis-server` on a loopback port, without persistence, killed on drop.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// Starts it on a free port.
    pub fn start() -> Redis {
        Redis::start_on(free_port())
    }

    /// Starts it on `port` and waits until it answers PING.
    pub fn start_on(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): it must be on PATH. `.ci/run` installs it \
                     (need_apt_packages redis-server); locally: apt-get install redis-server"
                )
            });
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if redis.ping() {
                return redis;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server did not answer PING on port {port} within 10 s");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
