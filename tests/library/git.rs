//! The git library files (`contracts/library/git/`) in front of `mcp-server-git`: the reads of
//! one repository answer, and every option injection, path and write outside the profile is
//! refused with the repository unchanged.

use super::*;

// The same `git` the real-server tests drive the repository with.
use crate::peers::real_servers::python::git;

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
pub(super) fn sample_repo(dir: &Path) -> std::path::PathBuf {
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
/// a branch created and checked out, and `git_reset` runs once the user approves it.
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

    // With a user who approves (the SDK's elicitation callback), git_reset runs: the staged
    // change is unstaged, the working tree kept.
    std::fs::write(repo.join("a.txt"), "staged, then reset\n").expect("write");
    git(&repo, &["add", "a.txt"]);
    let ran = crate::common::process::run(
        Command::new(crate::common::peers::py2_python())
            .arg(crate::common::peers::py_client_script("py2_asks_client.py"))
            .args([
                &gw.url,
                crate::common::KEY,
                "all",
                r#"[["git_reset", {}]]"#,
                "legacy",
            ]),
        crate::common::peers::CLIENT_DEADLINE,
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let approved = ran.json();
    assert_eq!(approved["called"]["elicitation"], 1, "{approved}");
    assert_eq!(approved["results"][0]["is_error"], false, "{approved}");
    assert_eq!(git(&repo, &["diff", "--cached", "--name-only"]).trim(), "");
    let kept = std::fs::read_to_string(repo.join("a.txt")).expect("read");
    assert_eq!(kept, "staged, then reset\n", "the working tree was touched");
}

// --- time ----------------------------------------------------------------------------------
