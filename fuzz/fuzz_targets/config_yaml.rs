//! Configuration loading: a configuration file's YAML text to a validated `Config` (YAML
//! parsing, `${VAR}` expansion, the typed fields, relative paths and every validation rule).
//!
//! Checks: no panic; a configuration that loads has a listen address that parses and a
//! `state` backend it understands.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use narrowgate::harness::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::from_text(Path::new("/etc/narrowgate/fuzz.yaml"), text) else {
        return;
    };
    assert!(
        config.listen.parse::<std::net::SocketAddr>().is_ok(),
        "{}",
        config.listen
    );
    assert!(config.state_backend().is_ok(), "{}", config.state);
    assert!(config.contracts.is_absolute());
});
