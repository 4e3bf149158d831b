//! Entry point for fuzz/: one answer read from bytes in memory the way [`super::Http1Client`]
//! reads it off a socket. The head parser, the framing rules and the body decoder are the
//! client's own (`take_head`, `framing_of`, `step`); only the socket is replaced, by a slice
//! handed out a few bytes at a time, so answers split anywhere are read as they arrive.

use std::io;

use http::{HeaderMap, StatusCode};

use super::{Framing, ReadBuffer, Step, broken, framing_of, step, take_head};

/// What [`read_answer`] read.
#[derive(Debug, PartialEq, Eq)]
pub struct Replayed {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// Whether the connection could carry another request after this answer.
    pub reusable: bool,
    /// Bytes of `wire` after the answer's end (the next answer's, on a kept connection).
    pub left: usize,
}

/// Reads the answer at the start of `wire`, which arrives `piece` bytes at a time (at least one)
/// and then ends, as the client's `post` and `Answer::chunk` read it.
pub fn read_answer(wire: &[u8], piece: usize) -> io::Result<Replayed> {
    let piece = piece.max(1);
    let mut buffer = ReadBuffer::default();
    let mut fed = 0;
    // As `ReadBuffer::fill`: false once the "connection" has ended.
    let mut fill = |buffer: &mut ReadBuffer| {
        if fed == wire.len() {
            return false;
        }
        buffer.data.drain(..buffer.start);
        buffer.start = 0;
        let next = (fed + piece).min(wire.len());
        buffer.data.extend_from_slice(&wire[fed..next]);
        fed = next;
        true
    };
    let head = loop {
        match take_head(&mut buffer)? {
            Some(head) if head.status.is_informational() => {}
            Some(head) => break head,
            None if fill(&mut buffer) => {}
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed before the answer",
                ));
            }
        }
    };
    let mut framing = framing_of(head.status, &head.headers)?;
    let reusable = head.keep_alive && framing != Framing::UntilClose;
    let mut body = Vec::new();
    loop {
        match step(&mut framing, &buffer)? {
            // As `Answer::chunk` slices it.
            Step::Data { skip, len } => {
                buffer.consume(skip);
                let start = buffer.start;
                buffer.consume(len);
                body.extend_from_slice(&buffer.data[start..start + len]);
            }
            Step::Skip(n) => buffer.consume(n),
            Step::End(n) => {
                buffer.consume(n);
                break;
            }
            Step::More if fill(&mut buffer) => {}
            Step::More if framing == Framing::UntilClose => break,
            Step::More => return Err(broken()),
        }
    }
    Ok(Replayed {
        status: head.status,
        headers: head.headers,
        body,
        reusable,
        left: buffer.unread().len() + (wire.len() - fed),
    })
}
