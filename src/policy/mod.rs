//! Who is calling, and what they may use (docs/semantics.md).
//!
//! [`Authenticator`] turns the `Authorization` header into a [`Caller`] (an API key, a JWT checked
//! by [`oauth`], or the anonymous caller); [`Caller::may_use`] is the one decision that both
//! filters `tools/list` and guards `tools/call`, so a caller can never call a tool it cannot see,
//! nor see one it cannot call.
//!
//! Scopes are deliberately *not* part of that decision: a tool the caller may use but lacks the
//! `scopes` for is listed, and calling it answers HTTP 403 `insufficient_scope` naming the scopes
//! ([`Caller::missing_scopes`]). That is the step-up flow of the MCP authorization spec
//! (2025-11-25): the client must see the tool to try it and learn which scopes to ask for.
//! [`limits`] holds the rate limits.

mod jwks;
pub mod limits;
pub mod names;
pub mod oauth;
pub mod resource;

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::{Config, Discovery, Rate};

pub use crate::config::glob::glob_match;
pub use oauth::{TokenError, TokenValidator};

/// An authenticated caller, as policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    /// Globs over exposed tool names.
    pub tools: Vec<String>,
    /// Globs over resource URIs (and declared URI templates).
    pub resources: Vec<String>,
    /// Globs over exposed prompt names.
    pub prompts: Vec<String>,
    pub scopes: Vec<String>,
    /// The caller's roles (the configured `roles` of an API-key caller, or every role its token's
    /// `roles_claim` names), as `when` preconditions read them.
    pub roles: Vec<String>,
    pub rate: Option<Rate>,
    /// A token caller's verified claims, as `fixed: ${caller.claims.NAME}` reads them
    /// (`Null` for an API-key caller).
    pub claims: serde_json::Value,
    /// How the caller finds its tools: every tool in `tools/list`, or the search meta-tools.
    pub discovery: Discovery,
    /// With `discovery: search`: globs over the tool names listed all the same.
    pub always: Vec<String>,
}

impl Caller {
    /// Whether this caller finds its tools by searching (`discovery: search`).
    pub fn searches(&self) -> bool {
        self.discovery == Discovery::Search
    }

    /// Whether `tools/list` shows `tool` to this searching caller (it also must [`may_use`]
    /// it).
    ///
    /// [`may_use`]: Self::may_use
    pub fn always_lists(&self, tool: &str) -> bool {
        self.always.iter().any(|pattern| glob_match(pattern, tool))
    }

    /// Whether this caller is one of `approvers` (a caller name, or `role:NAME`).
    pub fn is_approver(&self, approvers: &[String]) -> bool {
        approvers.iter().any(|a| match a.strip_prefix("role:") {
            Some(role) => self.roles.iter().any(|r| r == role),
            None => *a == self.name,
        })
    }

    /// Whether this caller may see and call the exposed tool `tool`.
    pub fn may_use(&self, tool: &str) -> bool {
        self.tools.iter().any(|pattern| glob_match(pattern, tool))
    }

    /// Whether this caller may see, read and subscribe to the resource `uri` (or the declared
    /// URI template `uri`).
    pub fn may_read(&self, uri: &str) -> bool {
        self.resources
            .iter()
            .any(|pattern| glob_match(pattern, uri))
    }

    /// Whether this caller may see and get the exposed prompt `prompt`.
    pub fn may_get(&self, prompt: &str) -> bool {
        self.prompts
            .iter()
            .any(|pattern| glob_match(pattern, prompt))
    }

    /// The scopes of `required` this caller does not hold (empty: it holds them all).
    pub fn missing_scopes<'a>(&self, required: &'a [String]) -> Vec<&'a str> {
        required
            .iter()
            .filter(|s| !self.scopes.contains(s))
            .map(String::as_str)
            .collect()
    }
}

/// Why a request has no caller. All are answered 401: the detail is logged, and for tokens a fixed
/// description is sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("no credentials were presented")]
    Missing,
    #[error("the credentials presented are not valid")]
    Invalid,
    #[error("bearer token refused: {0}")]
    Token(TokenError),
}

