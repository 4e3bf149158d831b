//! Unit tests of the configuration's loading and checking.
use super::validate::jwks_url_allowed;
use super::*;

fn parse(text: &str) -> Result<Config, LoadError> {
    let path = Path::new("/etc/narrowgate/test.yaml");
    let mut config: Config = yaml::parse(path, text)?;
    config.source = path.to_path_buf();
    config.resolve_paths();
    config.validate()?;
    Ok(config)
}

/// Proves: plain-HTTP key sets are accepted only from loopback hosts as an HTTP client reads
/// the host, so look-alike names and user-info tricks are refused.
#[test]
fn jwks_over_plain_http_only_from_loopback() {
    for ok in [
        "https://idp.example/jwks",
        "http://127.0.0.1:8080/jwks",
        "http://127.5.6.7/jwks",
        "http://localhost/jwks",
        "http://[::1]:9/jwks",
    ] {
        assert!(jwks_url_allowed(ok), "{ok}");
    }
    for refused in [
        "http://127.evil.example/jwks",
        "http://127.0.0.1@evil.example/jwks",
        "http://localhost.evil.example/jwks",
        "http://10.0.0.1/jwks",
        "ftp://127.0.0.1/jwks",
    ] {
        assert!(!jwks_url_allowed(refused), "{refused}");
    }
}

#[test]
fn a_minimal_file_gets_the_documented_defaults() {
    let config = parse("upstreams: {}\n").expect("valid");
    assert_eq!(config.listen, "127.0.0.1:8080");
    assert_eq!(config.path, "/mcp");
    assert_eq!(config.max_request_bytes, ByteSize(1 << 20));
    assert_eq!(config.error_text_bytes, ByteSize(1 << 10));
    assert_eq!(config.contracts, PathBuf::from("/etc/narrowgate/contracts"));
    assert_eq!(config.state_backend(), Ok(StateBackend::Memory));
}

#[test]
fn unknown_keys_are_errors_that_name_the_key() {
    let e = parse("upstreams:\n  files:\n    comand: npx\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("upstreams.files"), "{e}");
    assert!(e.contains("unknown field `comand`"), "{e}");
    let e = parse("listen: 127.0.0.1:1\nlisten_port: 3\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("listen_port"), "{e}");
}

/// Proves: receipts go to exactly one place: `path` and `url` together are refused, and `url`
/// must be a PostgreSQL URL.
#[test]
fn receipts_take_a_path_or_a_postgres_url_not_both() {
    let e = parse("receipts:\n  path: r.db\n  url: postgres://h/db\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("receipts") && e.contains("not both"), "{e}");
    let e = parse("receipts:\n  url: mysql://h/db\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("receipts.url"), "{e}");
    assert!(parse("receipts:\n  url: postgresql://gw@h:5432/db\n").is_ok());
    assert!(parse("receipts:\n  retention: 7d\n").is_ok());
}

#[test]
fn bad_values_name_their_key() {
    let e = parse("upstreams:\n  w:\n    url: http://x/mcp\n    timeout: 5\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstreams.w.timeout") && e.contains("no unit"),
        "{e}"
    );
    let e = parse("upstreams:\n  Bad Name:\n    command: x\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("[a-z0-9_-]{1,32}"), "{e}");
    let e = parse("callers:\n  - name: a\n    tools: ['*']\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("callers.0") && e.contains("exactly one"), "{e}");
    let e = parse("state: postgres://x\n").unwrap_err().to_string();
    assert!(e.contains("state"), "{e}");
    for bad in [
        "error_text_bytes: 10B\n",
        "max_result_bytes: 1KiB\nerror_text_bytes: 2KiB\n",
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(
            e.contains("error_text_bytes") && e.contains("at least 64B"),
            "{e}"
        );
    }
}

#[test]
fn oauth_blocks_and_redis_urls_are_checked_at_load() {
    let oauth = |extra: &str| {
        parse(&format!(
            "public_url: https://gw.example/mcp\noauth:\n  issuer: https://idp.example\n{extra}"
        ))
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    assert_eq!(oauth("  jwks_url: https://idp.example/jwks\n"), Ok(()));
    assert_eq!(oauth("  jwks_url: http://127.0.0.1:9/jwks\n"), Ok(()));
    let e = oauth("  jwks_url: http://idp.example/jwks\n").unwrap_err();
    assert!(e.contains("oauth.jwks_url") && e.contains("https"), "{e}");
    let e = oauth("  jwks_file: /nonexistent/jwks.json\n").unwrap_err();
    assert!(
        e.contains("oauth.jwks_file") && e.contains("cannot read"),
        "{e}"
    );
    let e = oauth("").unwrap_err();
    assert!(
        e.contains("exactly one of `jwks_url` or `jwks_file`"),
        "{e}"
    );
    let e = parse("state: rediss://h:1\n").unwrap_err().to_string();
    assert!(e.contains("TLS to Redis"), "{e}");
    assert!(parse("state: redis://127.0.0.1:6379\n").is_ok());
}

#[test]
fn relative_commands_and_paths_resolve_against_the_file() {
    let config =
        parse("upstreams:\n  a:\n    command: ../bin/up\n    cwd: work\n  b:\n    command: npx\n")
            .expect("valid");
    let a = &config.upstreams["a"];
    assert_eq!(a.command.as_deref(), Some("/etc/narrowgate/../bin/up"));
    assert_eq!(a.cwd, Some(PathBuf::from("/etc/narrowgate/work")));
    assert_eq!(config.upstreams["b"].command.as_deref(), Some("npx"));
}

/// Proves: a caller without any credential is refused, except as the stdio caller of a desktop
/// gateway (whose one client needs no key); two credentials are refused either way.
#[test]
fn only_the_stdio_caller_may_have_no_key() {
    let keyless = "callers:\n  - name: me\n    tools: ['*']\n";
    let e = parse(keyless).unwrap_err().to_string();
    assert!(e.contains("needs exactly one of"), "{e}");
    assert!(parse(&format!("stdio: {{caller: me}}\n{keyless}")).is_ok());
    let both =
        "stdio: {caller: me}\ncallers:\n  - name: me\n    anonymous: true\n    api_key_env: K\n";
    assert!(parse(both).is_err());
}
