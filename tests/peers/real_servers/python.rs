//! The MCP project's Python servers: `mcp-server-git`, `mcp-server-time`, `mcp-server-fetch`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{
    Stdio, assert_refused, assert_unknown_tool, call, compare_through_gateway, init_check_serve,
    py2_bin, py2_through, serve_narrowed,
};
use crate::common::KEY;
use crate::common::peers::PyClient;
use crate::peers::regex_escape;

/// Runs `git ARGS` in `repo`; returns its stdout.
pub(crate) fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
        .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
        .output()
        .expect("run git (is it installed?)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new repository `repo` under `dir` (canonical, as the server reports paths) holding `a.txt`
/// ("one") in one commit with `message`.
pub(crate) fn repository_with_one_commit(dir: &Path, message: &str) -> std::path::PathBuf {
    let repo = dir.canonicalize().expect("canonical").join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").expect("write");
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", message]);
    repo
}

/// What a repository's state is: HEAD, every ref, the status, the staged diff.
fn repo_state(repo: &Path) -> Vec<String> {
    [
        &["rev-parse", "HEAD"][..],
        &["for-each-ref"],
        &["status", "--porcelain"],
        &["diff", "--cached"],
        &["diff"],
    ]
    .iter()
    .map(|args| git(repo, args))
    .collect()
}

/// Proves: `mcp-server-git`'s init draft passes `check` and serves unchanged; its read tools
/// (status, log, diff, show) answer every official client exactly as the server does
/// directly; a contract narrowed to status, log and diff with `repo_path` fixed and `target`
/// patterned refuses `git_commit` and `git_add` (unknown tools) and a `--output=FILE` option
/// injection, and the repository, its refs and the file system are unchanged.
#[test]
fn mcp_server_git_serves_as_directly_and_narrowed_refuses_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repository_with_one_commit(dir.path(), "first");
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").expect("write");
    std::fs::write(repo.join("b.txt"), "staged\n").expect("write");
    git(&repo, &["add", "b.txt"]);
    let repo_path = repo.display().to_string();
    let server = Stdio::new(
        "git",
        py2_bin("mcp-server-git"),
        &["--repository", &repo_path],
    );

    let (gw, _draft) = init_check_serve(&server);
    let at = |extra: Value| {
        let mut args = json!({"repo_path": repo_path});
        args.as_object_mut()
            .expect("object")
            .extend(extra.as_object().cloned().unwrap_or_default());
        args
    };
    let steps = [
        json!({"op": "list"}),
        call("git_status", at(json!({}))),
        call("git_log", at(json!({"max_count": 5}))),
        call("git_diff_unstaged", at(json!({}))),
        call("git_show", at(json!({"revision": "HEAD"}))),
    ];
    let before = repo_state(&repo);
    let differences = compare_through_gateway(&server, &gw, &steps);
    drop(gw);

    let output = dir.path().join("injected.txt");
    let repo_const = json!({"const": repo_path});
    let target = json!({"type": "string", "pattern": "^[A-Za-z0-9_][A-Za-z0-9_./~^-]{0,63}$"});
    let object = |properties: Value, required: Value| {
        json!({"type": "object", "properties": properties, "required": required,
            "additionalProperties": false})
    };
    let contract = format!(
        "upstream: git\ntools:\n  git_status:\n    description: The repository's status.\n    \
         privilege: read\n    input: {}\n  git_log:\n    description: The last commits.\n    \
         privilege: read\n    input: {}\n  git_diff:\n    description: The diff against a branch or commit.\n    \
         privilege: read\n    input: {}\n",
        object(json!({"repo_path": repo_const}), json!(["repo_path"])),
        object(
            json!({"repo_path": repo_const, "max_count": {"type": "integer", "minimum": 1, "maximum": 20}}),
            json!(["repo_path"])
        ),
        object(
            json!({"repo_path": repo_const, "target": target}),
            json!(["repo_path", "target"])
        ),
    );
    let gw = serve_narrowed(&server, &contract);
    let injection = format!("--output={}", output.display());
    let steps = json!([
        call("git_status", at(json!({}))),
        call("git_diff", at(json!({"target": "HEAD"}))),
        call("git_diff", at(json!({"target": injection}))),
        call("git_commit", at(json!({"message": "by the model"}))),
        call("git_add", at(json!({"files": ["a.txt"]}))),
        call("git_status", json!({"repo_path": "/"})),
    ]);
    let r = &py2_through(&gw, &steps);
    assert_eq!(r[0]["is_error"], false, "{}\n{}", r[0], gw.log());
    assert!(r[0]["content"].to_string().contains("b.txt"), "{}", r[0]);
    assert_eq!(r[1]["is_error"], false, "{}", r[1]);
    assert!(r[1]["content"].to_string().contains("+two"), "{}", r[1]);
    assert_refused(&r[2], "/target", "pattern");
    assert_unknown_tool(&r[3], "git_commit");
    assert_unknown_tool(&r[4], "git_add");
    assert_refused(&r[5], "/repo_path", "const");
    assert_eq!(repo_state(&repo), before, "the repository changed");
    assert!(!output.exists(), "the injected --output file was written");
    differences.assert_none();
}

