//! `narrowgate init --upstream NAME --from-library SERVER[:PROFILE]`: a reviewed contract from the
//! library (`contracts/library/SERVER/PROFILE.yaml`, docs/library.md) for an upstream of that
//! server, instead of a draft to narrow by hand.
//!
//! The files are compiled into the binary, so that an installed gateway (a release binary, the
//! Docker image) has them without the repository. The text is printed as written, comments and
//! all, since the comments are the review: only `upstream:` is set to NAME and, with `--prefix`,
//! every tool and prompt renamed (keeping the server's name as `upstream_tool`/`upstream_prompt`).

use std::process::ExitCode;

/// One library file.
pub struct LibraryFile {
    pub server: &'static str,
    pub profile: &'static str,
    pub text: &'static str,
}

macro_rules! library {
    ($($server:literal: [$($profile:literal),+]),+ $(,)?) => {
        &[$($(LibraryFile {
            server: $server,
            profile: $profile,
            text: include_str!(concat!("../../contracts/library/", $server, "/", $profile, ".yaml")),
        }),+),+]
    };
}

/// Every file of `contracts/library/` (a test checks the directory holds no other).
pub const LIBRARY: &[LibraryFile] = library! {
    "everything": ["read-only", "read-write"],
    "fetch": ["read-only", "read-write"],
    "filesystem": ["read-only", "read-write"],
    "git": ["read-only", "read-write"],
    "memory": ["read-only", "read-write"],
    "postgres": ["read-only", "read-write"],
    "time": ["read-only", "read-write"],
};

/// The profile `SERVER` alone means.
const DEFAULT_PROFILE: &str = "read-only";

/// Why a library file cannot be printed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LibraryError {
    #[error("the contract library has no server `{server}`; it has: {known}")]
    UnknownServer { server: String, known: String },
    #[error("the contract library has no profile `{profile}` for `{server}`; it has: {known}")]
    UnknownProfile {
        server: String,
        profile: String,
        known: String,
    },
    #[error("--set {0}: expected NAME=VALUE, NAME an environment variable the file reads")]
    BadSet(String),
    #[error("--set {name}: this library file does not read `${{{name}}}`; it reads: {reads}")]
    NotRead { name: String, reads: String },
    #[error(
        "--set {0}: the value may not contain quotes, backslashes, `#`, `: ` or line breaks (edit the printed file instead)"
    )]
    Unquotable(String),
}

/// The library file `spec` (`SERVER` or `SERVER:PROFILE`) names.
pub fn find(spec: &str) -> Result<&'static LibraryFile, LibraryError> {
    let (server, profile) = spec.split_once(':').unwrap_or((spec, DEFAULT_PROFILE));
    let of_server: Vec<&LibraryFile> = LIBRARY.iter().filter(|f| f.server == server).collect();
    if of_server.is_empty() {
        let mut known: Vec<&str> = LIBRARY.iter().map(|f| f.server).collect();
        known.dedup();
        return Err(LibraryError::UnknownServer {
            server: server.escape_debug().to_string(),
            known: known.join(", "),
        });
    }
    of_server
        .iter()
        .find(|f| f.profile == profile)
        .copied()
        .ok_or_else(|| LibraryError::UnknownProfile {
            server: server.to_string(),
            profile: profile.escape_debug().to_string(),
            known: of_server
                .iter()
                .map(|f| f.profile)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// `narrowgate init --upstream NAME --from-library SPEC [--prefix P] [--set VAR=VALUE]…`.
pub fn run(upstream: &str, spec: &str, prefix: &str, sets: &[String]) -> ExitCode {
    if !crate::config::valid_upstream_name(upstream) {
        eprintln!(
            "narrowgate init: `{}` is not an upstream name: use [a-z0-9_-]{{1,32}}, as under `upstreams:`",
            upstream.escape_debug()
        );
        return ExitCode::from(2);
    }
    if let Err(e) = super::init::check_prefix(prefix) {
        eprintln!("narrowgate init: {e}");
        return ExitCode::from(2);
    }
    let file = match find(spec) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("narrowgate init: {e}\n  docs/library.md describes each file");
            return ExitCode::from(2);
        }
    };
    let text = match with_values(&adapted(file.text, upstream, prefix), sets) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("narrowgate init: {e}");
            return ExitCode::from(2);
        }
    };
    let status = super::schema::write_stdout(&text);
    let unset = environment_references(&text);
    if !unset.is_empty() {
        eprintln!(
            "narrowgate init: this file reads {} from the environment when it loads: set {} where narrowgate runs (for `narrowgate stdio`, in the client entry's env), or print it again with --set NAME=VALUE",
            unset.join(", "),
            if unset.len() == 1 { "it" } else { "them" }
        );
    }
    status
}

