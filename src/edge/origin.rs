//! Host and Origin matching for the DNS-rebinding defence (`http::check_host_and_origin`):
//! `allowed_hosts` and `allowed_origins` entries against the request's headers.

/// `host` is a Host header (`name[:port]`); entries without a port match any port.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
        None => host
            .rsplit_once(':')
            .map_or(host.clone(), |(n, _)| n.to_string()),
    };
    allowed.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        let entry = entry.trim_start_matches('[').replace(']', "");
        entry == "*" || entry == name || entry == host.replace(['[', ']'], "")
    })
}

/// `origin` matches an entry exactly, or an entry ending in `:*` with any port.
pub fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    allowed.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        match entry.strip_suffix(":*") {
            Some(prefix) => {
                origin == prefix
                    || origin
                        .strip_prefix(prefix)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .is_some_and(|port| port.chars().all(|c| c.is_ascii_digit()))
            }
            None => entry.trim_end_matches('/') == origin,
        }
    })
}

/// `origin` names the same host and port as `host` (the request's `Host`, already allowed): a
/// page served by the gateway's own address calling it. The scheme is not compared (a proxy may
/// end TLS in front of the gateway); a default port (80 for `http`, 443 for `https`) equals no
/// port.
pub fn same_origin(origin: &str, host: &str) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    // An origin is scheme, host and port only: anything after them is not an origin.
    if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
        return false;
    }
    let default_port = match scheme {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let host = host.trim().to_ascii_lowercase();
    let plain = |a: &str| a.strip_suffix(default_port).unwrap_or(a).to_string();
    plain(authority) == plain(&host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hosts_match_by_name_with_any_port() {
        let allowed = list(&["localhost", "127.0.0.1", "::1"]);
        assert!(host_allowed(&allowed, "localhost:8080"));
        assert!(host_allowed(&allowed, "LOCALHOST"));
        assert!(host_allowed(&allowed, "[::1]:80"));
        assert!(!host_allowed(&allowed, "evil.example.com"));
        assert!(!host_allowed(&allowed, "localhost.evil.com:80"));
        assert!(host_allowed(&list(&["*"]), "anything:1"));
        assert!(host_allowed(
            &list(&["gw.example.com:443"]),
            "gw.example.com:443"
        ));
    }

    #[test]
    fn origins_match_exactly_or_with_a_port_wildcard() {
        let allowed = list(&["https://app.example.com", "http://localhost:*"]);
        assert!(origin_allowed(&allowed, "https://app.example.com"));
        assert!(origin_allowed(&allowed, "http://localhost:6274"));
        assert!(!origin_allowed(&allowed, "http://localhost.evil.com:1"));
        assert!(!origin_allowed(&allowed, "https://evil.example.com"));
        assert!(!origin_allowed(&[], "http://localhost"));
    }

    /// Proves: an Origin naming the request's own host and port is recognised (a default port
    /// equals none), and any other host, port or a malformed origin is not.
    #[test]
    fn same_origin_is_host_and_port_equal() {
        assert!(same_origin("http://localhost:8080", "localhost:8080"));
        assert!(same_origin("http://LOCALHOST:8080", "localhost:8080"));
        assert!(same_origin("http://localhost", "localhost:80"));
        assert!(same_origin("https://gw.example.com", "gw.example.com"));
        assert!(same_origin("http://[::1]:9000", "[::1]:9000"));
        assert!(!same_origin("http://localhost:8081", "localhost:8080"));
        assert!(!same_origin("http://evil.example.com", "localhost"));
        assert!(!same_origin("http://localhost:8080/x", "localhost:8080"));
        assert!(!same_origin("http://user@localhost:8080", "localhost:8080"));
        assert!(!same_origin("null", "localhost"));
        assert!(!same_origin("https://localhost", "localhost:80"));
    }
}