/// Proves: `mcp-server-time`'s init draft passes `check` and serves unchanged, and both tools
/// answer every official client as the server does directly (a fixed conversion exactly; the
/// current time, which moves, by shape).
#[test]
fn mcp_server_time_serves_as_directly() {
    let server = Stdio::new(
        "time",
        py2_bin("mcp-server-time"),
        &["--local-timezone", "UTC"],
    );
    let (gw, _draft) = init_check_serve(&server);
    let convert = json!({"source_timezone": "Europe/Paris", "time": "16:30", "target_timezone": "Asia/Tokyo"});
    let mut now = call("get_current_time", json!({"timezone": "Europe/Paris"}));
    now["volatile"] = json!(true);
    let steps = [json!({"op": "list"}), call("convert_time", convert), now];
    let differences = compare_through_gateway(&server, &gw, &steps);
    differences.assert_none();
}

/// A loopback HTTP server serving `/public/*.html` pages (404 elsewhere) and recording every
/// request's path: what `mcp-server-fetch` fetched, or did not.
struct Site {
    port: u16,
    paths: Arc<Mutex<Vec<String>>>,
}

impl Site {
    fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&paths);
        // Detached: it lives as long as the test process, one thread and one request per
        // connection (a client that opens one early must not hold up the others).
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || serve_one(&stream, &seen));
            }
        });
        Site { port, paths }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn requested(&self) -> Vec<String> {
        self.paths.lock().expect("lock").clone()
    }
}

/// Reads one request from `stream`, records its path and answers it.
fn serve_one(stream: &std::net::TcpStream, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split(' ').nth(1).unwrap_or("").to_string();
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {}
        }
    }
    seen.lock().expect("lock").push(path.clone());
    let (status, body) = if path.starts_with("/public/") {
        ("200 OK", PAGE)
    } else {
        ("404 Not Found", "<html><body>not here</body></html>")
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = (&mut &*stream).write_all(reply.as_bytes());
}

const PAGE: &str = "<!DOCTYPE html><html><head><title>Opening hours</title></head><body><article>\
<h1>Opening hours</h1><p>The library opens at <b>nine</b> on weekdays and at ten on Saturdays.</p>\
<p>It is closed on Sundays and public holidays; see <a href=\"/public/holidays.html\">the list</a>.</p>\
<ul><li>Monday to Friday: 9:00 to 18:00</li><li>Saturday: 10:00 to 14:00</li></ul></article></body></html>";

