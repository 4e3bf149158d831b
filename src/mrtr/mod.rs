//! A 2026-07-28 stateless call answered by a question and resumed (multi-round-trip requests):
//! the call is parked while its client answers ([`parked`]), on whichever replica holds it
//! ([`holders`]).

pub mod holders;
pub mod parked;
