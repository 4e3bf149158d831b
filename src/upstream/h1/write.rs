//! Writing a request on a connection, refusing any answer that is there before the request is.
//!
//! An answer is to a request: bytes waiting on a kept connection before the request is written
//! (an upstream that speaks unasked), or that arrive while it is being written (an answer to a
//! request it has not seen whole), are no answer to it. Read later, they would pass for one.
//! So the socket is asked (a non-blocking peek) before each write: the first peek also tells a
//! connection the upstream closed while it was idle, which the request can skip for another.

use std::io;

use tokio::net::TcpStream;

use super::Connection;

/// Why a request was not (all) written.
#[derive(Debug)]
pub enum WriteError {
    /// Nothing of it was written: the connection is closed, failed, or has bytes waiting. The
    /// request can go on another connection.
    Unused(io::Error),
    /// Part of it was written, then the write failed or an answer arrived.
    Partly(io::Error),
}

impl From<WriteError> for io::Error {
    fn from(error: WriteError) -> io::Error {
        match error {
            WriteError::Unused(e) | WriteError::Partly(e) => e,
        }
    }
}

/// What the socket holds for reading, asked without waiting.
enum Waiting {
    Nothing,
    /// Bytes: an answer to no request written.
    Bytes,
    /// Its end (the upstream closed it) or an error.
    Gone(io::Error),
}

fn waiting(stream: &TcpStream) -> Waiting {
    let mut probe = [std::mem::MaybeUninit::<u8>::uninit()];
    match socket2::SockRef::from(stream).peek(&mut probe) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Waiting::Nothing,
        Ok(0) => Waiting::Gone(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "the upstream closed the connection",
        )),
        Ok(_) => Waiting::Bytes,
        Err(e) => Waiting::Gone(e),
    }
}

fn unasked() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the upstream sent an answer before the request was written",
    )
}

/// Writes all of `request` on `connection`, asking before each write whether anything is
/// waiting to be read: if so, the request is refused there (and the connection must be closed).
pub async fn write_request(connection: &mut Connection, request: &[u8]) -> Result<(), WriteError> {
    if !connection.buffer.unread().is_empty() {
        return Err(WriteError::Unused(unasked()));
    }
    let stream = &connection.stream;
    let mut written = 0;
    while written < request.len() {
        match (waiting(stream), written) {
            (Waiting::Nothing, _) => {}
            (Waiting::Bytes, 0) => return Err(WriteError::Unused(unasked())),
            (Waiting::Gone(e), 0) => return Err(WriteError::Unused(e)),
            (Waiting::Bytes, _) => return Err(WriteError::Partly(unasked())),
            (Waiting::Gone(e), _) => return Err(WriteError::Partly(e)),
        }
        match stream.try_write(&request[written..]) {
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                stream.writable().await.map_err(|e| match written {
                    0 => WriteError::Unused(e),
                    _ => WriteError::Partly(e),
                })?;
            }
            Err(e) if written == 0 => return Err(WriteError::Unused(e)),
            Err(e) => return Err(WriteError::Partly(e)),
        }
    }
    Ok(())
}
