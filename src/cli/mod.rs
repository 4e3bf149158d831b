//! The command line (SPEC §6): `serve`, `check`, `init` and `hash-key`.

mod check;
mod init;
mod serve;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, DEFAULT_CONFIG_PATH, LoadError};
use crate::contract::ContractSet;

#[derive(Parser)]
#[command(
    name = "narrowgate",
    version,
    about = "An MCP gateway that exposes only contract-narrowed tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct ConfigArg {
    /// The configuration file.
    #[arg(long, env = "NARROWGATE_CONFIG", default_value = DEFAULT_CONFIG_PATH)]
    config: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    ///
    /// Example: narrowgate serve --config config/narrowgate.yaml
    Serve {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Load and check the configuration and contracts; unless --offline, connect to the upstreams
    /// and report each tool's narrowing verdict and pin status.
    ///
    /// Exit status: 0 all good, 1 problems found, 2 unusable input.
    ///
    /// Example: narrowgate check --config config/narrowgate.yaml --json
    Check {
        #[command(flatten)]
        config: ConfigArg,
        /// Do not connect to the upstreams: check only the files.
        #[arg(long)]
        offline: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a contract file for every tool of an upstream, to review and narrow.
    ///
    /// Example: narrowgate init --upstream files > contracts/files.yaml
    Init {
        #[command(flatten)]
        config: ConfigArg,
        /// The upstream (a key of `upstreams` in the configuration).
        #[arg(long)]
        upstream: String,
    },
    /// Print the SHA-256 of an API key, for `api_key_sha256`. Reads the key from stdin without KEY.
    ///
    /// Example: printf %s "$KEY" | narrowgate hash-key
    HashKey {
        /// The key; omit it to keep it out of shell history and read it from stdin.
        key: Option<String>,
    },
}

/// Runs the command line and returns the process exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { config } => serve::run(&config.config),
        Command::Check {
            config,
            offline,
            json,
        } => check::run(&config.config, offline, json),
        Command::Init { config, upstream } => init::run(&config.config, &upstream),
        Command::HashKey { key } => hash_key(key),
    }
}

fn hash_key(key: Option<String>) -> ExitCode {
    let key = match key {
        Some(k) => k,
        None => {
            let mut input = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut input) {
                eprintln!("narrowgate: cannot read the key from stdin: {e}");
                return ExitCode::from(2);
            }
            input.trim_end_matches(['\n', '\r']).to_string()
        }
    };
    if key.is_empty() {
        eprintln!("narrowgate: the key is empty");
        return ExitCode::from(2);
    }
    println!("{}", crate::policy::hash_key_hex(&key));
    ExitCode::SUCCESS
}

/// Loads the configuration and its contracts, as every command that needs them does.
fn load(config_path: &std::path::Path) -> Result<(Config, ContractSet), LoadError> {
    let config = Config::load(config_path)?;
    let contracts = ContractSet::load_dir(&config.contracts)?;
    Ok((config, contracts))
}

/// A tokio runtime for the commands that talk to upstreams.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("NARROWGATE_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
