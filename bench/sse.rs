//! `bench-sse`: the forwarder's own SSE splitter (`upstream::sse::EventSplitter`) against the
//! `sse-stream` crate the rest of the gateway uses, on the same bytes.
//!
//! ```text
//! cargo run --release --example bench-sse -- [--millis-per-case 400]
//! ```
//!
//! Why this exists: the forwarder keeps a splitter of its own beside a maintained crate that does
//! the same job, and this says with figures whether it should (BENCHMARKS.md, "SSE splitting"):
//! per case, the median nanoseconds to split a whole stream fed in 16 KiB chunks, and what each
//! does with input the SSE specification allows or a hostile upstream sends. Prints one JSON
//! object.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Bytes;
use futures_core::Stream;
use http_body::{Body, Frame};
use narrowgate::harness::EventSplitter;
use serde_json::json;
use sse_stream::SseStream;

#[path = "median.rs"]
mod median;
use median::time;

/// How the forwarder's HTTP/1.1 client reads the socket.
const CHUNK: usize = 16 * 1024;
/// The forwarder's bound on one event.
const MAX_EVENT: usize = 16 << 20;

/// A body that hands out the chunks it was given, all ready at once.
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

fn chunks_of(stream: &Bytes) -> Vec<Bytes> {
    (0..stream.len())
        .step_by(CHUNK)
        .map(|start| stream.slice(start..(start + CHUNK).min(stream.len())))
        .collect()
}

/// Events and data bytes the splitter found, or the error that stopped it.
fn ours(chunks: &[Bytes], limit: usize) -> Result<(usize, usize), String> {
    let mut splitter = EventSplitter::new(limit);
    let (mut events, mut bytes) = (0, 0);
    for chunk in chunks {
        splitter
            .feed(chunk, |data| {
                events += 1;
                bytes += data.len();
                true
            })
            .map_err(|e| format!("event over {} bytes", e.0))?;
    }
    Ok((events, bytes))
}

/// The same with `sse-stream` (its stream never waits here: every chunk is ready).
fn theirs(chunks: &[Bytes]) -> Result<(usize, usize), String> {
    let mut stream = SseStream::new(Chunks(chunks.iter().cloned().collect()));
    let mut cx = Context::from_waker(Waker::noop());
    let (mut events, mut bytes) = (0, 0);
    loop {
        match Pin::new(&mut stream).poll_next(&mut cx) {
            Poll::Ready(Some(Ok(sse))) => {
                events += 1;
                bytes += sse.data.map_or(0, |d| d.len());
            }
            Poll::Ready(Some(Err(e))) => return Err(format!("{e}")),
            Poll::Ready(None) => return Ok((events, bytes)),
            Poll::Pending => return Err("pending".into()),
        }
    }
}

/// An answer stream as MCP servers send it: a priming event, then the answer.
fn answer_stream(result_bytes: usize) -> Bytes {
    let text = "x".repeat(result_bytes);
    let answer =
        json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}]}});
    Bytes::from(format!(
        "id: 0\ndata:\n\nevent: message\nid: 1\ndata: {answer}\n\n"
    ))
}

/// `n` notifications (a call that logs and reports progress) before a small answer.
fn chatty_stream(n: usize) -> Bytes {
    let mut out = String::from("id: 0\ndata:\n\n");
    for i in 0..n {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": 7, "progress": i, "total": n}});
        out.push_str(&format!("event: message\nid: {}\ndata: {note}\n\n", i + 1));
    }
    let answer = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": []}});
    out.push_str(&format!("event: message\ndata: {answer}\n\n"));
    Bytes::from(out)
}

fn main() {
    let mut millis = 400u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--millis-per-case" {
            millis = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--millis-per-case N");
        }
    }
    let budget = Duration::from_millis(millis);
    let mut report = serde_json::Map::new();
    for (case, stream) in [
        ("answer_1k", answer_stream(1_000)),
        ("answer_300k", answer_stream(300_000)),
        ("progress_1000_events", chatty_stream(1_000)),
    ] {
        let chunks = chunks_of(&stream);
        // Both must read the same events before their times mean anything.
        let (a, b) = (ours(&chunks, MAX_EVENT), theirs(&chunks));
        assert_eq!(a, b, "{case}: the two splitters disagree");
        let own = time(budget, || {
            black_box(ours(black_box(&chunks), MAX_EVENT).ok());
        });
        let crate_ = time(budget, || {
            black_box(theirs(black_box(&chunks)).ok());
        });
        report.insert(
            case.into(),
            json!({"bytes": stream.len(), "events": a.map(|e| e.0).unwrap_or(0),
                   "own_ns": own.round(), "sse_stream_ns": crate_.round(),
                   "ratio_sse_stream_to_own": (crate_ / own * 100.0).round() / 100.0}),
        );
    }

    // What each does with input the SSE specification allows: a field line without a colon
    // (`data` alone is an empty data line) and a repeated `id:` (the last one wins).
    let lenient = chunks_of(&Bytes::from_static(
        b"data\ndata: a\n\nid: 1\nid: 2\ndata: b\n\n",
    ));
    report.insert(
        "spec_lines".into(),
        json!({"own": format!("{:?}", ours(&lenient, MAX_EVENT)),
               "sse_stream": format!("{:?}", theirs(&lenient))}),
    );

    // A hostile upstream's endless line: 64 MiB without a line end. The splitter stops at its
    // bound; sse-stream holds every byte until the line ends.
    let endless = Bytes::from(vec![b'x'; 64 << 20]);
    let mut endless_chunks = chunks_of(&Bytes::from_static(b"data: "));
    endless_chunks.extend(chunks_of(&endless));
    endless_chunks.extend(chunks_of(&Bytes::from_static(b"\n\n")));
    report.insert(
        "endless_line_64MiB".into(),
        json!({"own": format!("{:?}", ours(&endless_chunks, MAX_EVENT)),
               "sse_stream": format!("{:?}", theirs(&endless_chunks))}),
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("a JSON report")
    );
}