/// Resolves credentials to callers. API keys are held only as SHA-256 digests.
#[derive(Default)]
pub struct Authenticator {
    keyed: Vec<([u8; 32], Arc<Caller>)>,
    anonymous: Option<Arc<Caller>>,
    tokens: Option<TokenValidator>,
    /// The names in `callers`: a token naming one of them is refused, since sessions, limits and
    /// receipts are keyed by caller name and a token must not act as (or be counted as) a
    /// configured caller.
    configured_names: std::collections::HashSet<String>,
    /// Every configured caller by name, keyed or not: `stdio.caller` names one.
    named: std::collections::HashMap<String, Arc<Caller>>,
}

impl Authenticator {
    /// Builds the key table from `callers`. `api_key_env` keys are read (and hashed) now.
    pub fn from_config(config: &Config) -> Authenticator {
        let mut auth = Authenticator::default();
        for c in &config.callers {
            auth.configured_names.insert(c.name.clone());
            let caller = Arc::new(Caller {
                name: c.name.clone(),
                tools: c.tools.clone(),
                resources: c.resources.clone(),
                prompts: c.prompts.clone(),
                scopes: c.scopes.clone(),
                roles: c.roles.clone(),
                rate: c.rate,
                claims: serde_json::Value::Null,
                discovery: c.discovery,
                always: c.always.clone(),
            });
            auth.named.insert(c.name.clone(), caller.clone());
            let digest = if let Some(hex_digest) = &c.api_key_sha256 {
                decode_digest(hex_digest)
            } else if let Some(var) = &c.api_key_env {
                std::env::var(var).ok().map(|key| hash_key(&key))
            } else {
                None
            };
            match digest {
                Some(d) => auth.keyed.push((d, caller)),
                None if c.anonymous => auth.anonymous = Some(caller),
                None => {}
            }
        }
        auth.tokens = config
            .oauth
            .as_ref()
            .map(|oauth| TokenValidator::from_config(config, oauth));
        auth
    }

    /// Whether anyone at all can connect.
    pub fn has_callers(&self) -> bool {
        !self.keyed.is_empty() || self.anonymous.is_some() || self.tokens.is_some()
    }

    /// The caller for an `Authorization` header value (`None` when absent). A request without
    /// credentials is the anonymous caller if one is configured; a request with wrong credentials
    /// never is. API keys are tried first; a bearer value that is no API key and looks like a JWT
    /// is checked as a token when `oauth` is configured.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<Arc<Caller>, AuthError> {
        let Some(header) = authorization else {
            return self.anonymous.clone().ok_or(AuthError::Missing);
        };
        let token = bearer_token(header).ok_or(AuthError::Invalid)?;
        if let Some(caller) = self.api_key_caller(token) {
            return Ok(caller);
        }
        match &self.tokens {
            Some(validator) if token.bytes().filter(|b| *b == b'.').count() == 2 => {
                let caller = validator.validate(token).await.map_err(AuthError::Token)?;
                if self.configured_names.contains(&caller.name) {
                    return Err(AuthError::Token(TokenError::NameTaken(caller.name)));
                }
                Ok(Arc::new(caller))
            }
            _ => Err(AuthError::Invalid),
        }
    }

    /// The configured caller named `name`, whatever its credentials: the caller a stdio
    /// gateway's client acts as by configuration (`stdio.caller`).
    pub fn named(&self, name: &str) -> Option<Arc<Caller>> {
        self.named.get(name).cloned()
    }

    fn api_key_caller(&self, token: &str) -> Option<Arc<Caller>> {
        let presented = hash_key(token);
        // Compare against every entry without stopping early, in constant time per entry.
        let mut found = None;
        for (digest, caller) in &self.keyed {
            if constant_time_eq(digest, &presented) {
                found = Some(caller);
            }
        }
        found.cloned()
    }
}

