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

/// Runs `git ARGS` in `repo`; returns its stdout.
fn git(repo: &Path, args: &[&str]) -> String {
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

/// A repository's state: HEAD, every ref, the status, the staged and unstaged diffs, and every
/// file under the folder holding it (the repository, its `.git`, and what lies beside it).
fn repo_state(repo: &Path) -> (Vec<String>, Vec<(std::path::PathBuf, Vec<u8>)>) {
    let git_state = [
        &["symbolic-ref", "-q", "HEAD"][..],
        &["rev-parse", "HEAD"],
        &["for-each-ref"],
        &["status", "--porcelain"],
        &["diff", "--cached"],
        &["diff"],
    ]
    .iter()
    .map(|args| git(repo, args))
    .collect();
    // `.git/index` aside: any `git status` (the server's or ours) may rewrite its cached file
    // stats without changing what is staged, which `diff --cached` above compares.
    let mut files = snapshot(repo.parent().expect("the repository's folder"));
    files.retain(|(path, _)| path != Path::new("repo/.git/index"));
    (git_state, files)
}

/// A repository at `DIR/repo` with two commits on `main`, a tag, a second branch, an unstaged
/// change to `a.txt` and a staged new `b.txt`; beside it `DIR/outside.txt`.
fn sample_repo(dir: &Path) -> std::path::PathBuf {
    let repo = dir.canonicalize().expect("canonical").join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").expect("write");
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("c.txt"), "third file\n").expect("write");
    git(&repo, &["add", "c.txt"]);
    git(&repo, &["commit", "-q", "-m", "second"]);
    git(&repo, &["tag", "v1"]);
    git(&repo, &["branch", "topic"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").expect("write");
    std::fs::write(repo.join("b.txt"), "staged\n").expect("write");
    git(&repo, &["add", "b.txt"]);
    std::fs::write(dir.join("outside.txt"), "not the repository's\n").expect("write");
    repo
}

/// `mcp-server-git` as the library files' headers run it: `--repository ${GIT_REPOSITORY}`,
/// expanded by the gateway from its own environment.
fn git_server() -> Stdio {
    Stdio::new(
        "git",
        py2_bin("mcp-server-git"),
        &["--repository", "${GIT_REPOSITORY}"],
    )
}

#[rustfmt::skip]
const GIT_READS: [&str; 7] = [
    "git_branch", "git_diff", "git_diff_staged", "git_diff_unstaged", "git_log", "git_show", "git_status",
];

#[rustfmt::skip]
const GIT_WRITES: [&str; 5] = ["git_add", "git_checkout", "git_commit", "git_create_branch", "git_reset"];

/// The option injections and other revisions both git profiles must refuse, each with the
/// argument path and rule of the refusal. `out` is a file the injections would write.
#[rustfmt::skip]
fn git_read_attacks(out: &Path) -> Vec<Attack> {
    let o = out.display().to_string();
    vec![
        (call("git_diff", json!({"target": format!("--output={o}")})), "/target", "pattern"),
        (call("git_diff", json!({"target": "-p"})), "/target", "pattern"),
        (call("git_diff", json!({"target": "HEAD..topic"})), "/target", "pattern"),
        (call("git_diff", json!({"target": "HEAD@{1}"})), "/target", "pattern"),
        (call("git_diff", json!({"target": "HEAD --output=x"})), "/target", "pattern"),
        (call("git_diff", json!({"target": "HEAD", "context_lines": 100000})), "/context_lines", "maximum"),
        (call("git_diff_unstaged", json!({"context_lines": -1})), "/context_lines", "minimum"),
        (call("git_show", json!({"revision": format!("--output={o}")})), "/revision", "pattern"),
        (call("git_show", json!({"revision": "HEAD:../outside.txt"})), "/revision", "pattern"),
        (call("git_show", json!({"revision": ":/first"})), "/revision", "pattern"),
        (call("git_show", json!({"revision": "HEAD:/etc/passwd"})), "/revision", "pattern"),
        (call("git_log", json!({"max_count": 100000})), "/max_count", "maximum"),
        (call("git_log", json!({"max_count": 0})), "/max_count", "minimum"),
        (call("git_log", json!({"start_timestamp": "--all"})), "/start_timestamp", "pattern"),
        (call("git_log", json!({"end_timestamp": "2 weeks ago"})), "/end_timestamp", "pattern"),
        (call("git_branch", json!({"branch_type": "local", "contains": "--exec=id"})), "/contains", "pattern"),
        (call("git_branch", json!({"branch_type": "-a"})), "/branch_type", "enum"),
        (call("git_status", json!({"repo_path": "/"})), "", "additionalProperties"),
        (call("git_log", json!({"repo_path": "/tmp"})), "", "additionalProperties"),
        (call("git_status", json!({"path": "/"})), "", "additionalProperties"),
    ]
}

/// What read-write.yaml refuses besides the read attacks: staging outside the tree or with
/// options, globs or pathspec magic; control characters and oversized messages; option-like and
/// invalid branch names.
#[rustfmt::skip]
fn git_write_attacks() -> Vec<Attack> {
    let many: Vec<String> = (0..51).map(|i| format!("f{i}.txt")).collect();
    let add = |files: Value| call("git_add", json!({ "files": files }));
    let branch = |name: &str| call("git_create_branch", json!({ "branch_name": name }));
    vec![
        (add(json!(["../outside.txt"])), "/files/0", "pattern"),
        (add(json!(["sub/../../outside.txt"])), "/files/0", "pattern"),
        (add(json!(["/etc/passwd"])), "/files/0", "pattern"),
        (add(json!([".git/config"])), "/files/0", "pattern"),
        (add(json!(["sub/.GIT/config"])), "/files/0", "pattern"),
        (add(json!(["a.txt", "-A"])), "/files/1", "pattern"),
        (add(json!(["--chmod=+x"])), "/files/0", "pattern"),
        (add(json!(["*.txt"])), "/files/0", "pattern"),
        (add(json!([":(top)a.txt"])), "/files/0", "pattern"),
        (add(json!(["."])), "/files/0", "pattern"),
        (add(json!([])), "/files", "minItems"),
        (add(json!(many)), "/files", "maxItems"),
        (call("git_add", json!({"files": ["a.txt"], "repo_path": "/"})), "", "additionalProperties"),
        (call("git_commit", json!({"message": "x\u{1b}[2J"})), "/message", "pattern"),
        (call("git_commit", json!({"message": "m".repeat(4001)})), "/message", "maxLength"),
        (call("git_commit", json!({"message": ""})), "/message", "minLength"),
        (branch("--force"), "/branch_name", "pattern"),
        (branch("-D"), "/branch_name", "pattern"),
        (branch("a..b"), "/branch_name", "pattern"),
        (branch("x.lock"), "/branch_name", "pattern"),
        (branch("HEAD"), "/branch_name", "pattern"),
        (branch("new branch"), "/branch_name", "pattern"),
        (call("git_create_branch", json!({"branch_name": "ok", "base_branch": "-f"})), "/base_branch", "pattern"),
        (call("git_checkout", json!({"branch_name": "-f"})), "/branch_name", "pattern"),
        (call("git_checkout", json!({"branch_name": "--orphan=x"})), "/branch_name", "pattern"),
        (call("git_checkout", json!({"branch_name": "HEAD~1"})), "/branch_name", "pattern"),
    ]
}

/// Asserts each of `results` (from `first` on) is the gateway's refusal its attack names.
#[track_caller]
fn assert_all_refused(attacks: &[Attack], results: &[Value], first: usize) {
    for (i, (step, path, rule)) in attacks.iter().enumerate() {
        eprintln!("attack {step}");
        assert_refused(&results[first + i], path, rule);
    }
}

/// Proves: `contracts/library/git/read-only.yaml` in front of `mcp-server-git` 2026.10.19 (with
/// GIT_REPOSITORY in the gateway's environment) publishes exactly the seven read tools without
/// `repo_path`; they answer from that repository (status, both diffs, a diff against a tag, log,
/// a commit, a file at a revision, the branches); the write tools are unknown; option injections
/// (`--output=FILE`, `-p`), ranges, reflog and `:/` searches, a path out of the tree, oversized and
/// negative counts, free-text dates and a `repo_path` sent by the client are refused; and the
/// repository, its refs and every file around it are unchanged, no injected file written.
#[test]
fn git_read_only_reads_one_repository_and_refuses_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = sample_repo(dir.path());
    let out = dir.path().join("injected.txt");
    let server = git_server();
    let file = library_file("git", "read-only");
    let repo_text = repo.display().to_string();
    let gw = serve_library(
        &server,
        &file,
        &[("GIT_REPOSITORY", &repo_text)],
        &GIT_READS,
    );
    let before = repo_state(&repo);

    let mut steps = vec![
        json!({"op": "list"}),
        call("git_status", json!({})),
        call("git_diff_unstaged", json!({"context_lines": 0})),
        call("git_diff_staged", json!({})),
        call("git_diff", json!({"target": "v1"})),
        call("git_log", json!({"max_count": 1})),
        call("git_show", json!({"revision": "HEAD~1"})),
        call("git_show", json!({"revision": "HEAD:c.txt"})),
        call("git_branch", json!({"branch_type": "local"})),
        call(
            "git_log",
            json!({"start_timestamp": "2026-01-01", "end_timestamp": "2026-01-03T00:00:00"}),
        ),
    ];
    let attacks = git_read_attacks(&out);
    steps.extend(attacks.iter().map(|(s, _, _)| s.clone()));
    let writes: Vec<Value> = GIT_WRITES
        .iter()
        .map(|t| {
            call(
                t,
                json!({"message": "m", "files": ["a.txt"], "branch_name": "x"}),
            )
        })
        .collect();
    steps.extend(writes);
    let r = &py2_through(&gw, &json!(steps));

    assert_eq!(listed(&r[0]), GIT_READS, "{}", r[0]);
    for tool in r[0]["tools"].as_array().expect("tools") {
        let schema = tool["inputSchema"].to_string();
        assert!(!schema.contains("repo_path"), "repo_path published: {tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    }
    assert_answers(&r[1], "b.txt", &gw);
    assert_answers(&r[2], "+two", &gw);
    assert_answers(&r[3], "+staged", &gw);
    assert_answers(&r[4], "+two", &gw);
    assert_answers(&r[5], "second", &gw);
    assert!(
        !r[5]["content"].to_string().contains("first"),
        "max_count 1: {}",
        r[5]
    );
    assert_answers(&r[6], "first", &gw);
    assert_answers(&r[7], "third file", &gw);
    assert_answers(&r[8], "topic", &gw);
    assert_answers(&r[9], "first", &gw);
    let base = 10;
    assert_all_refused(&attacks, r, base);
    for (i, tool) in GIT_WRITES.iter().enumerate() {
        assert_unknown_tool(&r[base + attacks.len() + i], tool);
    }
    assert_eq!(
        repo_state(&repo),
        before,
        "the repository or its folder changed"
    );
    assert!(!out.exists(), "an injected --output file was written");
}

/// Proves: `contracts/library/git/read-write.yaml` in front of `mcp-server-git` 2026.10.19
/// publishes the read tools and the five write tools (reset marked destructive); first, every
/// attack is refused with the repository and the files around it unchanged: staging paths out of
/// the tree, inside `.git`, absolute, globbed, pathspec magic or option-like, more than 50 paths;
/// a commit message with a control character or over 4000 characters; branch names that inject
/// options, hold `..` or `.lock` or are `HEAD`; a `repo_path` sent by the client; the read
/// attacks of read-only; and `git_reset`, which needs the user's approval, from a client that
/// cannot give it. Then the writes work: a file is staged and committed with the given message,
/// a branch created and checked out.
#[test]
fn git_read_write_writes_what_it_allows_and_refuses_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = sample_repo(dir.path());
    let out = dir.path().join("injected.txt");
    let server = git_server();
    let file = library_file("git", "read-write");
    let repo_text = repo.display().to_string();
    let all: Vec<&str> = GIT_READS.iter().chain(GIT_WRITES.iter()).copied().collect();
    let gw = serve_library(&server, &file, &[("GIT_REPOSITORY", &repo_text)], &all);
    let before = repo_state(&repo);

    let mut attacks = git_read_attacks(&out);
    attacks.extend(git_write_attacks());
    let mut steps = vec![json!({"op": "list"})];
    steps.extend(attacks.iter().map(|(s, _, _)| s.clone()));
    steps.push(call("git_reset", json!({})));
    let r = &py2_through(&gw, &json!(steps));
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(listed(&r[0]), expected, "{}", r[0]);
    let reset = r[0]["tools"].as_array().expect("tools").iter();
    let reset = reset
        .clone()
        .find(|t| t["name"] == "git_reset")
        .expect("git_reset");
    assert_eq!(reset["annotations"]["destructiveHint"], true, "{reset}");
    assert_all_refused(&attacks, r, 1);
    let refused_reset = &r[1 + attacks.len()];
    let text = refused_reset["content"].to_string();
    assert!(
        text.contains("needs the user's approval"),
        "{refused_reset}"
    );
    assert_eq!(
        refused_reset["is_error"], true,
        "git_reset without approval ran: {refused_reset}"
    );
    assert_eq!(
        repo_state(&repo),
        before,
        "an attack or the unapproved reset changed the repository"
    );
    assert!(!out.exists(), "an injected --output file was written");

    let steps = json!([
        call("git_add", json!({"files": ["a.txt"]})),
        call(
            "git_commit",
            json!({"message": "second line for a\n\nby the model"})
        ),
        call(
            "git_create_branch",
            json!({"branch_name": "feature/x-1", "base_branch": "topic"})
        ),
        call("git_checkout", json!({"branch_name": "feature/x-1"})),
    ]);
    let r = &py2_through(&gw, &steps);
    assert_answers(&r[0], "staged", &gw);
    assert_answers(&r[1], "committed", &gw);
    assert_answers(&r[2], "feature/x-1", &gw);
    assert_answers(&r[3], "feature/x-1", &gw);
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", "main"]).trim(),
        "second line for a"
    );
    assert_eq!(
        git(&repo, &["branch", "--show-current"]).trim(),
        "feature/x-1"
    );
    let outside = std::fs::read_to_string(dir.path().join("outside.txt")).expect("read");
    assert_eq!(outside, "not the repository's\n");
}

// --- time ----------------------------------------------------------------------------------

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
