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
}
