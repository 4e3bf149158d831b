//! The gateway as an OAuth 2.1 resource server (`oauth`, docs/configuration.md and docs/security.md): JWT bearer tokens are
//! checked against the issuer's keys (a JWKS URL, cached, or a file) and turned into a [`Caller`].
//!
//! What a token must satisfy, and why:
//! - signed with RS256, ES256 or EdDSA by a key of the issuer's key set. Never `none`, never an
//!   HMAC algorithm: a symmetric "key" taken from a public JWKS would let anyone sign tokens;
//! - `iss` equal to `issuer`, and `aud` naming this gateway (`audience`, default `public_url`):
//!   RFC 8707, so a token minted for another service cannot be replayed here;
//! - `exp` in the future and `nbf` (if present) in the past, give or take [`CLOCK_SKEW`].
//!
//! The caller's name comes from `caller_claim`, its roles from `roles_claim` (a string or a list),
//! its scopes from `scope` (space separated) or `scp` (a list). Roles grant tool globs and a rate;
//! `default` applies to every valid token.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;

use super::Caller;
use super::jwks::{JWKS_FETCH_TIMEOUT, JWKS_TTL, KeySet, KeySource, RemoteKeys, Why};
use crate::config::{Config, Discovery, OAuthConfig, Rate, RoleConfig};

/// Tolerated difference between the issuer's clock and ours, for `exp` and `nbf`.
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Why a bearer token was refused. Logged; the client only gets [`TokenError::client_text`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token's algorithm {0:?} is not accepted (only RS256, ES256 and EdDSA are)")]
    Algorithm(String),
    #[error("no key with id {0:?} in the issuer's key set (even after refetching it)")]
    UnknownKey(String),
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token's `aud` does not name this gateway")]
    Audience,
    #[error("the token's `iss` is not the configured issuer")]
    Issuer,
    #[error("the token lacks the required claim `{0}`")]
    MissingClaim(String),
    #[error("the issuer's keys are not available: {0}")]
    KeysUnavailable(String),
    #[error("the token is not valid: {0}")]
    Other(String),
    #[error(
        "the token names caller `{0}`, which is a caller of the configuration (an API key): \
         token subjects and configured caller names must differ"
    )]
    NameTaken(String),
}

impl TokenError {
    /// A short description for `WWW-Authenticate` / the 401 body: fixed texts only, so nothing
    /// from the request is echoed into a header.
    pub fn client_text(&self) -> &'static str {
        match self {
            TokenError::Expired => "the token has expired",
            TokenError::NotYetValid => "the token is not valid yet",
            TokenError::Audience => "the token was not issued for this resource",
            TokenError::Issuer => "the token was not issued by the expected issuer",
            TokenError::KeysUnavailable(_) => "the token cannot be verified right now",
            _ => "the token is not valid",
        }
    }
}

/// Checks bearer JWTs and maps them to callers.
pub struct TokenValidator {
    issuer: String,
    audience: String,
    caller_claim: String,
    roles_claim: Option<String>,
    roles: BTreeMap<String, RoleConfig>,
    keys: KeySource,
}

impl TokenValidator {
    /// Builds the validator for `config.oauth`. A `jwks_file` is read now; a `jwks_url` is
    /// fetched on first use. A file that cannot be read leaves no keys: every token is refused.
    pub fn from_config(config: &Config, oauth: &OAuthConfig) -> TokenValidator {
        let keys = match (&oauth.jwks_file, &oauth.jwks_url) {
            (Some(file), _) => KeySource::File(KeySet::load_file(file).unwrap_or_else(|e| {
                tracing::error!("oauth.jwks_file: {e}; every token will be refused");
                KeySet::default()
            })),
            (None, url) => KeySource::Url(Arc::new(RemoteKeys {
                url: url.clone().unwrap_or_default(),
                client: reqwest::Client::builder()
                    .timeout(JWKS_FETCH_TIMEOUT)
                    .build()
                    .unwrap_or_default(),
                current: RwLock::default(),
                fetch: tokio::sync::Mutex::default(),
            })),
        };
        TokenValidator {
            issuer: oauth.issuer.clone(),
            audience: audience(config, oauth),
            caller_claim: oauth.caller_claim.clone(),
            roles_claim: oauth.roles_claim.clone(),
            roles: oauth.roles.clone(),
            keys,
        }
    }

