//! The command line: `serve`, `stdio`, `check`, `init`, `connect`, `receipts`, `approvals`,
//! `hash-key`, `schema` and `completions`.

mod approvals;
mod check;
mod check_offer;
mod check_reach;
mod check_written_for;
mod connect;
mod init;
mod init_content;
mod init_library;
mod init_offer;
mod receipts;
mod receipts_summary;
mod schema;
mod serve;
mod stdio;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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
        /// Log lines as readable text (`human`) or one JSON object per line (`json`).
        #[arg(long, env = "NARROWGATE_LOG_FORMAT", value_enum, default_value_t)]
        log_format: crate::telemetry::logs::LogFormat,
        /// Threads that serve calls (default: one per CPU core available). On a machine whose
        /// cores are busy with other work (the upstreams, the clients), fewer threads spend less
        /// CPU per call: see BENCHMARKS.md.
        #[arg(long, env = "NARROWGATE_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
        workers: Option<u16>,
    },
    /// Serve MCP on stdin/stdout to the one client that launches the gateway.
    ///
    /// For desktop clients and IDEs (`narrowgate connect` writes their entry) and any SDK's stdio
    /// client. The caller is the one whose API key is in NARROWGATE_API_KEY, else the
    /// configuration's `stdio: {caller: NAME}`. Upstreams, contracts, receipts, approvals and
    /// limits work as under `serve`; stdout carries MCP only, logs go to stderr. Exits when the
    /// client closes stdin; status 2 when the files or the caller are wrong.
    ///
    /// Example: NARROWGATE_API_KEY=… narrowgate stdio --config ~/.config/narrowgate/narrowgate.yaml
    Stdio {
        #[command(flatten)]
        config: ConfigArg,
        /// Log lines (on stderr) as readable text (`human`) or one JSON object per line (`json`).
        #[arg(long, env = "NARROWGATE_LOG_FORMAT", value_enum, default_value_t)]
        log_format: crate::telemetry::logs::LogFormat,
    },
    /// Check the configuration and contracts; unless --offline, also each tool against its upstream.
    ///
    /// Loads the configuration and every contract as `serve` would. Unless --offline, starts or
    /// connects to each upstream once, lists its tools and reports per tool: enabled or disabled
    /// (and why), the narrowing verdict (narrower, WIDER at a schema path, EMPTY, unproven), the
    /// pin status (matches, mismatch, unpinned) and the upstream digest to copy into `pin:`.
    #[command(after_help = check::AFTER_HELP)]
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
    /// Starts or connects to the upstream once and prints, for each of its tools, a contract that
    /// exposes it unchanged: its schemas converted to JSON Schema 2020-12, its title and
    /// description copied, privilege/side_effects/idempotent guessed from its annotations (marked
    /// GUESSED), and a `pin` of its current definition. Names that are not valid exposed names
    /// (^[A-Za-z0-9_-]{1,64}$) are mapped, keeping the original as `upstream_tool`.
    #[command(after_help = init::AFTER_HELP)]
    Init {
        #[command(flatten)]
        config: ConfigArg,
        /// The upstream (a key of `upstreams` in the configuration).
        #[arg(long)]
        upstream: String,
        /// Expose every tool and prompt as PREFIX<name>, keeping the upstream's name as
        /// `upstream_tool`/`upstream_prompt`: for a second copy of a server already scaffolded.
        #[arg(long, value_name = "PREFIX")]
        prefix: Option<String>,
        /// Print the reviewed contract of the library for this server instead of a draft:
        /// SERVER or SERVER:PROFILE (`git`, `filesystem:read-write`; docs/library.md). The
        /// upstream is not contacted; `narrowgate check` then compares it with the running
        /// server.
        #[arg(long, value_name = "SERVER[:PROFILE]")]
        from_library: Option<String>,
        /// With --from-library: write VALUE where the file reads the environment variable NAME
        /// (`${NAME}`), e.g. --set GIT_REPOSITORY=/home/me/src/project. Repeatable.
        #[arg(long, value_name = "NAME=VALUE", requires = "from_library")]
        set: Vec<String>,
    },
    /// Write (or print) a client's configuration entry for the gateway, keeping the file's others.
    ///
    /// Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Gemini CLI and Codex: the entry
    /// starts `narrowgate stdio --config FILE` (or, with --url, points at a running gateway), with
    /// the key as a reference to NARROWGATE_API_KEY or a prompt, not in the file. Running it again
    /// changes nothing; a file that cannot be read is refused and left unchanged.
    Connect(connect::ConnectArgs),
    /// List the receipts of past calls (also while the gateway runs), oldest first.
    ///
    /// Example: narrowgate receipts --outcome denied --since 1h --json
    Receipts(receipts::ReceiptsArgs),
    /// List and decide the calls waiting for an approver (`approval: approver`).
    ///
    /// Talks to the running gateway's approvals API with an approver's key (NARROWGATE_API_KEY).
    #[command(after_help = approvals::AFTER_HELP)]
    Approvals(approvals::ApprovalsArgs),
    /// Print the SHA-256 of an API key, for `api_key_sha256`. Reads the key from stdin without KEY.
    ///
    /// Prints the lowercase hex digest to put in a caller's `api_key_sha256`. Without KEY the key
    /// is read from stdin, with a trailing newline removed.
    #[command(after_help = HASH_KEY_HELP)]
    HashKey {
        /// The key; omit it to keep it out of shell history and read it from stdin.
        key: Option<String>,
    },
    /// Print the JSON Schema of the configuration file or of a contract file.
    ///
    /// The schema (JSON Schema 2020-12) is generated from the types the files are read into, with a
    /// description of every key; editors use it to validate and complete the files. The
    /// repository's copies are schemas/config.schema.json and schemas/contract.schema.json.
    #[command(after_help = schema::SCHEMA_HELP)]
    Schema {
        /// Which file: `config` or `contract`.
        #[arg(value_enum)]
        file: schema::SchemaFile,
    },
    /// Print a shell completion script for narrowgate.
    #[command(after_help = schema::COMPLETIONS_HELP)]
    Completions {
        /// The shell to print the script for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Runs the command line and returns the process exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            config,
            log_format,
            workers,
        } => serve::run(&config.config, log_format, workers.map(usize::from)),
        Command::Stdio { config, log_format } => stdio::run(&config.config, log_format),
        Command::Check {
            config,
            offline,
            json,
        } => check::run(&config.config, offline, json),
        Command::Init {
            upstream,
            prefix,
            from_library: Some(spec),
            set,
            ..
        } => init_library::run(
            &upstream,
            &spec,
            prefix.as_deref().unwrap_or_default(),
            &set,
        ),
        Command::Init {
            config,
            upstream,
            prefix,
            from_library: None,
            ..
        } => init::run(
            &config.config,
            &upstream,
            prefix.as_deref().unwrap_or_default(),
        ),
        Command::Connect(args) => connect::run(args),
        Command::Receipts(args) => receipts::run(args),
        Command::Approvals(args) => approvals::run(args),
        Command::HashKey { key } => hash_key(key),
        Command::Schema { file } => schema::print_schema(file),
        Command::Completions { shell } => schema::print_completions(shell, Cli::command()),
    }
}

