//! Attacks by volume: more requests, notifications or stderr than any client would want.

use std::io::Write as _;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::{Hostile, Stream, list_changed};

/// The attacks of this family: name and what it does.
pub const ATTACKS: &[(&str, &str)] = &[
    (
        "ping-flood",
        "each tools/call first sends --flood-count (20,000) ping requests on its answer stream",
    ),
    (
        "ping-flood-standalone",
        "each tools/call first sends --flood-count (20,000) ping requests on the standalone \
         stream (HTTP GET; stdout on stdio), unrelated to any request",
    ),
    (
        "stderr-lines",
        "at start, --flood-count (100,000) short lines on stderr, `stderr line N`",
    ),
    (
        "list-changed-flood",
        "each tools/call first sends --flood-count (5,000) tools/list_changed; the list gains \
         `fresh` before the last",
    ),
    (
        "stderr-flood",
        "at start, --stderr-bytes (400 MiB) of stderr without a newline, control characters \
         first, then the line `after the flood`",
    ),
];

/// Runs the floods chosen for a `tools/call`, on the call's own stream, before its answer.
pub async fn on_call(state: &Hostile, stream: &Stream) {
    if state.has("ping-flood") {
        let count = state.flood_count.unwrap_or(20_000);
        for i in 0..count {
            let ping = json!({"jsonrpc": "2.0", "id": format!("flood-{i}"), "method": "ping"});
            if !stream.send(&ping).await {
                return;
            }
        }
    }
    if state.has("ping-flood-standalone") {
        let count = state.flood_count.unwrap_or(20_000);
        for i in 0..count {
            let ping = json!({"jsonrpc": "2.0", "id": format!("standalone-{i}"), "method": "ping"});
            state.broadcast(&ping).await;
        }
    }
    if state.has("list-changed-flood") {
        let count = state.flood_count.unwrap_or(5_000);
        for i in 0..count {
            if i + 1 == count {
                state.fresh.store(true, Ordering::SeqCst);
            }
            if !stream.send(&list_changed()).await {
                break;
            }
        }
    }
}

/// `list-changed-flood`'s tool `fresh`, once the flood has added it.
pub fn tools(state: &Hostile, tools: &mut Vec<Value>) {
    if state.fresh.load(Ordering::SeqCst) {
        tools.push(json!({
            "name": "fresh",
            "description": "Added by the list_changed flood.",
            "inputSchema": { "type": "object" }
        }));
    }
}

/// Starts the attacks that do not wait for a request.
pub fn on_start(state: &Hostile) {
    if state.has("stderr-lines") {
        let count = state.flood_count.unwrap_or(100_000);
        std::thread::spawn(move || {
            let mut stderr = std::io::stderr().lock();
            for i in 0..count {
                if writeln!(stderr, "stderr line {i}").is_err() {
                    return;
                }
            }
        });
    }
    if state.has("stderr-flood") {
        let total = state.stderr_bytes;
        // A thread: the writes block as long as the gateway does not read.
        std::thread::spawn(move || {
            let mut stderr = std::io::stderr().lock();
            let start = b"\x1b[31mred\x1b[0m\x07\x08\r";
            if stderr.write_all(start).is_err() {
                return;
            }
            let block = [b'A'; 64 * 1024];
            let mut left = total.saturating_sub(start.len() as u64);
            while left > 0 {
                let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
                if stderr.write_all(&block[..n]).is_err() {
                    return;
                }
                left -= n as u64;
            }
            // A line of its own after the flood, so a reader can tell it kept reading.
            let _ = stderr.write_all(b"\nafter the flood\n");
            let _ = stderr.flush();
        });
    }
}