/// Proves: `mcp-server-fetch` (allowed loopback, against a local site) has an init draft that
/// passes `check` and serves unchanged; a fetched page (a window of it) answers every
/// official client as the server does directly; a contract narrowing `url` to the site's
/// `/public/` pages refuses a URL outside the pattern before the server sees it: the site gets no
/// request for it.
#[test]
fn mcp_server_fetch_serves_as_directly_and_narrowed_fetches_only_the_pattern() {
    let site = Site::start();
    let mut server = Stdio::new(
        "fetch",
        py2_bin("mcp-server-fetch"),
        &["--allow-private-ips"],
    );
    // Each fetch converts the page in a Node child while the server's loop waits (readabilipy),
    // so the clients' fetches through the gateway's one server queue up.
    server.timeout = Some("120s");
    let (gw, _draft) = init_check_serve(&server);
    let page = site.url("/public/hours.html");
    let steps = [
        json!({"op": "list"}),
        call(
            "fetch",
            json!({"url": page, "max_length": 120, "start_index": 10}),
        ),
    ];
    let differences = compare_through_gateway(&server, &gw, &steps);
    drop(gw);

    let pattern = format!(
        "^{}/public/[a-z]{{1,32}}\\.html$",
        regex_escape(&site.url(""))
    );
    let input = json!({"type": "object", "properties": {
            "url": {"type": "string", "format": "uri", "pattern": pattern},
            "max_length": {"type": "integer", "minimum": 1, "maximum": 5000}},
        "required": ["url"], "additionalProperties": false});
    let contract = format!(
        "upstream: fetch\ntools:\n  fetch:\n    description: Fetch a page of the library's site as markdown.\n    \
         privilege: read\n    input: {input}\n"
    );
    let gw = serve_narrowed(&server, &contract);
    let before = site.requested().len();
    let steps = json!([
        call("fetch", json!({"url": site.url("/private/staff.html")})),
        call(
            "fetch",
            json!({"url": "http://169.254.169.254/latest/meta-data/"})
        ),
        call("fetch", json!({"url": page, "raw": true})),
        call("fetch", json!({"url": page})),
    ]);
    let r = &py2_through(&gw, &steps);
    assert_refused(&r[0], "/url", "pattern");
    assert_refused(&r[1], "/url", "pattern");
    assert_refused(&r[2], "'raw'", "additionalProperties");
    assert_eq!(r[3]["is_error"], false, "{}\n{}", r[3], gw.log());
    assert!(r[3]["content"].to_string().contains("nine"), "{}", r[3]);
    let after = site.requested();
    let fetched: Vec<&String> = after[before..]
        .iter()
        .filter(|p| p.as_str() != "/robots.txt")
        .collect();
    assert_eq!(fetched, ["/public/hours.html"], "the site saw {after:?}");
    differences.assert_none();
}

/// A Python SDK server whose async tool does blocking work: while it runs, the server's only event
/// loop is busy and answers nothing else, as `mcp-server-fetch`'s HTML conversion does.
const BUSY_SERVER: &str = r#"
import time
from mcp.server.mcpserver import MCPServer

app = MCPServer("busy")

@app.tool(description="Works for 12 seconds without yielding.")
async def crunch() -> str:
    time.sleep(12)
    return "crunched"

if __name__ == "__main__":
    app.run()
"#;

/// Proves: a stdio upstream busy in a call for longer than the health check's patience (a ping
/// every 5 s, answered within 5 s) is not taken for hung: the call's answer arrives and the
/// upstream is not restarted (before, the unanswered ping ended the connection and the call
/// failed with "connection to upstream … was lost").
#[test]
fn an_upstream_busy_in_a_call_is_not_taken_for_hung() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("busy.py");
    std::fs::write(&script, BUSY_SERVER).expect("write");
    let server = Stdio::new(
        "busy",
        crate::common::peers::py2_python(),
        &[&script.display().to_string()],
    );
    let contract = "upstream: busy\ntools:\n  crunch:\n    description: Crunch.\n    \
                    privilege: read\n    timeout: 40s\n";
    let gw = serve_narrowed(&server, contract);
    let out = PyClient::V2("legacy").run(&gw.url, KEY, &json!([call("crunch", json!({}))]));
    let r = &out["results"][0];
    assert_eq!(r["is_error"], false, "{r}\n{}", gw.log());
    assert_eq!(r["content"], json!(["crunched"]), "{r}");
    assert!(!gw.log().contains("upstream down"), "{}", gw.log());
}
