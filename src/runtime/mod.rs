//! The version of the configuration in force, and reload.
//!
//! A [`Version`] is everything one configuration builds (contracts, callers, the catalog);
//! [`Live`] holds the version in force and swaps in a new one on reload.

pub mod catalog;
mod kept;
pub mod live;
mod version;

pub use version::Version;
