//! The library for the PyPI servers: git, time, fetch. Each test serves a shipped file (read with
//! `library_file`, unedited) in front of the server it names, at the version pinned in
//! tests/peers/requirements-py2.txt, with the environment the file's header names given to the
//! gateway process, and drives it with the Python SDK 2.x client.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::library_file;
use crate::common::Gateway;
use crate::peers::real_servers::{
    Stdio, assert_refused, assert_unknown_tool, call, py2_bin, py2_through, snapshot,
};

/// A call a profile must refuse, with the argument path and the rule of the refusal.
type Attack = (Value, &'static str, &'static str);

#[path = "git.rs"]
mod git;

use git::sample_repo;

/// Asserts each of `results` (from `first` on) is the gateway's refusal its attack names.
#[track_caller]
fn assert_all_refused(attacks: &[Attack], results: &[Value], first: usize) {
    for (i, (step, path, rule)) in attacks.iter().enumerate() {
        eprintln!("attack {step}");
        assert_refused(&results[first + i], path, rule);
    }
}

/// The gateway serving `file` (a library file's text) as `SERVER.yaml` in front of `server`, with
/// `env` in its environment; returns once every tool of the file has joined.
fn serve_library(server: &Stdio, file: &str, env: &[(&str, &str)], tools: &[&str]) -> Gateway {
    let gw = Gateway::spawn(
        &server.config(),
        &[(&format!("{}.yaml", server.name), file)],
        env,
    );
    gw.wait_ready(Duration::from_secs(30));
    gw.wait_tools_joined(server.name, tools);
    gw
}

/// The names of the tools a `list` step returned, sorted.
fn listed(result: &Value) -> Vec<String> {
    let tools = result["tools"].as_array().expect("a tool list");
    let mut names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect();
    names.sort();
    names
}

/// Asserts a call answered without error and its text contains `needle`.
#[track_caller]
fn assert_answers(result: &Value, needle: &str, gw: &Gateway) {
    assert_eq!(result["is_error"], false, "{result}\n{}", gw.log());
    let text = result["content"].to_string();
    assert!(text.contains(needle), "no {needle:?} in {result}");
}