    /// Validates `token` and returns its caller.
    pub async fn validate(&self, token: &str) -> Result<Caller, TokenError> {
        let alg = header_alg(token)?;
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)?;
        let kid = header.kid.as_deref();
        let claims = match &self.keys {
            KeySource::File(set) => self.check(token, set, kid, alg)?,
            KeySource::Url(remote) => {
                let mut set = remote.current();
                if set.keys.is_empty() {
                    // Nothing to check against yet: this request waits for the first fetch.
                    remote.refresh(remote.generation(), Why::Stale).await;
                    set = remote.current();
                } else if set.fetched_at.is_none_or(|t| t.elapsed() > JWKS_TTL) {
                    // Stale keys still verify while a fresh set is fetched in the background,
                    // so an unreachable issuer does not stall every request.
                    let remote = remote.clone();
                    let seen = remote.generation();
                    tokio::spawn(async move { remote.refresh(seen, Why::Stale).await });
                }
                if set.keys.is_empty() {
                    return Err(TokenError::KeysUnavailable(format!(
                        "no usable key fetched from {}",
                        remote.url
                    )));
                }
                match self.check(token, &set, kid, alg) {
                    Err(TokenError::UnknownKey(_)) => {
                        remote.refresh(remote.generation(), Why::UnknownKid).await;
                        self.check(token, &remote.current(), kid, alg)?
                    }
                    other => other?,
                }
            }
        };
        self.caller(&claims)
    }

    /// Verifies the signature and the registered claims against the keys in `set`.
    fn check(
        &self,
        token: &str,
        set: &KeySet,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Value, TokenError> {
        let candidates = set.candidates(kid, alg);
        if candidates.is_empty() {
            let shown: String = kid.unwrap_or("(none)").chars().take(64).collect();
            return Err(TokenError::UnknownKey(shown));
        }
        let mut validation = Validation::new(alg);
        validation.leeway = CLOCK_SKEW.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let mut last = TokenError::Signature;
        for key in candidates {
            match jsonwebtoken::decode::<Value>(token, &key.key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => {
                    last = classify(e);
                    if last != TokenError::Signature {
                        break; // the signature verified: the claims are what is wrong
                    }
                }
            }
        }
        Err(last)
    }

    /// The caller a verified token's claims describe.
    fn caller(&self, claims: &Value) -> Result<Caller, TokenError> {
        let name = claim(claims, &self.caller_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenError::MissingClaim(self.caller_claim.clone()))?;
        let mut roles: Vec<&RoleConfig> = self.roles.get("default").into_iter().collect();
        let mut role_names: Vec<String> = Vec::new();
        if let Some(path) = &self.roles_claim {
            for role in strings(claim(claims, path)) {
                if !role_names.iter().any(|r| r == role) {
                    role_names.push(role.to_string());
                }
                if role != "default"
                    && let Some(r) = self.roles.get(role)
                {
                    roles.push(r);
                }
            }
        }
        let union = |of: fn(&RoleConfig) -> &Vec<String>| {
            let mut all: Vec<String> = Vec::new();
            for role in &roles {
                for glob in of(role) {
                    if !all.contains(glob) {
                        all.push(glob.clone());
                    }
                }
            }
            all
        };
        let tools = union(|r| &r.tools);
        let resources = union(|r| &r.resources);
        let prompts = union(|r| &r.prompts);
        let rate = roles
            .iter()
            .filter_map(|r| r.rate)
            .reduce(|a, b| if more_generous(b, a) { b } else { a });
        let mut scopes: Vec<String> = Vec::new();
        let from_scope = claims.get("scope").and_then(Value::as_str).unwrap_or("");
        for s in from_scope
            .split_whitespace()
            .chain(strings(claims.get("scp")).flat_map(str::split_whitespace))
        {
            if !scopes.iter().any(|have| have == s) {
                scopes.push(s.to_string());
            }
        }
        Ok(Caller {
            // The claim is the issuer's text: escaped and bounded before it names anyone in
            // logs, receipts and spans (distinct claims stay distinct names).
            name: super::names::caller_name(name).into_owned(),
            tools,
            resources,
            prompts,
            scopes,
            roles: role_names,
            rate,
            claims: claims.clone(),
            // Any role that searches makes the token search; `always` is the roles' union.
            discovery: if roles.iter().any(|r| r.discovery == Discovery::Search) {
                Discovery::Search
            } else {
                Discovery::List
            },
            always: union(|r| &r.always),
        })
    }
}

