#!/usr/bin/env bash
# The project's single test command: installs the test peers, then format check, lints and all tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

# Four test peers come from the system, not from a registry: redis-server (tests/common/redis.rs
# starts private instances), PostgreSQL (tests/common/pg.rs: initdb + postgres, for receipts.url),
# nginx (tests/nginx.rs: replicas behind docker/nginx.conf) and Chromium (tests/status.rs: the status
# page, headless). Install them when we may (root with apt-get, as in CI), else say how.
have_postgres() { command -v initdb >/dev/null || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
have_postgres || missing+=(postgresql)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
# chromium: tests/status.rs drives the status page in headless Chromium.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
if ((${#missing[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        step "apt-get install ${missing[*]} (test peers from the system)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
    else
        echo "tests/run.sh: missing ${missing[*]}; install them (Debian/Ubuntu: sudo apt-get install" \
            "${missing[*]}; macOS: brew install redis postgresql nginx; brew install --cask chromium) and run again" >&2
        exit 1
    fi
fi

step "tests/setup-peers.sh"
tests/setup-peers.sh
step "cargo fmt --check"
cargo fmt --check
step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "cargo test --all-targets"
cargo test --all-targets
# Coverage-guided fuzzing (fuzz/README.md): each target a short run, enough to catch a regression on
# the seeds and what they quickly reach; long runs are done by hand (figures in fuzz/README.md).
# FUZZ_DEV=1: an unoptimised instrumented build, minutes shorter on CI's two cores.
step "fuzz/run.sh 10 (six fuzz targets, 10 s each, unoptimised)"
FUZZ_DEV=1 fuzz/run.sh 10
step "deploy/helm/test.sh (helm lint, template, Kubernetes schemas)"
deploy/helm/test.sh
step "docker/lint.sh (hadolint, compose and image config checks)"
docker/lint.sh
# The release workflow (.github/workflows/): actionlint from .peers/actionlint (tests/setup-peers.sh).
step "actionlint .github/workflows/"
ACTIONLINT=.peers/actionlint/bin/actionlint
if [[ ! -x $ACTIONLINT ]]; then
    echo "tests/run.sh: $ACTIONLINT is missing: run tests/setup-peers.sh, which installs it from" \
        "tests/peers/requirements-actionlint.txt" >&2
    exit 1
fi
"$ACTIONLINT" .github/workflows/*.yml
step "all checks passed"
