//! The SSE parser of upstream answer streams (src/upstream/sse.rs).
//!
//! Input: one byte choosing where the stream is cut into chunks, then the stream. Checks: no
//! panic; the events, the last event id and the retry time are the same whatever the chunks
//! (the stream fed whole as the reference), empty chunks included; a small event limit is an
//! error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use narrowgate::harness::EventSplitter;

/// Events, last id and retry time of `stream` fed in `chunks`.
fn read(chunks: &[&[u8]], limit: usize) -> (Vec<Vec<u8>>, Option<String>, Option<u64>, bool) {
    let mut splitter = EventSplitter::new(limit);
    let mut events = Vec::new();
    let mut too_large = false;
    for chunk in chunks {
        if splitter
            .feed(chunk, |event| {
                events.push(event.to_vec());
                true
            })
            .is_err()
        {
            too_large = true;
            break;
        }
    }
    let last_id = splitter.last_id().map(str::to_string);
    (events, last_id, splitter.retry_ms(), too_large)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    // Chunks of 1..=8 bytes, an empty chunk after each odd-sized one when the top bit is set.
    let size = usize::from(cut % 8) + 1;
    let mut chunks: Vec<&[u8]> = Vec::new();
    for piece in stream.chunks(size) {
        chunks.push(piece);
        if cut & 0x80 != 0 && piece.len() % 2 == 1 {
            chunks.push(&[]);
        }
    }
    let unlimited = 1 << 20;
    let whole = read(&[stream], unlimited);
    let split = read(&chunks, unlimited);
    assert_eq!(
        whole,
        split,
        "fed in chunks of {size} (empty ones too: {})",
        cut & 0x80 != 0
    );
    let _ = read(&chunks, usize::from(cut % 16));
});