const HASH_KEY_HELP: &str = "Examples:
  narrowgate hash-key                      # type the key, then Ctrl-D: it stays out of shell history
  printf %s \"$CI_BOT_KEY\" | narrowgate hash-key
  openssl rand -hex 32 | tee key.txt | narrowgate hash-key   # make a new key and its digest

Then, in the configuration:
  callers:
    - name: alice-ide
      api_key_sha256: <the printed digest>
      tools: [\"read_*\"]";

fn hash_key(key: Option<String>) -> ExitCode {
    let key = match key {
        Some(k) => k,
        None => {
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                eprintln!("narrowgate: type the key, then press Ctrl-D");
            }
            let mut input = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut input) {
                eprintln!("narrowgate: cannot read the key from stdin: {e}");
                return ExitCode::from(2);
            }
            input.trim_end_matches(['\n', '\r']).to_string()
        }
    };
    if key.is_empty() {
        eprintln!("narrowgate hash-key: the key is empty: pass it as KEY or on stdin");
        return ExitCode::from(2);
    }
    println!("{}", crate::policy::hash_key_hex(&key));
    ExitCode::SUCCESS
}

/// Loads the configuration and its contracts, as `serve` needs them.
fn load(config_path: &std::path::Path) -> Result<(Config, ContractSet), LoadError> {
    let config = Config::load(config_path)?;
    let contracts = ContractSet::load_dir(&config.contracts)?;
    Ok((config, contracts))
}

/// Loads the configuration and its contracts for `needs`, with every problem found: those of
/// the configuration, else those of every contract file.
fn load_all(
    config_path: &std::path::Path,
    needs: &crate::config::Needs,
) -> Result<(Config, ContractSet), Vec<LoadError>> {
    let config = Config::load_for(config_path, needs)?;
    let (contracts, errors) = ContractSet::load_dir_all(&config.contracts);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((config, contracts))
}

/// A tokio runtime for the commands that talk to upstreams, with `workers` threads (default: one
/// per available core).
fn runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        builder.worker_threads(n);
    }
    builder.enable_all().build()
}

fn init_logging(format: crate::telemetry::logs::LogFormat) {
    crate::telemetry::logs::init(format);
}
