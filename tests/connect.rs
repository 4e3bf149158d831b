//! `narrowgate connect CLIENT`, run as the real binary with HOME in a temporary folder, on each
//! client's real file format holding other entries (and comments where the format has them).
//! Every written file is read back with the parser that client reads it with
//! (tests/connect/read_config.js: JSON.parse, jsonc-parser, strip-json-comments; the `toml` crate
//! for codex).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

/// The caller's key in the environment of every run: it must never reach a file or stdout.
const SECRET: &str = "ng-secret-7f3a9c1e5b";

/// One client and the file it reads, as a user may already have it.
struct Case {
    client: &'static str,
    /// The file under HOME (or, for claude-code, the working folder) the client reads.
    path: &'static str,
    /// How the client parses it: `json`, `jsonc`, `gemini` or `toml`.
    reader: &'static str,
    /// The file before `connect`, with other entries and, where allowed, comments.
    before: &'static str,
    /// Lines of `before` that must survive unchanged (its comments).
    kept_lines: &'static [&'static str],
    /// Where the servers are in the parsed file.
    servers: &'static str,
    /// A broken file of that format.
    broken: &'static str,
}

struct Ran {
    out: Output,
}

impl Ran {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn ok(self) -> Self {
        assert!(
            self.out.status.success(),
            "narrowgate connect failed: {}",
            self.stderr()
        );
        self
    }
}

