//! What the gateway tells clients about itself as an OAuth protected resource: the RFC 9728
//! metadata document, and the `WWW-Authenticate` challenges of its 401 and 403 answers
//! (RFC 6750 §3, MCP authorization 2025-11-25 incl. the step-up flow).
//!
//! Without an `oauth` block there is no metadata (404) and the 401 challenge is plain `Bearer`.

use serde_json::{Value, json};

use crate::config::Config;
use crate::contract::ContractSet;

/// The well-known path prefix of RFC 9728.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The gateway as a protected resource; `None` when `oauth` is not configured.
#[derive(Debug, Clone)]
pub struct ProtectedResource {
    /// The resource identifier: `public_url`, else the configured `audience`.
    resource: String,
    authorization_servers: Vec<String>,
    /// Every scope some contract requires, sorted: what a client may have to ask for.
    scopes_supported: Vec<String>,
    /// The metadata URL when `public_url` says where the gateway is; else built from the Host.
    metadata_url: Option<String>,
    /// The MCP endpoint's path, for a metadata URL built from the Host header.
    path: String,
}

impl ProtectedResource {
    pub fn from_config(config: &Config, contracts: &ContractSet) -> Option<ProtectedResource> {
        let oauth = config.oauth.as_ref()?;
        let resource = config
            .public_url
            .clone()
            .unwrap_or_else(|| super::oauth::audience(config, oauth));
        let authorization_servers = if oauth.authorization_servers.is_empty() {
            vec![oauth.issuer.clone()]
        } else {
            oauth.authorization_servers.clone()
        };
        let mut scopes_supported: Vec<String> = contracts
            .tools
            .values()
            .flat_map(|t| t.scopes.iter().cloned())
            .collect();
        scopes_supported.sort();
        scopes_supported.dedup();
        let metadata_url = config.public_url.as_deref().map(metadata_url_for);
        Some(ProtectedResource {
            resource,
            authorization_servers,
            scopes_supported,
            metadata_url,
            path: config.path.clone(),
        })
    }

    /// The RFC 9728 document.
    pub fn document(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "scopes_supported": self.scopes_supported,
            "bearer_methods_supported": ["header"],
            "resource_name": "narrowgate",
        })
    }

    /// Where clients find the metadata. Without `public_url` the request's (already allowed)
    /// Host is used, over http: set `public_url` behind a TLS-terminating proxy.
    pub fn metadata_url(&self, host: Option<&str>) -> String {
        match (&self.metadata_url, host) {
            (Some(url), _) => url.clone(),
            (None, Some(host)) => format!("http://{}{METADATA_PATH}{}", host.trim(), self.path),
            (None, None) => format!("{METADATA_PATH}{}", self.path),
        }
    }

    /// The 401 challenge: `resource_metadata`, the scopes a client may ask for, and for
    /// presented-but-refused credentials `error="invalid_token"` with a fixed description.
    pub fn unauthorized(&self, host: Option<&str>, invalid: Option<&str>) -> String {
        let mut params = Vec::new();
        if let Some(description) = invalid {
            params.push("error=\"invalid_token\"".to_string());
            params.push(format!("error_description=\"{}\"", quoted(description)));
        }
        params.push(format!(
            "resource_metadata=\"{}\"",
            quoted(&self.metadata_url(host))
        ));
        if !self.scopes_supported.is_empty() {
            params.push(format!(
                "scope=\"{}\"",
                quoted(&self.scopes_supported.join(" "))
            ));
        }
        format!("Bearer {}", params.join(", "))
    }
}

/// The 401 challenge for a credential that was presented but refused, without OAuth (no
/// `resource_metadata` to point at).
pub fn invalid_token(description: &str) -> String {
    format!(
        "Bearer error=\"invalid_token\", error_description=\"{}\"",
        quoted(description)
    )
}

/// The 403 step-up challenge for a tool needing `scopes`. Per RFC 6750 §3.1 (and MCP's SEP-2350)
/// `scope` lists the scopes this operation needs; the client adds those it already holds.
pub fn insufficient_scope(
    resource: Option<&ProtectedResource>,
    host: Option<&str>,
    scopes: &[String],
    description: &str,
) -> String {
    let mut header = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\"",
        quoted(&scopes.join(" "))
    );
    if let Some(r) = resource {
        header.push_str(&format!(
            ", resource_metadata=\"{}\"",
            quoted(&r.metadata_url(host))
        ));
    }
    header.push_str(&format!(", error_description=\"{}\"", quoted(description)));
    header
}

/// `https://gw.example.com/mcp` → `https://gw.example.com/.well-known/oauth-protected-resource/mcp`.
fn metadata_url_for(public_url: &str) -> String {
    let (scheme, rest) = public_url
        .split_once("://")
        .unwrap_or(("https", public_url));
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    format!("{scheme}://{authority}{METADATA_PATH}{path}")
}

/// A value safe inside a quoted-string: no quotes, backslashes or control characters.
fn quoted(value: &str) -> String {
    value
        .chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(extra: &str) -> ProtectedResource {
        let text = format!(
            "oauth:\n  issuer: https://idp.example\n  audience: https://gw.example/mcp\n  jwks_file: k.json\n{extra}"
        );
        let config: Config = Config::from_yaml(&text).expect("parses");
        ProtectedResource::from_config(&config, &ContractSet::default()).expect("oauth")
    }

    #[test]
    fn metadata_urls_follow_rfc_9728_path_insertion() {
        assert_eq!(
            metadata_url_for("https://gw.example.com/mcp"),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url_for("https://gw.example.com"),
            "https://gw.example.com/.well-known/oauth-protected-resource"
        );
        let r = resource("");
        assert_eq!(
            r.metadata_url(Some("127.0.0.1:9")),
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(r.document()["resource"], "https://gw.example/mcp");
        assert_eq!(
            r.document()["authorization_servers"],
            json!(["https://idp.example"])
        );
    }

    #[test]
    fn challenges_carry_metadata_errors_and_scopes_without_injection() {
        let r = resource("");
        let h = r.unauthorized(Some("h:1"), Some("bad \"token\"\r\n"));
        assert_eq!(
            h,
            "Bearer error=\"invalid_token\", error_description=\"bad token\", resource_metadata=\"http://h:1/.well-known/oauth-protected-resource/mcp\""
        );
        let h = insufficient_scope(Some(&r), None, &["a:b".into(), "c".into()], "needs it");
        assert!(
            h.starts_with(
                "Bearer error=\"insufficient_scope\", scope=\"a:b c\", resource_metadata="
            ),
            "{h}"
        );
    }
}
