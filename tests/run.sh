#!/usr/bin/env bash
# The project's single test command: installs the test peers, then format check, lints and all tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

step "tests/setup-peers.sh"
tests/setup-peers.sh
step "cargo fmt --check"
cargo fmt --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
# The integration tests run the demo upstream as a separate program: `cargo test` compiles examples
# only as test targets, so build the binary itself first.
step "cargo build --example demo-upstream --example hostile-upstream"
cargo build --example demo-upstream --example hostile-upstream
step "cargo test --all-targets"
cargo test --all-targets
step "docker/lint.sh (hadolint, compose and image config checks)"
docker/lint.sh
step "all checks passed"
