//! Peers of the telemetry tests (tests/telemetry.rs): the rotel OTLP collector forwarding to this
//! repository's sink (otlp_sink.py), the instrumented Python SDK upstream (upstream.py), and a
//! strict parser of the Prometheus text format ([`prometheus`]). A missing peer panics with the
//! command that installs it: tests never skip.

pub mod prometheus;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::peers::{peers_dir, py2_python, repo_root};
use crate::common::process::{spawn_logged, wait_listening};
use crate::common::{free_port, wait_until_async};

pub const OTEL_INSTALL: &str = "python3 -m venv .peers/otel && .peers/otel/bin/pip install \
     rotel==0.0.1a15 opentelemetry-proto==1.45.2 protobuf==7.36.2";
pub const PY2_OTEL_INSTALL: &str = ".peers/py2/bin/pip install opentelemetry-sdk==1.45.2 \
     opentelemetry-exporter-otlp-proto-http==1.45.2";

/// The Python of `.peers/otel` (runs the sink), or a panic saying how to install it.
pub fn otel_python() -> PathBuf {
    let python = peers_dir().join("otel/bin/python");
    assert!(
        python.exists(),
        "the OTLP collector venv is missing at {}: install it with `{OTEL_INSTALL}`",
        python.display()
    );
    python
}

/// rotel's collector binary, bundled inside its wheel (the package has no console script).
pub fn rotel_agent() -> PathBuf {
    let lib = peers_dir().join("otel/lib");
    std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| python.path().join("site-packages/rotel/rotel-agent"))
        .find(|agent| agent.exists())
        .unwrap_or_else(|| {
            panic!(
                "rotel is not installed under {}: install it with `{OTEL_INSTALL}`",
                lib.display()
            )
        })
}

/// Panics unless the py2 venv can run the instrumented upstream.
pub fn require_py2_otel() {
    let out = Command::new(py2_python())
        .args([
            "-c",
            "import mcp.server.mcpserver, opentelemetry.sdk.trace, \
             opentelemetry.exporter.otlp.proto.http.trace_exporter",
        ])
        .output()
        .expect("run the py2 python");
    assert!(
        out.status.success(),
        "the OpenTelemetry SDK is missing from .peers/py2: install it with `{PY2_OTEL_INSTALL}`\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// rotel receiving OTLP on gRPC and HTTP, forwarding every span to the sink the test reads.
pub struct Collector {
    sink: Child,
    rotel: Child,
    /// `http://127.0.0.1:PORT` of the OTLP/gRPC receiver.
    pub grpc: String,
    /// `http://127.0.0.1:PORT` of the OTLP/HTTP receiver.
    pub http: String,
    sink_url: String,
    dir: tempfile::TempDir,
}

impl Collector {
    pub fn start() -> Collector {
        let dir = tempfile::tempdir().expect("tempdir");
        let sink_log = dir.path().join("sink.log");
        let script = repo_root().join("tests/otel/otlp_sink.py");
        let sink_port = free_port();
        let mut sink = spawn_logged(
            Command::new(otel_python())
                .arg(&script)
                .arg(sink_port.to_string()),
            &sink_log,
            "the OTLP sink",
        );
        wait_listening(sink_port, &mut sink, "the OTLP sink", &sink_log);
        let (grpc, http) = (free_port(), free_port());
        let rotel_log = dir.path().join("rotel.log");
        let mut rotel = spawn_logged(
            Command::new(rotel_agent())
                .arg("start")
                .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
                .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
                .args(["--exporter", "otlp", "--otlp-exporter-protocol", "http"])
                .args([
                    "--otlp-exporter-endpoint",
                    &format!("http://127.0.0.1:{sink_port}"),
                ])
                .args(["--batch-timeout", "100ms"])
                .arg("--pid-file")
                .arg(dir.path().join("rotel.pid"))
                .arg("--log-file")
                .arg(dir.path().join("rotel-agent.log")),
            &rotel_log,
            "rotel",
        );
        wait_listening(grpc, &mut rotel, "rotel (gRPC)", &rotel_log);
        wait_listening(http, &mut rotel, "rotel (HTTP)", &rotel_log);
        Collector {
            sink,
            rotel,
            grpc: format!("http://127.0.0.1:{grpc}"),
            http: format!("http://127.0.0.1:{http}"),
            sink_url: format!("http://127.0.0.1:{sink_port}"),
            dir,
        }
    }

    pub async fn spans(&self) -> Vec<Value> {
        let url = format!("{}/spans", self.sink_url);
        let body = reqwest::get(&url)
            .await
            .expect("the sink answers")
            .text()
            .await
            .expect("the sink's body");
        serde_json::from_str(&body).expect("the sink answers a JSON array")
    }

    /// Polls the sink until `ready` holds for the spans received, or panics listing them.
    pub async fn wait_for(&self, what: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let rotel_log = || {
            let log = std::fs::read_to_string(self.dir.path().join("rotel.log"));
            format!("rotel log:\n{}", log.unwrap_or_default())
        };
        wait_until_async(
            Duration::from_secs(20),
            Duration::from_millis(100),
            &format!("{what}: receiving them"),
            rotel_log,
            async || {
                let spans = self.spans().await;
                if ready(&spans) {
                    Ok(spans)
                } else {
                    Err(format!("spans: {spans:#?}"))
                }
            },
        )
        .await
    }

    /// Exports one span as OTLP/JSON, as an instrumented client would.
    pub async fn export_client_span(&self, trace_id: &str, span_id: &str, name: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "test-client"}}]},
        "scopeSpans": [{"scope": {"name": "tests/telemetry.rs"}, "spans": [{
            "traceId": trace_id, "spanId": span_id, "name": name, "kind": 3,
            "startTimeUnixNano": (now - 50_000_000).to_string(),
            "endTimeUnixNano": now.to_string(),
        }]}]}]});
        let response = reqwest::Client::new()
            .post(format!("{}/v1/traces", self.http))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("rotel accepts OTLP/JSON");
        assert!(response.status().is_success(), "{response:?}");
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        for child in [&mut self.rotel, &mut self.sink] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The Python SDK MCP server of tests/otel/upstream.py, exporting its spans to `traces_url`.
pub struct PyUpstream {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl PyUpstream {
    pub fn start(traces_url: &str) -> PyUpstream {
        require_py2_otel();
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("upstream.log");
        let port = free_port();
        let mut child = spawn_logged(
            Command::new(py2_python())
                .arg(repo_root().join("tests/otel/upstream.py"))
                .arg(port.to_string())
                .arg(traces_url),
            &log,
            "the Python upstream",
        );
        wait_listening(port, &mut child, "the Python upstream", &log);
        PyUpstream {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            _dir: dir,
        }
    }
}

impl Drop for PyUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh random-enough hex id of `digits` digits (never all zeros).
pub fn hex_id(digits: usize) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(1);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let seq = u128::from(SEQ.fetch_add(1, Ordering::Relaxed));
    let mixed = nanos ^ (u128::from(std::process::id()) << 64) ^ (seq << 96) ^ (seq << 8);
    let text = format!("{:032x}", mixed | 1);
    text[32 - digits..].to_string()
}
