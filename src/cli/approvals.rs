//! `narrowgate approvals list|approve ID|deny ID`: an approver's client of the gateway's
//! approvals API (`GET /approvals`, `POST /approvals/{id}`). It sends the key in
//! `NARROWGATE_API_KEY` as `Authorization: Bearer` to the gateway the configuration names
//! (`public_url`, else `listen`), or to `--url`.

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::config::Config;

#[derive(clap::Args)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    action: Action,
    /// The configuration file: where the gateway listens (unless --url is given).
    #[arg(long, global = true, env = "NARROWGATE_CONFIG", default_value = crate::config::DEFAULT_CONFIG_PATH)]
    config: std::path::PathBuf,
    /// The gateway's base URL (`http://127.0.0.1:8080`); without it, the configuration's
    /// `public_url` (scheme and host), else `http://` and its `listen` address.
    #[arg(long, global = true)]
    url: Option<String>,
    /// Print the gateway's JSON answer instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum Action {
    /// List the calls waiting for an approver, oldest first.
    List,
    /// Approve the held call ID: it is forwarded (once).
    Approve {
        /// The approval's id, as `list` prints it.
        id: String,
        /// Why, for the record.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Deny the held call ID: its caller gets a tool error with the reason.
    Deny {
        /// The approval's id, as `list` prints it.
        id: String,
        /// Why: the caller reads it in the tool error.
        #[arg(long)]
        reason: Option<String>,
    },
}

pub const AFTER_HELP: &str = "Examples:
  export NARROWGATE_API_KEY=...               # an approver's key (listed in `approvers`)
  narrowgate approvals list
  narrowgate approvals approve 0b7c...-... --reason \"ticket 4411\"
  narrowgate approvals deny 0b7c...-... --reason \"amount too high\" --url http://gw:8080

Exit status: 0 done, 1 the gateway refused or could not be reached, 2 unusable input.";

/// Runs the command.
pub fn run(args: ApprovalsArgs) -> ExitCode {
    // From the environment only: a key on the command line would show in the process list.
    let key = std::env::var("NARROWGATE_API_KEY").unwrap_or_default();
    if key.is_empty() {
        eprintln!(
            "narrowgate approvals: set NARROWGATE_API_KEY to an approver's API key (or OAuth token)"
        );
        return ExitCode::from(2);
    };
    let base = match &args.url {
        Some(url) => url.trim_end_matches('/').to_string(),
        // Only where the gateway listens is needed, not the callers' keys.
        None => match Config::load_for(
            &args.config,
            &crate::config::Needs::Parts(&["listen", "path", "public_url"]),
        )
        .map_err(|mut errors| errors.swap_remove(0))
        {
            Ok(config) => base_url(&config),
            Err(e) => {
                eprintln!("narrowgate approvals: {e} (or give the gateway's address with --url)");
                return ExitCode::from(2);
            }
        },
    };
    let (method, url, body) = match &args.action {
        Action::List => (reqwest::Method::GET, format!("{base}/approvals"), None),
        Action::Approve { id, reason } | Action::Deny { id, reason } => {
            let decision = match args.action {
                Action::Approve { .. } => "approve",
                _ => "deny",
            };
            let body = json!({"decision": decision, "reason": reason});
            (
                reqwest::Method::POST,
                format!("{base}/approvals/{id}"),
                Some(body.to_string()),
            )
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("narrowgate approvals: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let answered = runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut request = client
            .request(method, &url)
            .header("authorization", format!("Bearer {key}"));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        Ok::<_, reqwest::Error>((status, text))
    });
    let (status, text) = match answered {
        Ok(answer) => answer,
        Err(e) => {
            eprintln!("narrowgate approvals: cannot reach the gateway at {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !status.is_success() {
        let message = answer
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(|| answer.to_string(), str::to_string);
        eprintln!("narrowgate approvals: the gateway answered {status}: {message}");
        return ExitCode::FAILURE;
    }
    if args.json {
        println!("{answer}");
        return ExitCode::SUCCESS;
    }
    match &args.action {
        Action::List => print_list(&answer),
        Action::Approve { id, .. } | Action::Deny { id, .. } => {
            let state = answer
                .get("state")
                .and_then(Value::as_str)
                .unwrap_or("decided");
            let field = |k: &str| {
                answer
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            };
            println!(
                "{state} {id}: {} calling {}",
                field("caller"),
                field("tool")
            );
        }
    }
    ExitCode::SUCCESS
}

/// One line per held call, in aligned columns: id, caller, tool, age, state, and the arguments
/// (masked at the contract's `redact` paths).
fn print_list(answer: &Value) {
    let items = answer.as_array().map(Vec::as_slice).unwrap_or_default();
    if items.is_empty() {
        eprintln!("no calls are waiting for an approver");
        return;
    }
    let header = ["ID", "CALLER", "TOOL", "AGE", "STATE", "ARGUMENTS"].map(String::from);
    let rows: Vec<[String; 6]> = items
        .iter()
        .map(|item| {
            let text = |k: &str| {
                item.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("-")
                    .to_string()
            };
            let age = item
                .get("age_seconds")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            let arguments = item
                .get("arguments")
                .map(Value::to_string)
                .unwrap_or_default();
            [
                text("id"),
                text("caller"),
                text("tool"),
                format!("{age:.0}s"),
                text("state"),
                arguments,
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
}

/// Where the configuration's gateway answers: `public_url`'s scheme and host, else its
/// `listen` address over plain HTTP (a wildcard address reached on loopback).
fn base_url(config: &Config) -> String {
    if let Some(public) = &config.public_url
        && let Some((scheme, rest)) = public.split_once("://")
    {
        let host = rest.split('/').next().unwrap_or(rest);
        return format!("{scheme}://{host}");
    }
    let listen = std::env::var("NARROWGATE_LISTEN").unwrap_or_else(|_| config.listen.clone());
    let listen = listen
        .replace("0.0.0.0:", "127.0.0.1:")
        .replace("[::]:", "[::1]:");
    format!("http://{listen}")
}