/// The audience tokens must carry: `audience`, else `public_url` (validated at load).
pub fn audience(config: &Config, oauth: &OAuthConfig) -> String {
    oauth
        .audience
        .clone()
        .or_else(|| config.public_url.clone())
        .unwrap_or_default()
}

/// The header's `alg`, read before anything else so `none` and HMAC are refused by name.
fn header_alg(token: &str) -> Result<Algorithm, TokenError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .map_err(|_| TokenError::Malformed)?;
    let header: Value = serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)?;
    let name = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(TokenError::Malformed)?;
    match name {
        "RS256" => Ok(Algorithm::RS256),
        "ES256" => Ok(Algorithm::ES256),
        "EdDSA" => Ok(Algorithm::EdDSA),
        other => Err(TokenError::Algorithm(other.chars().take(16).collect())),
    }
}

fn classify(e: jsonwebtoken::errors::Error) -> TokenError {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.into_kind() {
        K::InvalidSignature => TokenError::Signature,
        K::ExpiredSignature => TokenError::Expired,
        K::ImmatureSignature => TokenError::NotYetValid,
        K::InvalidAudience => TokenError::Audience,
        K::InvalidIssuer => TokenError::Issuer,
        K::MissingRequiredClaim(c) => TokenError::MissingClaim(c),
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::UnsupportedAlgorithm => {
            TokenError::Algorithm("(mismatch with the key)".into())
        }
        K::InvalidToken | K::Base64(_) | K::Json(_) | K::Utf8(_) => TokenError::Malformed,
        other => TokenError::Other(format!("{other:?}")),
    }
}

/// A claim by name, or by a dotted path into nested objects (`realm_access.roles`).
fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    claims
        .get(path)
        .or_else(|| path.split('.').try_fold(claims, |v, key| v.get(key)))
}

/// A claim that is a string or a list of strings.
fn strings(value: Option<&Value>) -> impl Iterator<Item = &str> {
    let (one, many) = match value {
        Some(Value::String(s)) => (Some(s.as_str()), None),
        Some(Value::Array(items)) => (None, Some(items.iter().filter_map(Value::as_str))),
        _ => (None, None),
    };
    one.into_iter().chain(many.into_iter().flatten())
}

