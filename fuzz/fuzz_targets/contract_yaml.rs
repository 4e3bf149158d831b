//! Contract loading: a contract file's YAML text to compiled contracts (YAML parsing, `${VAR}`
//! expansion, the typed fields, the schema checks and their compilation).
//!
//! Checks: no panic; a contract that loads has a valid exposed name and an input schema of
//! `type: object`, and loading the same text again gives the same digests.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use narrowgate::harness::{ContractSet, valid_tool_name};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new("fuzz.yaml");
    let mut set = ContractSet::default();
    if set.add_yaml(file, text).is_err() {
        return;
    }
    for (name, tool) in &set.tools {
        assert!(valid_tool_name(name), "{name}");
        assert_eq!(
            tool.input.get("type").and_then(|t| t.as_str()),
            Some("object")
        );
    }
    let mut again = ContractSet::default();
    assert!(again.add_yaml(file, text).is_ok(), "loads once, not twice");
    let digests = |s: &ContractSet| {
        s.tools
            .values()
            .map(|t| t.digest.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(digests(&set), digests(&again));
});
