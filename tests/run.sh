#!/usr/bin/env bash
# The project's single test command: installs the test peers, then format check, lints and all tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

# redis-server is the one test peer that comes from the system, not from a registry (tests/common/redis.rs
# starts private instances): install it when we may (root with apt-get, as in CI), else say how.
if ! command -v redis-server >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        step "apt-get install redis-server (not on PATH)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server </dev/null
    else
        echo "tests/run.sh: redis-server is not on PATH; install it (Debian/Ubuntu: sudo apt-get install" \
            "redis-server; macOS: brew install redis) and run again" >&2
        exit 1
    fi
fi

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
# Coverage-guided fuzzing (fuzz/README.md): each target a short run, enough to catch a regression on
# the seeds and what they quickly reach; long runs are done by hand (figures in fuzz/README.md).
step "fuzz/run.sh 10 (six fuzz targets, 10 s each)"
fuzz/run.sh 10
step "deploy/helm/test.sh (helm lint, template, Kubernetes schemas)"
deploy/helm/test.sh
step "docker/lint.sh (hadolint, compose and image config checks)"
docker/lint.sh
step "all checks passed"
