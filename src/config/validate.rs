//! The checks a configuration passes after parsing, before it is used (`Config::load`): every
//! value an operator can get wrong is named in the error with its file and key.

use std::net::SocketAddr;

use super::*;

impl Config {
    /// Checks every key whose value parsing alone cannot judge; the first problem, if any.
    pub(super) fn validate(&self) -> Result<(), LoadError> {
        match self.problems(true).into_iter().next() {
            Some(first) => Err(first),
            None => Ok(()),
        }
    }

    /// Every problem of the keys parsing alone cannot judge, in file order, so that `check`
    /// can name them all in one run. `keys_set`: whether callers' `api_key_env` variables
    /// must be set (only for the commands that authenticate callers).
    pub(super) fn problems(&self, keys_set: bool) -> Vec<LoadError> {
        let file = &self.source;
        let mut found = Vec::new();
        let mut err =
            |key: &str, message: String| found.push(LoadError::invalid(file, key, message));
        if self.listen.parse::<SocketAddr>().is_err() {
            err(
                "listen",
                format!("`{}` is not an address like 127.0.0.1:8080", self.listen),
            );
        }
        if let Some((key, message)) = self.http.problem() {
            err(&format!("http.{key}"), message);
        }
        if let Some(url) = &self.replica_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            err(
                "replica_url",
                format!(
                    "`{url}` must be an http:// or https:// URL of this replica's MCP endpoint"
                ),
            );
        }
        if !self.path.starts_with('/') || self.path.len() < 2 {
            err("path", format!("`{}` must be a path like /mcp", self.path));
        } else if self.path == "/approvals" || self.path.starts_with("/approvals/") {
            err(
                "path",
                "`/approvals` is the approvals API; serve MCP on another path".into(),
            );
        }
        if self.error_text_bytes.0 < MIN_ERROR_TEXT_BYTES
            || self.error_text_bytes.0 > self.max_result_bytes.0
        {
            err(
                "error_text_bytes",
                format!(
                    "must be at least {MIN_ERROR_TEXT_BYTES}B (room for the gateway's own words) and at most max_result_bytes ({}B); it is {}B",
                    self.max_result_bytes.0, self.error_text_bytes.0
                ),
            );
        }
        if let Some(receipts) = &self.receipts {
            match (&receipts.path, &receipts.url) {
                (Some(_), Some(_)) => {
                    err(
                        "receipts",
                        "set either `path` (SQLite) or `url` (PostgreSQL), not both".into(),
                    );
                }
                (None, Some(url))
                    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) =>
                {
                    err(
                        "receipts.url",
                        "must be a PostgreSQL URL: postgres://user:password@host:5432/database"
                            .into(),
                    );
                }
                _ => {}
            }
        }
        if let Some(stdio) = &self.stdio
            && !self.callers.iter().any(|c| c.name == stdio.caller)
        {
            err(
                "stdio.caller",
                format!(
                    "`{}` is no caller's name; name one of `callers`",
                    stdio.caller
                ),
            );
        }
        for (i, approver) in self.approvers.iter().enumerate() {
            if approver.is_empty() || approver == "role:" {
                err(
                    &format!("approvers.{i}"),
                    "must be a caller name or `role:NAME`".into(),
                );
            }
        }
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            if !origin.contains("://") {
                err(
                    &format!("allowed_origins.{i}"),
                    format!("`{origin}` must include a scheme, e.g. https://app.example.com"),
                );
            }
        }
        for (name, upstream) in &self.upstreams {
            let key = format!("upstreams.{name}");
            if !valid_upstream_name(name) {
                err(&key, "an upstream name must match [a-z0-9_-]{1,32}".into());
                continue;
            }
            match (&upstream.command, &upstream.url) {
                (Some(_), Some(_)) => {
                    err(
                        &key,
                        "set either `command` (stdio) or `url` (HTTP), not both".into(),
                    );
                }
                (None, None) => {
                    err(
                        &key,
                        "set `command` for a stdio upstream or `url` for an HTTP one".into(),
                    );
                }
                (Some(_), None) if !upstream.headers.is_empty() => {
                    err(
                        &key,
                        "`headers` applies only to HTTP upstreams (`url`)".into(),
                    );
                }
                (Some(_), None) if upstream.forwarder.is_some() => {
                    err(
                        &key,
                        "`forwarder` applies only to HTTP upstreams (`url`)".into(),
                    );
                }
                (None, Some(url)) => {
                    if !upstream.args.is_empty()
                        || !upstream.env.is_empty()
                        || upstream.cwd.is_some()
                    {
                        err(
                            &key,
                            "`args`, `env` and `cwd` apply only to stdio upstreams (`command`)"
                                .into(),
                        );
                    }
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        err(
                            &format!("{key}.url"),
                            format!("`{url}` must be an http:// or https:// URL"),
                        );
                    }
                }
                _ => {}
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut anonymous = 0;
        for (i, caller) in self.callers.iter().enumerate() {
            let key = format!("callers.{i}");
            if caller.name.is_empty() {
                err(&key, "a caller needs a `name`".into());
            } else if !seen.insert(caller.name.as_str()) {
                err(&key, format!("caller name `{}` is used twice", caller.name));
            }
            let kinds = [
                caller.api_key_sha256.is_some(),
                caller.api_key_env.is_some(),
                caller.anonymous,
            ];
            // The stdio caller may have no credential: no HTTP request can act as it then, and
            // `narrowgate stdio`'s one client (the user who launched it) needs none.
            let only_stdio = self.stdio.as_ref().is_some_and(|s| s.caller == caller.name);
            let count = kinds.iter().filter(|k| **k).count();
            if count > 1 || (count == 0 && !only_stdio) {
                err(
                    &key,
                    format!(
                        "caller `{}` needs exactly one of `api_key_sha256`, `api_key_env` or `anonymous: true` (none only as the `stdio.caller` of a desktop gateway)",
                        caller.name
                    ),
                );
            }
            if let Some(digest) = &caller.api_key_sha256
                && (digest.len() != 64 || !digest.chars().all(|c| c.is_ascii_hexdigit()))
            {
                err(
                    &format!("{key}.api_key_sha256"),
                    "must be 64 hex digits: run `narrowgate hash-key` to make one".into(),
                );
            }
            if let Some(var) = &caller.api_key_env
                && keys_set
                && !super::needs::key_is_set(var)
            {
                err(
                    &format!("{key}.api_key_env"),
                    format!("environment variable {var} is not set or empty"),
                );
            }
            if caller.anonymous {
                anonymous += 1;
            }
        }
        if anonymous > 1 {
            err("callers", "only one caller may be `anonymous: true`".into());
        }
        if let Some(oauth) = &self.oauth {
            if oauth.jwks_url.is_some() == oauth.jwks_file.is_some() {
                err(
                    "oauth",
                    "set exactly one of `jwks_url` or `jwks_file`".into(),
                );
            }
            if oauth.audience.is_none() && self.public_url.is_none() {
                err(
                    "oauth.audience",
                    "set `audience`, or `public_url` which it defaults to".into(),
                );
            }
            if oauth.issuer.is_empty() || oauth.caller_claim.is_empty() {
                err(
                    "oauth",
                    "`issuer` and `caller_claim` must not be empty".into(),
                );
            }
            if let Some(url) = &oauth.jwks_url
                && !jwks_url_allowed(url)
            {
                err(
                    "oauth.jwks_url",
                    format!(
                        "`{url}` must be an https:// URL (http:// only for loopback addresses)"
                    ),
                );
            }
            if let Some(path) = &oauth.jwks_file
                && let Err(e) = jwks::read_file(path)
            {
                err("oauth.jwks_file", e);
            }
        }
        if let Err(message) = self.state_backend() {
            err("state", message);
        }
        found
    }
}

/// `https://…`, or `http://` to a loopback address (a local issuer, tests).
pub(super) fn jwks_url_allowed(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    if !url.starts_with("http://") {
        return false;
    }
    // The host as an HTTP client will read it (after any `user@`), never a prefix match:
    // `http://127.evil.example/` and `http://127.0.0.1@evil.example/` are not loopback.
    let Some(host) = url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_string))
    else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
