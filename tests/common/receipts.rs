//! Reading receipts back the way an operator does, with `narrowgate receipts`: the tests check
//! what the command prints, not the database's layout.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `narrowgate receipts --config CONFIG ARGS...`: (exit code, stdout, stderr).
pub fn receipts_command(config: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(super::narrowgate_bin())
        .arg("receipts")
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run narrowgate receipts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The receipts `narrowgate receipts --json ARGS...` prints.
pub fn receipts_json(config: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = receipts_command(config, &all);
    assert_eq!(code, 0, "narrowgate receipts failed: {stderr}");
    match serde_json::from_str(&stdout) {
        Ok(Value::Array(receipts)) => receipts,
        other => panic!("not a JSON array: {other:?}\n{stdout}"),
    }
}