/// The token of `Bearer <token>` (the scheme is case-insensitive).
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// SHA-256 of an API key, as `api_key_sha256` stores it.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Hex form of [`hash_key`], as `narrowgate hash-key` prints it.
pub fn hash_key_hex(key: &str) -> String {
    hex::encode(hash_key(key))
}

fn decode_digest(hex_digest: &str) -> Option<[u8; 32]> {
    hex::decode(hex_digest.to_ascii_lowercase())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CallerConfig;

    fn caller(name: &str, key: Option<&str>, anonymous: bool) -> CallerConfig {
        CallerConfig {
            name: name.into(),
            api_key_sha256: key.map(hash_key_hex),
            api_key_env: None,
            anonymous,
            tools: vec!["read_*".into()],
            discovery: Default::default(),
            always: vec![],
            resources: vec![],
            prompts: vec![],
            rate: None,
            scopes: vec![],
            roles: vec![],
        }
    }

    fn authenticator(callers: Vec<CallerConfig>) -> Authenticator {
        let mut config: Config = Config::from_yaml("{}").expect("empty config parses");
        config.callers = callers;
        Authenticator::from_config(&config)
    }

    /// `authenticate` without a runtime: API keys never await anything.
    fn auth_now(auth: &Authenticator, header: Option<&str>) -> Result<String, AuthError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime
            .block_on(auth.authenticate(header))
            .map(|c| c.name.clone())
    }

    #[test]
    fn keys_resolve_to_their_caller_and_bad_keys_never_fall_back_to_anonymous() {
        let auth = authenticator(vec![
            caller("alice", Some("k1"), false),
            caller("anon", None, true),
        ]);
        assert_eq!(auth_now(&auth, Some("Bearer k1")), Ok("alice".into()));
        assert_eq!(auth_now(&auth, Some("bearer k1")), Ok("alice".into()));
        assert_eq!(auth_now(&auth, None), Ok("anon".into()));
        assert_eq!(
            auth_now(&auth, Some("Bearer nope")),
            Err(AuthError::Invalid)
        );
        assert_eq!(auth_now(&auth, Some("Basic k1")), Err(AuthError::Invalid));
        // Without an `oauth` block a JWT-shaped value is just a wrong key.
        assert_eq!(
            auth_now(&auth, Some("Bearer a.b.c")),
            Err(AuthError::Invalid)
        );
    }

    #[test]
    fn without_an_anonymous_caller_missing_credentials_are_refused() {
        let auth = authenticator(vec![caller("alice", Some("k1"), false)]);
        assert_eq!(auth_now(&auth, None), Err(AuthError::Missing));
    }

    #[test]
    fn missing_scopes_lists_exactly_the_ones_not_held() {
        let c = Caller {
            name: "c".into(),
            tools: vec![],
            resources: vec![],
            prompts: vec![],
            scopes: vec!["a".into(), "b".into()],
            roles: vec![],
            rate: None,
            claims: serde_json::Value::Null,
            discovery: Default::default(),
            always: vec![],
        };
        let required = vec!["b".to_string(), "c".to_string(), "d".to_string()];
        assert_eq!(c.missing_scopes(&required), vec!["c", "d"]);
        assert!(c.missing_scopes(&required[..1]).is_empty());
    }

    #[test]
    fn hash_key_matches_the_spec_example() {
        // The documented example digest is sha256("foo").
        assert_eq!(
            hash_key_hex("foo"),
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
        );
    }

    #[test]
    fn may_use_matches_globs_and_defaults_to_nothing() {
        let mut c = Caller {
            name: "c".into(),
            tools: vec![],
            resources: vec![],
            prompts: vec![],
            scopes: vec![],
            roles: vec![],
            rate: None,
            claims: serde_json::Value::Null,
            discovery: Default::default(),
            always: vec![],
        };
        assert!(!c.may_use("read_file"));
        c.tools = vec!["read_*".into(), "get_weather".into()];
        assert!(c.may_use("read_file") && c.may_use("get_weather"));
        assert!(!c.may_use("write_file") && !c.may_use("get_weather2"));
    }
}
