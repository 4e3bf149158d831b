//! What one MCP request carries from the edge of the HTTP layers to its handler.
//!
//! The outermost MCP layer (`http::admit`) takes the version in force once and puts an
//! [`Admitted`] into the request's extensions; every later layer adds what it learns to it (the
//! parsed body, the caller), and the handlers (the direct path, and rmcp's, which gets the HTTP
//! request's `Parts` in its context) read it from there. So a request is checked and served by
//! one version of the configuration, whatever reloads happen while it is under way, and nothing
//! is looked up or parsed twice.

pub mod message;
pub mod rejection;

use std::sync::Arc;

use crate::policy::Caller;
use crate::request::message::Body;
use crate::runtime::Version;

/// One request's version of the gateway and what the layers learnt about it.
#[derive(Clone)]
pub struct Admitted {
    /// The version in force when the request arrived: the one that checks and serves it.
    pub gateway: Arc<Version>,
    /// Set by authentication.
    pub caller: Option<Arc<Caller>>,
    /// A POST's body, parsed by `check_body`. Dropped before the request goes to rmcp, which
    /// reads the bytes itself (so it is never cloned).
    pub body: Option<Body>,
    /// Cancelled when the client goes away (set only when some tool waits for approvers).
    pub client_gone: Option<tokio_util::sync::CancellationToken>,
}

impl Admitted {
    pub fn new(gateway: Arc<Version>) -> Admitted {
        Admitted {
            gateway,
            caller: None,
            body: None,
            client_gone: None,
        }
    }

    /// The request's admission, from the extensions of its HTTP request.
    pub fn of(parts: Option<&http::request::Parts>) -> Option<&Admitted> {
        parts.and_then(|p| p.extensions.get::<Admitted>())
    }
}