/// The environment variables `text` reads (`${NAME}`; not `${caller.…}`), in order, once each.
pub fn environment_references(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (at, _) in text.match_indices("${") {
        let inner = &text[at + 2..];
        let Some(end) = inner.find('}') else { continue };
        let name = &inner[..end];
        let variable = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            // `$${…}` is a literal `${…}`.
            && !text[..at].ends_with('$');
        if variable && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// `text` with each `--set NAME=VALUE` written in place of `${NAME}`.
fn with_values(text: &str, sets: &[String]) -> Result<String, LibraryError> {
    let mut text = text.to_string();
    for set in sets {
        let Some((name, value)) = set.split_once('=').filter(|(n, _)| !n.is_empty()) else {
            return Err(LibraryError::BadSet(set.escape_debug().to_string()));
        };
        let reads = environment_references(&text);
        if !reads.iter().any(|r| r == name) {
            return Err(LibraryError::NotRead {
                name: name.escape_debug().to_string(),
                reads: if reads.is_empty() {
                    "nothing".into()
                } else {
                    reads.join(", ")
                },
            });
        }
        // The value lands inside a YAML scalar as written: keep to what needs no quoting.
        let needs_quoting = |c: char| matches!(c, '"' | '\\' | '\'' | '#' | '\n' | '\r');
        if value.chars().any(needs_quoting) || value.contains(": ") || value.contains('$') {
            return Err(LibraryError::Unquotable(set.escape_debug().to_string()));
        }
        text = text.replace(&format!("${{{name}}}"), value);
    }
    Ok(text)
}

/// `text` (a library file) for `upstream`, every tool and prompt renamed `prefix` + its name.
///
/// Line by line, because the comments must survive: the library's files keep one layout (top
/// level keys at column 0, entries of `tools:` and `prompts:` at two spaces, their fields at
/// four), which a test checks for each of them.
pub fn adapted(text: &str, upstream: &str, prefix: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len() + 64);
    let mut section = "";
    for (i, line) in lines.iter().enumerate() {
        if let Some(key) = top_level_key(line) {
            section = key;
            if key == "upstream" {
                out.push_str(&format!("upstream: {upstream}\n"));
                continue;
            }
        }
        let renames = match section {
            "tools" => Some("upstream_tool"),
            "prompts" => Some("upstream_prompt"),
            _ => None,
        };
        if let (Some(field), Some(name)) = (renames, entry_key(line))
            && !prefix.is_empty()
        {
            out.push_str(&format!("  {prefix}{name}:\n"));
            let declared = lines[i + 1..]
                .iter()
                .take_while(|l| entry_key(l).is_none() && top_level_key(l).is_none())
                .any(|l| l.trim_start().starts_with(&format!("{field}:")));
            if !declared {
                out.push_str(&format!("    {field}: {name}\n"));
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `key` of a line `key: …` at column 0.
fn top_level_key(line: &str) -> Option<&str> {
    let first = line.chars().next()?;
    if first.is_whitespace() || first == '#' || first == '-' {
        return None;
    }
    line.split_once(':').map(|(key, _)| key.trim())
}

/// `name` of an entry line `  name:` (two spaces, nothing after but a comment).
fn entry_key(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("  ")?;
    if rest.starts_with([' ', '#']) {
        return None;
    }
    let (name, after) = rest.split_once(':')?;
    let after = after.trim();
    let only_comment = after.is_empty() || after.starts_with('#');
    (only_comment && crate::contract::valid_tool_name(name)).then_some(name)
}

#[cfg(test)]
#[path = "init_library_tests.rs"]
mod tests;
