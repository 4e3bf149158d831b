//! The contract library (`contracts/library/SERVER/PROFILE.yaml`) in front of the exact published
//! servers it was written for, each pinned in tests/peers/: for every server and profile, the read
//! tools answer through the gateway, every tool the profile leaves out or narrows is refused with
//! the server's state unchanged, and the attacks a reviewer would try are refused before they reach
//! the server. The Python servers (git, time, fetch) are in `library/python.rs`, the npm ones
//! (filesystem, memory, postgres, everything) in `library/node.rs`.

use std::path::PathBuf;

use crate::common::peers::repo_root;

#[path = "library/node.rs"]
mod node;
#[path = "library/python.rs"]
mod python;

/// The text of `contracts/library/SERVER/PROFILE.yaml`, as the repository ships it.
pub fn library_file(server: &str, profile: &str) -> String {
    let path: PathBuf = repo_root()
        .join("contracts/library")
        .join(server)
        .join(format!("{profile}.yaml"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the library file {}: {e}", path.display()))
}

/// Runs `narrowgate ARGS…`: (exit code, stdout, stderr).
fn narrowgate(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(crate::common::narrowgate_bin())
        .args(args)
        .output()
        .expect("run narrowgate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Proves: `init --from-library` prints the shipped file itself (comments and all) for another
/// upstream name, every tool renamed with `--prefix` (the server's name kept as
/// `upstream_tool`), `--set` filling in what it reads from the environment; it needs no
/// configuration, and names what the library has when asked for what it lacks.
#[test]
fn init_from_library_prints_the_shipped_file_renamed() {
    let shipped = library_file("git", "read-write");
    let (code, printed, stderr) = narrowgate(&[
        "init",
        "--upstream",
        "work",
        "--from-library",
        "git:read-write",
        "--prefix",
        "work_",
        "--set",
        "GIT_REPOSITORY=/srv/repo",
        "--config",
        "/nonexistent/narrowgate.yaml",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(printed.contains("\nupstream: work\n"), "{printed}");
    assert!(
        printed.contains("\n  work_git_commit:\n    upstream_tool: git_commit\n"),
        "{printed}"
    );
    assert!(!printed.contains("${GIT_REPOSITORY}") && printed.contains("/srv/repo"));
    let comments = |t: &str| {
        t.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
    };
    assert_eq!(
        comments(&printed),
        comments(&shipped),
        "the review's comments are kept"
    );

    let (code, printed, stderr) =
        narrowgate(&["init", "--upstream", "git", "--from-library", "git"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        printed,
        library_file("git", "read-only"),
        "SERVER alone is its read-only profile, unchanged"
    );
    assert!(
        stderr.contains("GIT_REPOSITORY"),
        "the variables to set are named: {stderr}"
    );

    let (code, _, stderr) = narrowgate(&["init", "--upstream", "x", "--from-library", "gti"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("no server `gti`") && stderr.contains("filesystem"),
        "{stderr}"
    );
}

/// Proves: `check` warns when the running server reports another version than the file's
/// `written_for` (the demo upstream stands in for a newer release), and stays quiet when it
/// matches.
#[test]
fn check_says_when_the_server_is_not_the_one_written_for() {
    use crate::common::{ConfigDir, callers, demo_stdio_config};
    let contract = |version: &str| {
        format!(
            "upstream: demo\nwritten_for:\n  package: \"cargo:demo-upstream\"\n  server: {{ name: demo-upstream, version: \"{version}\" }}\n\
             tools:\n  echo:\n    description: Echo.\n    privilege: read\n    input: {{ type: object, properties: {{ message: {{ type: string }} }}, required: [message] }}\n"
        )
    };
    for (version, warned) in [("0.0.1-older", true), (env!("CARGO_PKG_VERSION"), false)] {
        let dir = ConfigDir::new(
            &demo_stdio_config(&callers(&[]), ""),
            &[("demo.yaml", &contract(version))],
        );
        let config = dir.config().display().to_string();
        let (code, stdout, stderr) = narrowgate(&["check", "--json", "--config", &config]);
        assert_eq!(code, Some(0), "{stdout}{stderr}");
        let warnings =
            serde_json::from_str::<serde_json::Value>(&stdout).expect("json")["warnings"]
                .to_string();
        assert_eq!(
            warnings.contains("but its contracts were written for demo-upstream 0.0.1-older"),
            warned,
            "{version}: {warnings}"
        );
    }
}

/// Proves: the README's desktop path works as written, end to end: `init --from-library git
/// --set GIT_REPOSITORY=…` into `contracts/`, a configuration whose one caller has no key (the
/// stdio caller), `connect claude-desktop` into the client's file, then the entry exactly as
/// written there launched by the Python SDK's stdio client (as Claude Desktop launches it): the
/// first call answers with the repository's commit, and `repo_path` is not the model's to send.
#[test]
fn the_readme_desktop_path_works_end_to_end() {
    use crate::common::peers::PyClient;
    use crate::peers::real_servers::py2_bin;
    let home = tempfile::tempdir().expect("tempdir");
    let repo = home.path().join("project");
    std::fs::create_dir_all(&repo).expect("repo dir");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["-c", "user.name=Ada", "-c", "user.email=ada@example.com"])
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "the first commit"]);
    let config_dir = home.path().join(".config/narrowgate");
    std::fs::create_dir_all(config_dir.join("contracts")).expect("config dir");
    let repo_text = repo.display().to_string();
    let (code, contract, stderr) = narrowgate(&[
        "init",
        "--upstream",
        "git",
        "--from-library",
        "git:read-only",
        "--set",
        &format!("GIT_REPOSITORY={repo_text}"),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(config_dir.join("contracts/git.yaml"), contract).expect("write contract");
    let server = py2_bin("mcp-server-git").display().to_string();
    let config = format!(
        "contracts: contracts\nupstreams:\n  git: {{ command: {server}, args: [--repository, \"{repo_text}\"] }}\n\
         stdio: {{ caller: me }}\ncallers:\n  - {{ name: me, tools: [\"*\"] }}\n"
    );
    let config_path = config_dir.join("narrowgate.yaml");
    std::fs::write(&config_path, config).expect("write config");
    let config_text = config_path.display().to_string();
    let (code, stdout, stderr) = narrowgate(&["check", "--config", &config_text]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");

    let client_file = home.path().join("claude_desktop_config.json");
    std::fs::write(
        &client_file,
        r#"{"mcpServers": {"other": {"command": "other-server"}}}"#,
    )
    .expect("client file");
    let client_text = client_file.display().to_string();
    let (code, _, stderr) = narrowgate(&[
        "connect",
        "claude-desktop",
        "--config",
        &config_text,
        "--file",
        &client_text,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&client_file).expect("read")).expect("json");
    assert_eq!(
        written["mcpServers"]["other"]["command"], "other-server",
        "kept"
    );
    let entry = &written["mcpServers"]["narrowgate"];
    let target = format!(
        "stdio:{}",
        serde_json::json!({"command": entry["command"], "args": entry["args"], "env": {}})
    );
    let out = PyClient::V2("auto").run(
        &target,
        "-",
        &serde_json::json!([
            {"op": "call", "name": "git_log", "arguments": {"max_count": 1}},
            {"op": "call", "name": "git_log", "arguments": {"repo_path": "/etc"}},
        ]),
    );
    let first = &out["results"][0];
    assert_eq!(first["is_error"], false, "{out}");
    assert!(
        first["content"].to_string().contains("the first commit"),
        "{out}"
    );
    let refused = &out["results"][1];
    assert_eq!(refused["is_error"], true, "{out}");
    assert!(
        refused["content"]
            .to_string()
            .contains("`repo_path` is not an argument"),
        "{out}"
    );
}