/// Proves: for each profile, `narrowgate check` on the three library files in front of the three
/// servers, started as the headers say, reports no problem and no warning (so each file's
/// `written_for` is the server running), and every tool is enabled, proven narrower (input and,
/// where declared, output) and its pin matches the pinned server's definition; and that without
/// the GIT_REPOSITORY the git files' headers name, nothing loads and the error names it.
#[test]
fn the_python_library_files_check_clean_against_their_servers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = sample_repo(dir.path());
    let bin = |name: &str| json!(py2_bin(name).display().to_string());
    let config = format!(
        "upstreams:\n  git: {{command: {}, args: [--repository, \"${{GIT_REPOSITORY}}\"]}}\n  \
         time: {{command: {}, args: [--local-timezone, UTC]}}\n  fetch: {{command: {}, args: []}}\n{}",
        bin("mcp-server-git"),
        bin("mcp-server-time"),
        bin("mcp-server-fetch"),
        crate::common::callers(&[])
    );
    for (profile, count) in [("read-only", 10), ("read-write", 15)] {
        let files: Vec<(String, String)> = ["git", "time", "fetch"]
            .iter()
            .map(|s| (format!("{s}.yaml"), library_file(s, profile)))
            .collect();
        let contracts: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        let dir = crate::common::ConfigDir::new(&config, &contracts);
        let out = Command::new(crate::common::narrowgate_bin())
            .args(["check", "--json", "--config"])
            .arg(dir.config())
            .env("GIT_REPOSITORY", &repo)
            .output()
            .expect("run narrowgate check");
        let text = String::from_utf8_lossy(&out.stdout);
        let report: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(out.status.success(), "{profile}: {report:#}");
        assert_eq!(report["problems"], json!([]), "{profile}: {report:#}");
        assert_eq!(report["warnings"], json!([]), "{profile}: {report:#}");
        let tools = report["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), count, "{profile}: {report:#}");
        for tool in tools {
            assert_eq!(tool["status"], "enabled", "{profile}: {tool}");
            assert_eq!(
                tool["narrowing"]["verdict"], "narrower",
                "{profile}: {tool}"
            );
            assert_eq!(tool["pin"], "matches", "{profile}: {tool}");
            let output = &tool["output_narrowing"];
            assert!(
                output.is_null() || output["verdict"] == "narrower",
                "{profile}: {tool}"
            );
        }
        let unset = Command::new(crate::common::narrowgate_bin())
            .args(["check", "--config"])
            .arg(dir.config())
            .env_remove("GIT_REPOSITORY")
            .output()
            .expect("run narrowgate check");
        let stderr = String::from_utf8_lossy(&unset.stderr);
        assert!(
            !unset.status.success(),
            "{profile} loaded without GIT_REPOSITORY: {stderr}"
        );
        assert!(stderr.contains("GIT_REPOSITORY"), "{profile}: {stderr}");
    }
}

// --- git -----------------------------------------------------------------------------------

/// `convert_time` from `source` at `time` to Asia/Tokyo.
fn convert_time(source: &str, time: &str) -> Value {
    let args = json!({"source_timezone": source, "time": time, "target_timezone": "Asia/Tokyo"});
    call("convert_time", args)
}

/// What both time profiles refuse: zone names that are paths or too long, times not `HH:MM`.
#[rustfmt::skip]
fn time_attacks() -> Vec<Attack> {
    let now = |zone: &str| call("get_current_time", json!({ "timezone": zone }));
    vec![
        (now("../../../../etc/passwd"), "/timezone", "pattern"),
        (now("/etc/localtime"), "/timezone", "pattern"),
        (now("Europe/../UTC"), "/timezone", "pattern"),
        (now(&format!("A{}", "b".repeat(80))), "/timezone", "maxLength"),
        (now("Europe/Paris\n"), "/timezone", "pattern"),
        (convert_time("Europe/Paris", "24:00"), "/time", "pattern"),
        (convert_time("Europe/Paris", "16:30:00"), "/time", "pattern"),
        (convert_time("Europe/Paris", "4:30"), "/time", "pattern"),
        (convert_time("../Paris", "16:30"), "/source_timezone", "pattern"),
        (call("get_current_time", json!({"timezone": "UTC", "format": "%s"})), "", "additionalProperties"),
    ]
}

/// Proves: both time profiles (`read-write` equals `read-only` by design) in front of
/// `mcp-server-time` 2026.10.19 publish exactly its two tools; the current time and a conversion
/// answer with structured results the contract's `output` bounds; zone names that are paths
/// (`../../etc/passwd`, `/etc/localtime`, `Europe/../UTC`) or oversized, times outside `HH:MM`
/// 00:00-23:59 and an extra argument are refused; an unknown tool is unknown.
#[test]
fn time_profiles_answer_and_refuse_paths_and_bad_times() {
    let server = Stdio::new(
        "time",
        py2_bin("mcp-server-time"),
        &["--local-timezone", "UTC"],
    );
    for profile in ["read-only", "read-write"] {
        let file = library_file("time", profile);
        let gw = serve_library(&server, &file, &[], &["get_current_time", "convert_time"]);
        let now = |zone: &str| call("get_current_time", json!({ "timezone": zone }));
        let attacks = time_attacks();
        let mut steps = vec![
            json!({"op": "list"}),
            now("Europe/Paris"),
            convert_time("Etc/GMT+5", "16:30"),
            now("America/Argentina/Buenos_Aires"),
        ];
        steps.extend(attacks.iter().map(|(s, _, _)| s.clone()));
        steps.push(call("get_time_zones", json!({})));
        let r = &py2_through(&gw, &json!(steps));
        assert_eq!(
            listed(&r[0]),
            ["convert_time", "get_current_time"],
            "{profile}: {}",
            r[0]
        );
        assert_eq!(r[1]["is_error"], false, "{profile}: {}\n{}", r[1], gw.log());
        assert_eq!(
            r[1]["structured_content"]["timezone"], "Europe/Paris",
            "{}",
            r[1]
        );
        assert_eq!(r[2]["is_error"], false, "{profile}: {}", r[2]);
        assert_eq!(
            r[2]["structured_content"]["time_difference"], "+14.0h",
            "{}",
            r[2]
        );
        assert_eq!(r[3]["is_error"], false, "{profile}: {}", r[3]);
        assert_all_refused(&attacks, r, 4);
        assert_unknown_tool(&r[4 + attacks.len()], "get_time_zones");
    }
}

// --- fetch ---------------------------------------------------------------------------------

/// A loopback listener recording the first line of every connection (a request line, or a proxy
/// `CONNECT host:port`), then closing it: what `mcp-server-fetch` tried to reach, directly or as
/// its proxy.
struct Recorder {
    port: u16,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&lines);
        // Detached: it lives as long as the test process.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut line = String::new();
                let _ = BufReader::new(&stream).read_line(&mut line);
                seen.lock().expect("lock").push(line.trim_end().to_string());
            }
        });
        Recorder { port, lines }
    }

    fn seen(&self) -> Vec<String> {
        self.lines.lock().expect("lock").clone()
    }
}

