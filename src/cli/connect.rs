//! `narrowgate connect CLIENT`: writes the client's own configuration entry for the gateway into
//! the file that client reads, merged with what the file already holds.

mod codex;
mod jsonc;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

use jsonc::Dialect;

/// The variable that holds the caller's API key, for `narrowgate stdio` and in the entries.
pub const KEY_VAR: &str = "NARROWGATE_API_KEY";

/// The `mcp-remote` bridge the Claude Desktop entry runs for `--url` (Claude Desktop starts only
/// stdio servers from its file).
const MCP_REMOTE: &str = "mcp-remote@0.15.1";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Vscode,
    Windsurf,
    GeminiCli,
    Codex,
}

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ConnectArgs {
    /// The client whose configuration file gets the entry.
    #[arg(value_enum)]
    client: Client,
    /// The gateway's configuration file, which the entry's `narrowgate stdio` loads (made absolute).
    #[arg(long, env = "NARROWGATE_CONFIG", default_value = crate::config::DEFAULT_CONFIG_PATH)]
    config: PathBuf,
    /// The entry starts `narrowgate stdio --config FILE` (the default without --url).
    #[arg(long, conflicts_with = "url")]
    stdio: bool,
    /// The entry points at a running gateway's MCP endpoint, e.g. https://gw.example.com/mcp.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Print the file as it would be written, and change nothing.
    #[arg(long)]
    print: bool,
    /// The client's file to edit, instead of the one it reads by default (see below).
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// The entry's name in the client's list of servers.
    #[arg(long, default_value = "narrowgate", value_parser = parse_name)]
    name: String,
    /// The narrowgate executable the stdio entry starts (default: this one).
    #[arg(long, value_name = "PATH")]
    command: Option<PathBuf>,
    /// claude-desktop only: copy the value of NARROWGATE_API_KEY into the entry's `env`. Claude
    /// Desktop expands no variables in its file and passes servers none of its own, so the key
    /// must be in the file unless the configuration names the stdio caller (`stdio: {caller}`).
    #[arg(long)]
    write_key: bool,
}

const AFTER_HELP: &str = "Files written (HOME is honoured; --file overrides):
  claude-desktop  macOS: ~/Library/Application Support/Claude/claude_desktop_config.json
                  Linux: $XDG_CONFIG_HOME/Claude/claude_desktop_config.json (~/.config/...)
  claude-code     ./.mcp.json (the project's servers; Claude Code expands ${VAR} there)
  cursor          ~/.cursor/mcp.json
  vscode          macOS: ~/Library/Application Support/Code/User/mcp.json
                  Linux: $XDG_CONFIG_HOME/Code/User/mcp.json (~/.config/...)
  windsurf        ~/.codeium/windsurf/mcp_config.json
  gemini-cli      ~/.gemini/settings.json
  codex           $CODEX_HOME/config.toml (~/.codex/config.toml)

The key stays out of the file: each entry names NARROWGATE_API_KEY (${env:...}, ${...},
env_vars, bearer_token_env_var) or, for VS Code, asks for it once (an input with password: true).

Examples:
  narrowgate connect claude-code --config /etc/narrowgate/narrowgate.yaml
  narrowgate connect cursor --url https://gw.example.com/mcp --print
  narrowgate connect codex --file ./codex-config.toml";

fn parse_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(s.to_string())
    } else {
        Err("use 1 to 64 letters, digits, `-` or `_`".into())
    }
}

/// What the entry does, before it is put in a client's format.
pub enum Entry {
    Stdio { command: String, args: Vec<String> },
    Url { url: String },
}

/// Why nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("HOME is not set, so the client's file cannot be found: set HOME or pass --file PATH")]
    NoHome,
    #[error(
        "the configuration file {0} cannot be found ({1}): pass the gateway's --config FILE, which the entry's `narrowgate stdio` loads"
    )]
    Config(PathBuf, std::io::Error),
    #[error("cannot tell the path of this narrowgate executable ({0}): pass --command PATH")]
    Exe(std::io::Error),
    #[error("{0} is not valid UTF-8; pass paths the client can read back")]
    NotUtf8(PathBuf),
    #[error("--url {0}: give the MCP endpoint as http:// or https://HOST[:PORT]/PATH")]
    Url(String),
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error(
        "{0} is not valid {1} ({2}); it was left unchanged: fix it (or move it away) and run again"
    )]
    Unparsable(PathBuf, &'static str, String),
    #[error(
        "--write-key: NARROWGATE_API_KEY is not set; export the caller's key first (or drop --write-key)"
    )]
    NoKey,
    #[error(
        "--write-key is for claude-desktop only: this client reads the key from NARROWGATE_API_KEY itself"
    )]
    WriteKeyElsewhere,
    #[error("cannot write {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

/// Runs `narrowgate connect`.
pub fn run(args: ConnectArgs) -> ExitCode {
    match connect(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("narrowgate connect: {e}");
            ExitCode::from(2)
        }
    }
}