/// A HOME folder with a gateway configuration file in it.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("narrowgate.yaml"), "# the gateway's\n").expect("config");
        Home { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn config(&self) -> PathBuf {
        std::fs::canonicalize(self.path().join("narrowgate.yaml")).expect("config path")
    }
    fn file(&self, case: &Case) -> PathBuf {
        self.path().join(case.path)
    }
    fn put(&self, case: &Case, text: &str) {
        let f = self.file(case);
        std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
        std::fs::write(f, text).expect("write fixture");
    }
    fn read(&self, case: &Case) -> String {
        std::fs::read_to_string(self.file(case)).expect("read the client's file")
    }
    /// Runs `narrowgate connect ARGS` with HOME (and the working folder) here.
    fn connect(&self, args: &[&str]) -> Ran {
        let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .arg("connect")
            .args(args)
            .current_dir(self.path())
            .env("HOME", self.path())
            .env("NARROWGATE_API_KEY", SECRET)
            .env("NARROWGATE_CONFIG", self.path().join("narrowgate.yaml"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .output()
            .expect("run narrowgate");
        Ran { out }
    }
}

/// Parses `text` with the reader of `case`'s client.
fn read_back(case: &Case, text: &str) -> Value {
    if case.reader == "toml" {
        let table: toml::Table =
            toml::from_str(text).expect("codex's TOML reader accepts the file");
        return serde_json::to_value(table).expect("TOML as JSON");
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/connect/read_config.js");
    let tmp = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(tmp.path(), text).expect("write");
    let out = Command::new("node")
        .arg(&script)
        .arg(case.reader)
        .arg(tmp.path())
        .output()
        .unwrap_or_else(|e| panic!("node is needed to read the file as {} does ({e}): install Node.js, then run tests/setup-peers.sh", case.client));
    assert!(
        out.status.success(),
        "{}'s reader refused the file: {}\n{text}",
        case.client,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reader prints JSON")
}

/// The servers object of a parsed file.
fn servers<'a>(case: &Case, v: &'a Value) -> &'a serde_json::Map<String, Value> {
    v.get(case.servers)
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("no `{}` object in {v}", case.servers))
}

/// Every check of one client: merge, comments, idempotence, --print, --url update, refusal.
fn check(case: &Case) {
    let home = Home::new();
    home.put(case, case.before);
    let before = read_back(case, case.before);
    let config = home.config();
    let config = config.to_str().expect("utf-8 path");

    // --print shows the file as it would be written and changes nothing.
    let printed = home.connect(&[case.client, "--print"]).ok();
    assert_eq!(home.read(case), case.before, "--print changed the file");

    // The entry is added; the other entries and the comments stay.
    let first = home.connect(&[case.client]).ok();
    let written = home.read(case);
    assert_eq!(
        written,
        printed.stdout(),
        "--print showed another file than was written"
    );
    for line in case.kept_lines {
        assert!(written.contains(line), "lost {line:?}:\n{written}");
    }
    let after = read_back(case, &written);
    for (k, v) in before.as_object().expect("an object") {
        if k == "inputs" && case.client == "vscode" {
            // VS Code's inputs gain ours at their end.
            let all = after[k].as_array().expect("inputs");
            assert_eq!(
                &all[..all.len() - 1],
                v.as_array().expect("inputs"),
                "{written}"
            );
        } else if k != case.servers {
            assert_eq!(after.get(k), Some(v), "top-level `{k}` changed:\n{written}");
        }
    }
    let ours = servers(case, &after);
    for (name, entry) in servers(case, &before) {
        assert_eq!(
            ours.get(name),
            Some(entry),
            "entry `{name}` changed:\n{written}"
        );
    }
    let entry = &ours["narrowgate"];
    assert_eq!(
        entry["command"],
        json!(env!("CARGO_BIN_EXE_narrowgate")),
        "{written}"
    );
    assert_eq!(
        entry["args"],
        json!(["stdio", "--config", config]),
        "{written}"
    );
    assert_key_reference(case, &after, entry);
    assert!(!written.contains(SECRET) && !first.stdout().contains(SECRET));

    // A second run leaves the file byte for byte as it was.
    home.connect(&[case.client]).ok();
    assert_eq!(home.read(case), written, "a second run changed the file");

    // --url updates the same entry rather than adding one.
    home.connect(&[case.client, "--url", "https://gw.example.com/mcp"])
        .ok();
    let by_url = home.read(case);
    let name_count = if case.reader == "toml" {
        by_url.matches("[mcp_servers.narrowgate]").count()
    } else {
        by_url.matches("\"narrowgate\":").count()
    };
    assert_eq!(name_count, 1, "the entry is not there once:\n{by_url}");
    let parsed = read_back(case, &by_url);
    let entry = &servers(case, &parsed)["narrowgate"];
    let text = entry.to_string();
    assert!(text.contains("https://gw.example.com/mcp"), "{by_url}");
    assert!(
        entry.get("command").is_none() || case.client == "claude-desktop",
        "{by_url}"
    );
    assert!(!by_url.contains(SECRET));
    for line in case.kept_lines {
        assert!(by_url.contains(line), "lost {line:?}:\n{by_url}");
    }

    // A file the client could not read is refused and left as it was.
    home.put(case, case.broken);
    let refused = home.connect(&[case.client]);
    assert_eq!(refused.out.status.code(), Some(2), "{}", refused.stderr());
    assert!(
        refused.stderr().contains("left unchanged")
            && refused
                .stderr()
                .contains(&*home.file(case).to_string_lossy()),
        "{}",
        refused.stderr()
    );
    assert_eq!(home.read(case), case.broken, "a broken file was changed");
}

/// The stdio entry names the key rather than holding it, in the client's own syntax.
fn assert_key_reference(case: &Case, file: &Value, entry: &Value) {
    match case.client {
        "claude-desktop" => assert!(entry.get("env").is_none(), "{entry}"),
        "codex" => assert_eq!(entry["env_vars"], json!(["NARROWGATE_API_KEY"]), "{entry}"),
        "vscode" => {
            assert_eq!(
                entry["env"]["NARROWGATE_API_KEY"],
                json!("${input:narrowgate-api-key}")
            );
            let inputs = file["inputs"].as_array().expect("inputs");
            let ours: Vec<_> = inputs
                .iter()
                .filter(|i| i["id"] == json!("narrowgate-api-key"))
                .collect();
            assert_eq!(ours.len(), 1, "{inputs:?}");
            assert_eq!(ours[0]["password"], json!(true));
            assert_eq!(ours[0]["type"], json!("promptString"));
        }
        "cursor" | "windsurf" => assert_eq!(
            entry["env"]["NARROWGATE_API_KEY"],
            json!("${env:NARROWGATE_API_KEY}")
        ),
        _ => assert_eq!(
            entry["env"]["NARROWGATE_API_KEY"],
            json!("${NARROWGATE_API_KEY}")
        ),
    }
}

fn desktop_path() -> &'static str {
    if cfg!(target_os = "macos") {
        "Library/Application Support/Claude/claude_desktop_config.json"
    } else {
        ".config/Claude/claude_desktop_config.json"
    }
}

