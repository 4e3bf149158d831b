//! How a browser reaches the status page: the gateway's callers authenticate with
//! `Authorization: Bearer`, which a browser cannot send on its own. On the browser routes (the
//! status page, and the approvals API its buttons call) a caller may also sign in with HTTP
//! Basic, any user name and its API key (or OAuth token) as the password: a request without
//! credentials is answered 401 with a `Basic` challenge, so the browser asks for them, keeps
//! them, and sends them again with the page's own `fetch`es.
//!
//! Credentials a browser keeps are sent with requests other sites make it send too. So a request
//! that changes something (any method but GET, HEAD, OPTIONS) signed in with Basic must come from
//! the gateway's own pages: its `Origin` must be the gateway's own (the `Host` it was sent to),
//! and `Sec-Fetch-Site`, when present, `same-origin`; else 403. A request with `Bearer`
//! credentials is no browser's ambient authority and is not held to that.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;

use crate::edge::origin;
use crate::policy::Caller;
use crate::request::Admitted;
use crate::request::rejection::Rejection;

/// Credentials as presented: the secret, and whether a browser sends them on its own.
#[derive(Debug, PartialEq, Eq)]
struct Presented<'a> {
    secret: std::borrow::Cow<'a, str>,
    ambient: bool,
}

/// The layer in front of the browser routes: authenticates the caller from `Bearer` or Basic
/// credentials into the request's [`Admitted`], refuses a cross-site request that changes
/// something, and hands the handlers after it the credentials as `Authorization: Bearer`
/// (handlers that authenticate from the headers themselves see what they expect). Runs after
/// `http::admit` and `http::check_host_and_origin`, as the MCP endpoint's `authenticate` does.
pub async fn authenticate(request: Request, next: Next) -> Result<Response, Rejection> {
    let (mut parts, body) = request.into_parts();
    let gateway = parts
        .extensions
        .get::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))?
        .gateway
        .clone();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    // The anonymous caller signs into nothing here: the page and decisions need someone.
    let authorization = authorization.ok_or(Rejection::SignIn(
        "sign in with any user name and your API key as the password",
    ))?;
    let invalid = Rejection::SignIn("the credentials presented are not valid");
    let presented = presented(authorization).ok_or(invalid)?;
    let bearer = format!("Bearer {}", presented.secret);
    let caller: Arc<Caller> = match gateway.authenticator.authenticate(Some(&bearer)).await {
        Ok(caller) => caller,
        Err(e) => {
            // The reason is logged, never the credentials.
            tracing::info!(reason = %e, "browser route: request refused: 401");
            return Err(Rejection::SignIn("the credentials presented are not valid"));
        }
    };
    if presented.ambient
        && !is_safe(&parts.method)
        && let Err(why) = from_own_page(&parts.headers)
    {
        tracing::warn!(caller = %caller.name, why, "browser route: cross-site request refused: 403");
        return Err(Rejection::CrossSite(why));
    }
    if let Ok(value) = HeaderValue::from_str(&bearer) {
        parts.headers.insert(header::AUTHORIZATION, value);
    }
    if let Some(admitted) = parts.extensions.get_mut::<Admitted>() {
        admitted.caller = Some(caller);
    }
    Ok(next.run(Request::from_parts(parts, body)).await)
}

/// The secret of `Bearer SECRET` or of `Basic base64(USER:SECRET)` (schemes case-insensitive).
fn presented(authorization: &str) -> Option<Presented<'_>> {
    if let Some(token) = crate::policy::bearer_token(authorization) {
        return Some(Presented {
            secret: token.into(),
            ambient: false,
        });
    }
    let (scheme, encoded) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (_user, secret) = decoded.split_once(':')?;
    // A secret with spaces or line breaks is no key nor token, and must not reshape the header.
    if secret.is_empty() || secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    Some(Presented {
        secret: secret.to_string().into(),
        ambient: true,
    })
}

fn is_safe(method: &Method) -> bool {
    [Method::GET, Method::HEAD, Method::OPTIONS].contains(method)
}

/// `Ok` when the request comes from a page of the gateway itself: an `Origin` equal to the origin
/// of the `Host` it was sent to, and no `Sec-Fetch-Site` other than `same-origin`.
fn from_own_page(headers: &HeaderMap) -> Result<(), &'static str> {
    if let Some(site) = headers.get("sec-fetch-site")
        && site.as_bytes() != b"same-origin"
    {
        return Err("Sec-Fetch-Site is not same-origin");
    }
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .ok_or("no Origin header")?;
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or("no Host header")?;
    match origin::same_origin(origin, host) {
        true => Ok(()),
        false => Err("the Origin is not the gateway's own"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user_and_secret: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_and_secret)
        )
    }

    /// Proves: the secret is read from Bearer and from Basic's password (any user name), Basic
    /// is marked ambient, and malformed or whitespace-laden secrets are refused.
    #[test]
    fn credentials_are_read_from_bearer_and_basic() {
        let bearer = presented("Bearer k1").expect("bearer");
        assert_eq!((bearer.secret.as_ref(), bearer.ambient), ("k1", false));
        let header = basic("alice:k:1");
        let basic_ = presented(&header).expect("basic");
        assert_eq!((basic_.secret.as_ref(), basic_.ambient), ("k:1", true));
        let anyone = basic(":k2");
        assert_eq!(
            presented(&anyone).map(|p| p.secret.into_owned()),
            Some("k2".into())
        );
        for bad in [
            basic("alice"),
            basic("alice:"),
            basic("a:k 1"),
            basic("a:k\r\nX: y"),
        ] {
            assert_eq!(presented(&bad), None, "{bad}");
        }
        assert_eq!(presented("Basic !!!"), None);
        assert_eq!(presented("Digest x"), None);
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("header value"));
        }
        map
    }

    /// Proves: only a request whose Origin is the gateway's own (and whose Sec-Fetch-Site, if
    /// any, is same-origin) counts as from the gateway's page; no Origin at all does not.
    #[test]
    fn only_the_gateways_own_pages_pass_the_same_origin_check() {
        let host = ("host", "127.0.0.1:8080");
        let own = ("origin", "http://127.0.0.1:8080");
        assert!(from_own_page(&headers(&[host, own])).is_ok());
        assert!(from_own_page(&headers(&[host, own, ("sec-fetch-site", "same-origin")])).is_ok());
        assert!(from_own_page(&headers(&[host, own, ("sec-fetch-site", "cross-site")])).is_err());
        assert!(from_own_page(&headers(&[host, ("origin", "http://evil.example")])).is_err());
        assert!(from_own_page(&headers(&[host, ("origin", "http://127.0.0.1:9090")])).is_err());
        assert!(from_own_page(&headers(&[host, ("origin", "null")])).is_err());
        assert!(from_own_page(&headers(&[host])).is_err());
    }
}