/// URLs both fetch profiles refuse by their pattern; `port` is the recorder's.
#[rustfmt::skip]
fn refused_urls(port: u16) -> Vec<String> {
    let fixed = [
        "https://localhost/", "https://[::ffff:127.0.0.1]/", "file:///etc/passwd",
        "https://10.0.0.1/", "https://192.168.1.1/", "https://100.100.100.200/",
        "http://169.254.169.254/latest/meta-data/", "https://169.254.169.254/latest/meta-data/",
        "http://2130706433/", "https://2130706433/", "https://0x7f000001/", "https://0177.0.0.1/",
        "https://127.1/", "https://user@example.com/", "https://example.com@127.0.0.1/",
        "https://example.com\\@127.0.0.1/", "https://foo.localhost/", "https://localhost.localdomain/",
        "https://127.0.0.1.nip.io/", "https://metadata.google.internal/computeMetadata/v1/",
        "https://printer.local/", "https://example.com./", "https://EXAMPLE.COM/",
        "https://example.com/\n", "https://example.com/ x", "http://example.com/",
        "ftp://example.com/", "javascript:alert(1)", "data:text/html,hi",
    ];
    let mut urls: Vec<String> = [
        "http://127.0.0.1:{port}/", "https://127.0.0.1:{port}/", "https://localhost:{port}/",
        "https://[::1]:{port}/", "https://example.com:{port}/", "gopher://127.0.0.1:{port}/",
    ]
    .iter()
    .map(|u| u.replace("{port}", &port.to_string()))
    .collect();
    urls.extend(fixed.iter().map(|u| u.to_string()));
    urls
}

/// Other arguments both fetch profiles refuse: `raw`, out-of-range windows, extra arguments.
#[rustfmt::skip]
fn fetch_attacks() -> Vec<Attack> {
    let ok = "https://example.com/";
    let fetch = |args: Value| call("fetch", args);
    vec![
        (fetch(json!({"url": ok, "raw": true})), "", "additionalProperties"),
        (fetch(json!({"url": ok, "max_length": 20001})), "/max_length", "maximum"),
        (fetch(json!({"url": ok, "max_length": 0})), "/max_length", "minimum"),
        (fetch(json!({"url": ok, "start_index": 1000001})), "/start_index", "maximum"),
        (fetch(json!({"url": ok, "headers": {"Host": "127.0.0.1"}})), "", "additionalProperties"),
    ]
}

/// Proves: both fetch profiles (`read-write` equals `read-only` by design) in front of
/// `mcp-server-fetch` 2026.10.24 refuse, by `url`'s pattern alone, every private, loopback,
/// link-local and metadata address in every spelling (dotted, decimal, hex, short, IPv6,
/// `localhost`, `*.localhost`, `*.internal`, wildcard DNS such as nip.io), userinfo, ports,
/// http://, file://, gopher:// and a trailing newline, as well as `raw`, oversized or zero
/// `max_length` and oversized `start_index`: the server is started WITH `--allow-private-ips`
/// (its own guard off) and with every proxy variable pointing at a local recorder, so any request
/// it made, to any host, would reach the recorder; the recorder sees none. A permitted URL
/// (`https://example.com/`) passes validation and is forwarded: the recorder sees exactly one
/// `CONNECT example.com:443` (the server's robots.txt request), and the call fails only there,
/// with the server's own error. Not proven here: a real page fetched over https (the test has
/// no network and no local name a public TLS certificate would vouch for).
#[test]
fn fetch_profiles_refuse_private_addresses_and_schemes_before_the_server() {
    let recorder = Recorder::start();
    let proxy = format!("http://127.0.0.1:{}", recorder.port);
    let mut server = Stdio::new(
        "fetch",
        py2_bin("mcp-server-fetch"),
        &["--allow-private-ips"],
    );
    let proxies = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
    ];
    for var in proxies {
        server.env.push((var.to_string(), proxy.clone()));
    }
    let urls = refused_urls(recorder.port);
    let others = fetch_attacks();
    for profile in ["read-only", "read-write"] {
        let file = library_file("fetch", profile);
        let gw = serve_library(&server, &file, &[], &["fetch"]);
        let seen_before = recorder.seen().len();
        let mut steps = vec![json!({"op": "list"})];
        steps.extend(urls.iter().map(|u| call("fetch", json!({ "url": u }))));
        steps.extend(others.iter().map(|(step, _, _)| step.clone()));
        let r = &py2_through(&gw, &json!(steps));
        assert_eq!(listed(&r[0]), ["fetch"], "{profile}: {}", r[0]);
        for (i, url) in urls.iter().enumerate() {
            assert_refused(&r[1 + i], "/url", "pattern");
            let text = r[1 + i]["content"].to_string();
            assert!(
                !text.contains("robots.txt"),
                "{profile}: {url} reached the server: {text}"
            );
        }
        assert_all_refused(&others, r, 1 + urls.len());
        let seen = recorder.seen();
        assert!(
            seen.len() == seen_before,
            "{profile}: refused calls reached {seen:?}"
        );

        // A permitted URL goes through: the server tries it (through the recorder, its proxy).
        let ok = call(
            "fetch",
            json!({"url": "https://example.com/", "max_length": 500}),
        );
        let r = &py2_through(&gw, &json!([ok]));
        assert_eq!(r[0]["is_error"], true, "{profile}: {}", r[0]);
        let text = r[0]["content"].to_string();
        assert!(
            text.contains("robots.txt"),
            "{profile}: not the server's own failure: {text}"
        );
        let seen = recorder.seen();
        let new: Vec<&str> = seen[seen_before..].iter().map(String::as_str).collect();
        let connects = new
            .iter()
            .all(|l| l.starts_with("CONNECT example.com:443 "));
        assert!(new.len() == 1 && connects, "{profile}: {seen:?}");
    }
}