fn vscode_path() -> &'static str {
    if cfg!(target_os = "macos") {
        "Library/Application Support/Code/User/mcp.json"
    } else {
        ".config/Code/User/mcp.json"
    }
}

const DESKTOP: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Documents"]
    }
  }
}
"#;

/// Proves: for Claude Desktop (strict JSON, under the per-OS application folder) the entry is
/// merged keeping the other settings and servers, idempotently, updated in place by --url (an
/// mcp-remote bridge), and a file with a comment (which Claude Desktop cannot read) is refused.
#[test]
fn claude_desktop() {
    check(&Case {
        client: "claude-desktop",
        path: desktop_path(),
        reader: "json",
        before: DESKTOP,
        kept_lines: &[
            r#"      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Documents"]"#,
        ],
        servers: "mcpServers",
        broken: "{\n  // a comment\n  \"mcpServers\": {}\n}\n",
    });
}

/// Proves: for Claude Code the project's `.mcp.json` gets a stdio entry with `${NARROWGATE_API_KEY}`
/// (which Claude Code expands), keeping the other servers; a truncated file is refused unchanged.
#[test]
fn claude_code() {
    check(&Case {
        client: "claude-code",
        path: ".mcp.json",
        reader: "json",
        before: "{\n  \"mcpServers\": {\n    \"sentry\": {\"type\": \"http\", \"url\": \"https://mcp.sentry.dev/mcp\"}\n  }\n}\n",
        kept_lines: &[r#"    "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"}"#],
        servers: "mcpServers",
        broken: "{\n  \"mcpServers\": {\n",
    });
}

/// Proves: Cursor's `~/.cursor/mcp.json` keeps its comments and other servers, the key is
/// `${env:NARROWGATE_API_KEY}`, and a file with a missing comma is refused unchanged.
#[test]
fn cursor() {
    check(&Case {
        client: "cursor",
        path: ".cursor/mcp.json",
        reader: "jsonc",
        before: "{\n  // my servers\n  \"mcpServers\": {\n    \"linear\": { \"url\": \"https://mcp.linear.app/mcp\" } // work\n  }\n}\n",
        kept_lines: &["  // my servers", "// work"],
        servers: "mcpServers",
        broken: "{\n  \"mcpServers\": {\n    \"a\": {} \"b\": {}\n  }\n}\n",
    });
}

/// Proves: VS Code's user `mcp.json` (JSONC) keeps its comments, servers and other inputs, and
/// gets one `inputs` prompt with `password: true` that the entry references.
#[test]
fn vscode() {
    check(&Case {
        client: "vscode",
        path: vscode_path(),
        reader: "jsonc",
        before: r#"{
	// Inputs VS Code asks for.
	"inputs": [
		{ "type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true },
	],
	"servers": {
		/* the GitHub server */
		"github": { "type": "http", "url": "https://api.githubcopilot.com/mcp/" },
	},
}
"#,
        kept_lines: &[
            "\t// Inputs VS Code asks for.",
            "\t\t/* the GitHub server */",
            r#"		{ "type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true },"#,
        ],
        servers: "servers",
        broken: "{\n\t\"servers\": {\n\t\t\"a\": \n\t}\n}\n",
    });
}

/// Proves: Windsurf's `~/.codeium/windsurf/mcp_config.json` keeps its other servers, its stdio entry
/// names `${env:NARROWGATE_API_KEY}` and its --url entry is a `serverUrl`.
#[test]
fn windsurf() {
    check(&Case {
        client: "windsurf",
        path: ".codeium/windsurf/mcp_config.json",
        reader: "jsonc",
        before: "{\n    \"mcpServers\": {\n        \"git\": {\n            \"command\": \"uvx\",\n            \"args\": [\"mcp-server-git\"],\n            \"disabled\": true\n        }\n    }\n}\n",
        kept_lines: &["            \"args\": [\"mcp-server-git\"],"],
        servers: "mcpServers",
        broken: "{\n    \"mcpServers\": [\n}\n",
    });
    let home = Home::new();
    home.connect(&["windsurf", "--url", "http://127.0.0.1:8080/mcp"])
        .ok();
    let text = std::fs::read_to_string(home.path().join(".codeium/windsurf/mcp_config.json"))
        .expect("written");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        v["mcpServers"]["narrowgate"],
        json!({"serverUrl": "http://127.0.0.1:8080/mcp",
               "headers": {"Authorization": "Bearer ${env:NARROWGATE_API_KEY}"}})
    );
}

