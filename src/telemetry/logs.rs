//! The gateway's log lines, on stderr through `tracing`: human-readable by default, one JSON object
//! per line with `--log-format json` (env `NARROWGATE_LOG_FORMAT=json`). Levels come from
//! `NARROWGATE_LOG` (an `EnvFilter`, default `info,rmcp=warn`).
//!
//! Every line logged while a request is handled carries its trace id: [`super::serve`] enters a
//! span `mcp{trace_id=…}` around the handler (in JSON, the `span` object of the line).
//!
//! No argument value is ever logged: the gateway's own lines name callers, tools and outcomes,
//! never arguments or results, and rmcp (which prints whole messages at debug level) is capped at
//! info whatever `NARROWGATE_LOG` asks for.

use std::io::IsTerminal as _;

use tracing::Level;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{EnvFilter, FilterExt as _, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event (the default).
    #[default]
    Human,
    /// One JSON object per line, fields at the top level.
    Json,
}

/// The default filter when `NARROWGATE_LOG` is unset or invalid.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Installs the global subscriber (a second call does nothing).
pub fn init(format: LogFormat) {
    let levels = EnvFilter::try_from_env("NARROWGATE_LOG")
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // rmcp logs whole requests and results (arguments included) at debug and trace.
    let no_message_bodies =
        filter_fn(|meta| !(meta.target().starts_with("rmcp") && *meta.level() > Level::INFO));
    let filter = levels.and(no_message_bodies);
    // Colours only for a person at a terminal, never in a file or a log collector.
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let layer = match format {
        LogFormat::Human => layer.with_filter(filter).boxed(),
        LogFormat::Json => layer
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed(),
    };
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
