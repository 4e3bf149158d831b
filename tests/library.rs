//! The contract library (`contracts/library/SERVER/PROFILE.yaml`) in front of the exact published
//! servers it was written for, each pinned in tests/peers/: for every server and profile, the read
//! tools answer through the gateway, every tool the profile leaves out or narrows is refused with
//! the server's state unchanged, and the attacks a reviewer would try are refused before they reach
//! the server. The Python servers (git, time, fetch) are in `library/python.rs`, the npm ones
//! (filesystem, memory, postgres, everything) in `library/node.rs`.

use std::path::PathBuf;

use crate::common::peers::repo_root;

#[path = "library/node.rs"]
mod node;
#[path = "library/python.rs"]
mod python;

/// The text of `contracts/library/SERVER/PROFILE.yaml`, as the repository ships it.
pub fn library_file(server: &str, profile: &str) -> String {
    let path: PathBuf = repo_root()
        .join("contracts/library")
        .join(server)
        .join(format!("{profile}.yaml"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the library file {}: {e}", path.display()))
}
