//! The HTTP/1.1 answer reader of the forwarder's own client (src/upstream/h1.rs): the head
//! parser, the framing rules and the chunked decoder.
//!
//! Input: one byte giving the size of the pieces the answer arrives in, then the bytes an
//! upstream sends. Checks: no panic; the answer reads the same whatever the pieces (read whole
//! as the reference); a `Content-Length` body is exactly that long; what is left after the answer
//! is never more than was sent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use narrowgate::harness::read_answer;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, wire)) = data.split_first() else {
        return;
    };
    let whole = read_answer(wire, wire.len());
    let pieces = read_answer(wire, usize::from(piece % 32) + 1);
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "split into pieces of {}", piece % 32 + 1),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "whole: {whole:?}; in pieces of {}: {pieces:?}",
            piece % 32 + 1
        ),
    }
    if let Ok(answer) = &whole {
        assert!(answer.left <= wire.len());
        let length = answer
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let chunked = answer.headers.contains_key(http::header::TRANSFER_ENCODING);
        if let (Some(length), false, false) = (
            length,
            chunked,
            answer.status.as_u16() == 204 || answer.status.as_u16() == 304,
        ) {
            assert_eq!(
                answer.body.len(),
                length,
                "a Content-Length body of another length"
            );
        }
    }
});
