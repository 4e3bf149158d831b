//! `narrowgate schema config|contract` and `narrowgate completions SHELL`: what editors and shells
//! need to help write the files and the commands, generated from the code so they cannot drift.

use std::io::Write;
use std::process::ExitCode;

use serde_json::Value;

use crate::config::schema::document;

/// Which file's schema to print.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum SchemaFile {
    /// The configuration file (config/narrowgate.yaml).
    Config,
    /// A contract file (contracts/*.yaml).
    Contract,
}

pub(super) const SCHEMA_HELP: &str = "Examples:
  narrowgate schema config > schemas/config.schema.json
  narrowgate schema contract > schemas/contract.schema.json

Editors with the YAML language server validate and complete a file whose first line names its schema:
  # yaml-language-server: $schema=../schemas/config.schema.json";

pub(super) const COMPLETIONS_HELP: &str = "Examples:
  narrowgate completions bash > ~/.local/share/bash-completion/completions/narrowgate
  narrowgate completions zsh > ~/.zfunc/_narrowgate     # with fpath+=(~/.zfunc) before compinit
  narrowgate completions fish > ~/.config/fish/completions/narrowgate.fish";

/// The JSON Schema (2020-12) of `file`.
pub fn schema_of(file: SchemaFile) -> Value {
    match file {
        SchemaFile::Config => document::<crate::config::Config>("narrowgate configuration"),
        SchemaFile::Contract => document::<crate::contract::ContractFile>("narrowgate contract"),
    }
}

/// Prints the schema as pretty JSON with a trailing newline: the bytes of `schemas/*.schema.json`.
pub(super) fn print_schema(file: SchemaFile) -> ExitCode {
    let text = match serde_json::to_string_pretty(&schema_of(file)) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("narrowgate schema: cannot write the schema as JSON: {e}");
            return ExitCode::FAILURE;
        }
    };
    write_stdout(&format!("{text}\n"))
}

/// Prints the completion script for `shell`.
pub(super) fn print_completions(
    shell: clap_complete::Shell,
    mut command: clap::Command,
) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "narrowgate", &mut script);
    write_stdout(&String::from_utf8_lossy(&script))
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not worth a panic.
pub(super) fn write_stdout(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("narrowgate: cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