fn connect(args: &ConnectArgs) -> Result<(), ConnectError> {
    if args.write_key && args.client != Client::ClaudeDesktop {
        return Err(ConnectError::WriteKeyElsewhere);
    }
    let entry = match &args.url {
        Some(url) => {
            let parsed = reqwest::Url::parse(url).map_err(|_| ConnectError::Url(url.clone()))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(ConnectError::Url(url.clone()));
            }
            Entry::Url { url: url.clone() }
        }
        None => stdio_entry(args)?,
    };
    let key = if args.write_key {
        Some(std::env::var(KEY_VAR).map_err(|_| ConnectError::NoKey)?)
    } else {
        None
    };
    let path = match &args.file {
        Some(p) => p.clone(),
        None => default_file(args.client)?,
    };
    // Messages name the file in full, also when it is the working folder's `.mcp.json`.
    let path = std::path::absolute(&path).unwrap_or(path);
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ConnectError::Read(path, e)),
    };
    let text = old.as_deref().unwrap_or_default();
    let new = edit(args.client, text, &args.name, &entry, key.as_deref())
        .map_err(|(format, e)| ConnectError::Unparsable(path.clone(), format, e))?;
    if args.print {
        print!("{new}");
        eprintln!(
            "narrowgate connect: would write {} (nothing changed)",
            path.display()
        );
        return Ok(());
    }
    if old.as_deref() == Some(new.as_str()) {
        eprintln!(
            "narrowgate connect: {} already has the entry `{}`",
            path.display(),
            args.name
        );
    } else {
        write_atomically(&path, &new, key.is_some())
            .map_err(|e| ConnectError::Write(path.clone(), e))?;
        eprintln!(
            "narrowgate connect: wrote the entry `{}` to {}",
            args.name,
            path.display()
        );
    }
    for line in notes(args.client, &entry, key.is_some()) {
        eprintln!("  {line}");
    }
    Ok(())
}

fn stdio_entry(args: &ConnectArgs) -> Result<Entry, ConnectError> {
    let config = std::fs::canonicalize(&args.config)
        .map_err(|e| ConnectError::Config(args.config.clone(), e))?;
    let exe = match &args.command {
        Some(c) => std::path::absolute(c).map_err(ConnectError::Exe)?,
        None => std::env::current_exe().map_err(ConnectError::Exe)?,
    };
    let utf8 = |p: PathBuf| {
        p.to_str()
            .map(str::to_string)
            .ok_or(ConnectError::NotUtf8(p))
    };
    Ok(Entry::Stdio {
        command: utf8(exe)?,
        args: vec!["stdio".into(), "--config".into(), utf8(config)?],
    })
}