/// Whether `a` admits more calls than `b` over time (then more at once).
fn more_generous(a: Rate, b: Rate) -> bool {
    let (a_count, a_per) = (u128::from(a.count.get()), a.per.as_millis());
    let (b_count, b_per) = (u128::from(b.count.get()), b.per.as_millis());
    let lhs = a_count * b_per;
    let rhs = b_count * a_per;
    lhs > rhs || (lhs == rhs && a.burst > b.burst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validator(roles_yaml: &str) -> TokenValidator {
        let text = format!(
            "public_url: https://gw.example/mcp\noauth:\n  issuer: https://idp.example\n  jwks_url: https://idp.example/jwks\n  roles_claim: groups\n  roles:\n{roles_yaml}"
        );
        let config: Config = Config::from_yaml(&text).expect("config parses");
        let oauth = config.oauth.clone().expect("oauth block");
        TokenValidator::from_config(&config, &oauth)
    }

    #[test]
    fn roles_grant_tools_and_the_most_generous_rate_and_default_applies_to_all() {
        let v = validator(
            "    default: { tools: [get_time], rate: 1/s }\n    support: { tools: ['tickets_*'], rate: 5/s }\n    ops: { tools: ['*'] }\n",
        );
        let c = v
            .caller(&serde_json::json!({"sub": "u1", "groups": ["support", "nobody"], "scope": "a b", "scp": ["c"]}))
            .expect("caller");
        assert_eq!(c.name, "u1");
        assert_eq!(c.tools, vec!["get_time", "tickets_*"]);
        assert_eq!(c.rate, "5/s".parse::<Rate>().ok());
        assert_eq!(c.scopes, vec!["a", "b", "c"]);
        let c = v
            .caller(&serde_json::json!({"sub": "u2", "groups": "ops"}))
            .expect("caller");
        assert_eq!(c.tools, vec!["get_time", "*"]);
        assert_eq!(
            c.rate,
            "1/s".parse::<Rate>().ok(),
            "a role without rate adds none"
        );
        let c = v.caller(&serde_json::json!({"sub": "u3"})).expect("caller");
        assert_eq!(c.tools, vec!["get_time"]);
        assert_eq!(
            v.caller(&serde_json::json!({"sub": 7})),
            Err(TokenError::MissingClaim("sub".into()))
        );
    }

    /// Proves: a token's subject with a newline or a megabyte of text names its caller escaped and
    /// bounded (logs, receipts and spans all take the caller's name from here).
    #[test]
    fn token_subjects_are_escaped_and_bounded() {
        let v = validator("    default: { tools: [] }\n");
        let c = v
            .caller(&serde_json::json!({"sub": "eve\nINFO tools/call caller=admin"}))
            .expect("caller");
        assert!(!c.name.contains('\n'), "{}", c.name);
        assert!(c.name.starts_with("eve\\nINFO"), "{}", c.name);
        let c = v
            .caller(&serde_json::json!({"sub": "s".repeat(1 << 20)}))
            .expect("caller");
        assert!(c.name.len() <= 128, "{} bytes", c.name.len());
    }

    #[test]
    fn nested_role_claims_are_found_by_dotted_path() {
        let claims = serde_json::json!({"realm_access": {"roles": ["a", "b"]}});
        assert_eq!(
            strings(claim(&claims, "realm_access.roles")).collect::<Vec<_>>(),
            vec!["a", "b"]
        );
    }

    #[test]
    fn only_asymmetric_algorithms_are_accepted_by_name() {
        let h = |json: &str| {
            format!(
                "{}.e30.sig",
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
            )
        };
        assert_eq!(header_alg(&h(r#"{"alg":"RS256"}"#)), Ok(Algorithm::RS256));
        assert_eq!(
            header_alg(&h(r#"{"alg":"none"}"#)),
            Err(TokenError::Algorithm("none".into()))
        );
        assert_eq!(
            header_alg(&h(r#"{"alg":"HS256"}"#)),
            Err(TokenError::Algorithm("HS256".into()))
        );
        assert_eq!(header_alg("a.b"), Err(TokenError::Malformed));
        assert_eq!(header_alg("!!.b.c"), Err(TokenError::Malformed));
    }

    #[test]
    fn hmac_keys_in_a_jwks_are_never_used() {
        let set =
            KeySet::parse(br#"{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}"#).expect("parses");
        assert!(set.keys.is_empty());
    }

    #[test]
    fn generosity_compares_rates_over_time_then_burst() {
        let r = |t: &str| t.parse::<Rate>().expect("rate");
        assert!(more_generous(r("2/s"), r("100/m")));
        assert!(!more_generous(r("100/m"), r("2/s")));
        assert!(more_generous(r("1/s burst 5"), r("1/s")));
        assert!(
            !more_generous(r("1/s burst 5"), r("60/m")),
            "60/m bursts 60"
        );
    }
}