/// Proves: Gemini CLI's `~/.gemini/settings.json` keeps its other settings and comments (it strips
/// them before JSON.parse) and the stdio entry passes the key on by name (`${NARROWGATE_API_KEY}`).
#[test]
fn gemini_cli() {
    check(&Case {
        client: "gemini-cli",
        path: ".gemini/settings.json",
        reader: "gemini",
        before: "{\n  \"theme\": \"Dracula\", // dark\n  \"selectedAuthType\": \"gemini-api-key\",\n  \"mcpServers\": {\n    \"git\": {\"command\": \"uvx\", \"args\": [\"mcp-server-git\"]}\n  }\n}\n",
        kept_lines: &["  \"theme\": \"Dracula\", // dark"],
        servers: "mcpServers",
        broken: "{\n  \"theme\": \"Dracula\"\n  \"x\": 1\n}\n",
    });
}

const CODEX: &str = r#"# My codex settings.
model = "gpt-5-codex"
approval_policy = "on-request"

# Documentation lookups.
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"] # pinned later

[profiles.fast]
model = "gpt-5-mini"
"#;

/// Proves: codex's `~/.codex/config.toml` keeps its comments, settings and other tables (read back
/// with the `toml` crate codex uses), the stdio entry forwards NARROWGATE_API_KEY by `env_vars`,
/// the --url entry uses `bearer_token_env_var`, and invalid TOML is refused unchanged.
#[test]
fn codex() {
    check(&Case {
        client: "codex",
        path: ".codex/config.toml",
        reader: "toml",
        before: CODEX,
        kept_lines: &[
            "# My codex settings.",
            "# Documentation lookups.",
            r#"args = ["-y", "docs-mcp"] # pinned later"#,
            "[profiles.fast]",
        ],
        servers: "mcp_servers",
        broken: "model = \"gpt-5\n[mcp_servers\n",
    });
    let home = Home::new();
    home.connect(&["codex", "--url", "https://gw.example.com/mcp"])
        .ok();
    let text = std::fs::read_to_string(home.path().join(".codex/config.toml")).expect("written");
    assert_eq!(
        text,
        "[mcp_servers.narrowgate]\nurl = \"https://gw.example.com/mcp\"\nbearer_token_env_var = \"NARROWGATE_API_KEY\"\n"
    );
}

/// Proves: only `--write-key` puts the key in a file, only for Claude Desktop (whose servers get no
/// environment), and that file is then readable by its owner only; other clients refuse the flag.
#[test]
fn write_key_only_for_claude_desktop() {
    let home = Home::new();
    home.connect(&["claude-desktop", "--write-key"]).ok();
    let file = home.path().join(desktop_path());
    let text = std::fs::read_to_string(&file).expect("written");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        v["mcpServers"]["narrowgate"]["env"]["NARROWGATE_API_KEY"],
        json!(SECRET)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "mode {mode:o}");
    }
    let refused = home.connect(&["cursor", "--write-key"]);
    assert_eq!(refused.out.status.code(), Some(2));
    assert!(
        refused.stderr().contains("claude-desktop only"),
        "{}",
        refused.stderr()
    );
    assert!(!home.path().join(".cursor/mcp.json").exists());
}

/// Proves: a missing gateway configuration is an error naming --config, and nothing is written.
#[test]
fn missing_config_is_refused() {
    let home = Home::new();
    let ran = home.connect(&["cursor", "--config", "/nonexistent/narrowgate.yaml"]);
    assert_eq!(ran.out.status.code(), Some(2));
    assert!(ran.stderr().contains("--config"), "{}", ran.stderr());
    assert!(!home.path().join(".cursor/mcp.json").exists());
}

/// Proves: `--file` writes the named file instead of the client's default one.
#[test]
fn file_overrides_the_default_path() {
    let home = Home::new();
    let target = home.path().join("elsewhere/mcp.json");
    home.connect(&["cursor", "--file", target.to_str().expect("utf-8")])
        .ok();
    assert!(target.is_file());
    assert!(!home.path().join(".cursor/mcp.json").exists());
}