/// The file `client` reads by default, under HOME.
fn default_file(client: Client) -> Result<PathBuf, ConnectError> {
    if client == Client::ClaudeCode {
        return Ok(PathBuf::from(".mcp.json"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or(ConnectError::NoHome)?;
    // The per-user application folder: ~/Library/Application Support on macOS, XDG elsewhere.
    let app_dir = || -> PathBuf {
        if cfg!(target_os = "macos") {
            home.join("Library/Application Support")
        } else {
            std::env::var_os("XDG_CONFIG_HOME")
                .filter(|x| Path::new(x).is_absolute())
                .map_or_else(|| home.join(".config"), PathBuf::from)
        }
    };
    Ok(match client {
        Client::ClaudeDesktop => app_dir().join("Claude/claude_desktop_config.json"),
        Client::ClaudeCode => PathBuf::from(".mcp.json"),
        Client::Cursor => home.join(".cursor/mcp.json"),
        Client::Vscode => app_dir().join("Code/User/mcp.json"),
        Client::Windsurf => home.join(".codeium/windsurf/mcp_config.json"),
        Client::GeminiCli => home.join(".gemini/settings.json"),
        Client::Codex => std::env::var_os("CODEX_HOME")
            .filter(|c| !c.is_empty())
            .map_or_else(|| home.join(".codex"), PathBuf::from)
            .join("config.toml"),
    })
}

/// `text` with the entry `name` set for `client`, or the format and why the text was refused.
fn edit(
    client: Client,
    text: &str,
    name: &str,
    entry: &Entry,
    key: Option<&str>,
) -> Result<String, (&'static str, String)> {
    if client == Client::Codex {
        return codex::set_entry(text, name, entry).map_err(|e| ("TOML", e.to_string()));
    }
    let (dialect, format) = match client {
        Client::ClaudeDesktop | Client::ClaudeCode => (Dialect::Json, "JSON"),
        _ => (Dialect::Jsonc, "JSON (with comments)"),
    };
    let fail = |e: jsonc::JsonError| (format, e.to_string());
    // Refuse an unreadable file before anything is built from it.
    jsonc::validate(text, dialect).map_err(fail)?;
    let servers = if client == Client::Vscode {
        "servers"
    } else {
        "mcpServers"
    };
    let value = json_entry(client, name, entry, key);
    let mut out = jsonc::set_member(text, dialect, &[servers, name], &value).map_err(fail)?;
    if client == Client::Vscode {
        let input = json!({
            "type": "promptString",
            "id": input_id(name),
            "description": "narrowgate API key (the caller's key for this gateway)",
            "password": true,
        });
        out = jsonc::upsert_array_item(&out, dialect, "inputs", "id", &input).map_err(fail)?;
    }
    Ok(out)
}

fn input_id(name: &str) -> String {
    format!("{name}-api-key")
}

/// The entry in `client`'s JSON format.
fn json_entry(client: Client, name: &str, entry: &Entry, key: Option<&str>) -> Value {
    // How the client names the key: a reference it expands when it starts the server.
    let key_ref = match client {
        Client::Cursor | Client::Windsurf => format!("${{env:{KEY_VAR}}}"),
        Client::Vscode => format!("${{input:{}}}", input_id(name)),
        _ => format!("${{{KEY_VAR}}}"),
    };
    let env = json!({ KEY_VAR: key_ref });
    let bearer = json!({ "Authorization": format!("Bearer {key_ref}") });
    match (client, entry) {
        (Client::ClaudeDesktop, Entry::Stdio { command, args }) => {
            let mut e = json!({"command": command, "args": args});
            if let Some(k) = key {
                e["env"] = json!({ KEY_VAR: k });
            }
            e
        }
        (Client::ClaudeDesktop, Entry::Url { url }) => {
            let mut args = vec!["-y".to_string(), MCP_REMOTE.into(), url.clone()];
            if needs_allow_http(url) {
                args.push("--allow-http".into());
            }
            // mcp-remote replaces ${NARROWGATE_AUTH} from its own environment.
            args.extend(["--header".into(), "Authorization:${NARROWGATE_AUTH}".into()]);
            let mut e = json!({"command": "npx", "args": args});
            if let Some(k) = key {
                e["env"] = json!({ "NARROWGATE_AUTH": format!("Bearer {k}") });
            }
            e
        }
        (Client::ClaudeCode | Client::Vscode, Entry::Stdio { command, args }) => {
            json!({"type": "stdio", "command": command, "args": args, "env": env})
        }
        (Client::ClaudeCode | Client::Vscode, Entry::Url { url }) => {
            json!({"type": "http", "url": url, "headers": bearer})
        }
        (_, Entry::Stdio { command, args }) => {
            json!({"command": command, "args": args, "env": env})
        }
        (Client::Windsurf, Entry::Url { url }) => json!({"serverUrl": url, "headers": bearer}),
        (Client::GeminiCli, Entry::Url { url }) => json!({"httpUrl": url, "headers": bearer}),
        (_, Entry::Url { url }) => json!({"url": url, "headers": bearer}),
    }
}

/// mcp-remote refuses plain http:// except to localhost unless told.
fn needs_allow_http(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| {
        u.scheme() == "http" && !matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
    })
}

/// What the user must still do, printed after the file is written.
fn notes(client: Client, entry: &Entry, key_written: bool) -> Vec<String> {
    let restart = "restart the client (or reload its MCP servers) to pick up the entry".to_string();
    let export = format!(
        "the client must be started with {KEY_VAR} set to the caller's key (export it in the shell or session that starts it)"
    );
    match (client, key_written) {
        (Client::ClaudeDesktop, true) => vec![
            "the file now holds the key: it was written readable by you only (0600)".into(),
            restart,
        ],
        (Client::ClaudeDesktop, false) => vec![
            format!(
                "Claude Desktop passes its servers none of its environment: name the caller in the gateway's configuration (stdio: {{caller: NAME}}){}, or run again with --write-key to put {KEY_VAR}'s value in the entry",
                if matches!(entry, Entry::Url { .. }) {
                    " (for --url: --write-key is the only way)"
                } else {
                    ""
                }
            ),
            restart,
        ],
        (Client::Vscode, _) => vec![
            "VS Code asks for the key when it first starts the server and keeps it as a secret"
                .into(),
            restart,
        ],
        _ => vec![export, restart],
    }
}

/// Replaces `path` with `text` in one step (a temporary file in the same folder, then a rename):
/// a crash never leaves a half-written file. A symlinked file is written through its link.
fn write_atomically(path: &Path, text: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write;
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{file_name}.narrowgate-{}.tmp",
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        set_mode(&tmp, &target, secret)?;
        std::fs::rename(&tmp, &target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The new file keeps the old one's permissions; a file holding the key is made owner-only.
#[cfg(unix)]
fn set_mode(tmp: &Path, target: &Path, secret: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = match std::fs::metadata(target) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(_) => 0o644,
    };
    let mode = if secret { mode & 0o700 } else { mode };
    std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_tmp: &Path, _target: &Path, _secret: bool) -> std::io::Result<()> {
    Ok(())
}
