//! What travels between a client and an upstream besides arguments and results, through the real
//! gateway in front of the demo upstream: the client's `_meta`, the Origin of a same-origin page,
//! the protocol version a client is offered, caching hints (`relays/meta.rs`); progress, logging
//! and cancellation (`relays/notifications.rs`); and the upstream's requests to the client
//! (`relays/requests.rs`, and across replicas `relays/passed_on.rs`).

#[path = "relays/over.rs"]
mod over;

#[path = "relays/meta.rs"]
mod meta;

#[path = "relays/notifications.rs"]
mod notifications;

#[path = "relays/logging.rs"]
mod logging;

#[path = "relays/requests.rs"]
mod requests;

#[path = "relays/passed_on.rs"]
mod passed_on;
