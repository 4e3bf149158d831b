#!/usr/bin/env bash
# narrowgate benchmarks: the same MCP calls straight to the demo upstream and through the gateway,
# interleaved in one run so that machine drift cancels out. See BENCHMARKS.md.
#
#   bench/run.sh                      # full run (about 10 minutes on 2 cores)
#   bench/run.sh --quick              # smoke run: 1 short round, 200 sessions, 1 start-up
#   bench/run.sh --with-mcp-proxy --with-contextforge   # add the comparison gateways (installed
#                                     # on first use under ~/.cache/narrowgate-bench, see bench/gateways/)
#   bench/run.sh --no-nginx           # without the floor (nginx relaying the same calls, on by default)
#
# Options (or the environment variables in brackets):
#   --rounds N [ROUNDS=5]        rounds; each runs every scenario against every target once
#   --duration S [DURATION=3]    measured seconds per scenario run (after WARMUP=0.5 s)
#   --clients "1 16 64" [CLIENTS]  concurrency levels;  --modes "legacy stateless" [MODES]
#   --sessions N [SESSIONS=1000] sessions opened for the memory measurement
#   --contracts N [CONTRACTS_N=1000] generated tool contracts for the start-up measurement
#   --no-build                   use the release binaries already in target/release
#   --gateway-bin NAME=PATH      also measure another narrowgate binary, as target NAME, with the
#                                same config (repeatable; to compare a change against the build)
#   --workers-variants "1" [WORKER_VARIANTS=1]  also measure the same binary with --workers N, as
#                                target narrowgate-wN (space-separated list; "" for none)
#   --upstream-bin PATH          demo-upstream binary to use instead of target/release's
#   --narrowgate-bin PATH        narrowgate binary measured as target `narrowgate` (default: the build)
#   LOADGEN_THREADS=1            worker threads of the load generator
#   KEEP_WORK=1                  keep the scratch folder (configs, logs) after the run
#
# Writes bench/results/<UTC timestamp>.json and prints a markdown table of medians and ratios.
# Every process it starts is stopped on exit (trap). Only loopback addresses are used.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-0.5}
CLIENTS=${CLIENTS:-"1 16 64"}
MODES=${MODES:-"legacy stateless"}
SESSIONS=${SESSIONS:-1000}
CONTRACTS_N=${CONTRACTS_N:-1000}
STARTUP_REPS=${STARTUP_REPS:-3}
LOADGEN_THREADS=${LOADGEN_THREADS:-1}
BUILD=1
WITH_MCP_PROXY=0
WITH_CONTEXTFORGE=0
WITH_NGINX=1
EXTRA_GATEWAYS=()
WORKER_VARIANTS=${WORKER_VARIANTS:-1}
UPSTREAM_BIN=""
NARROWGATE_BIN=""

while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --modes) MODES=$2; shift 2 ;;
        --sessions) SESSIONS=$2; shift 2 ;;
        --contracts) CONTRACTS_N=$2; shift 2 ;;
        --quick) ROUNDS=1; DURATION=1; WARMUP=0.3; SESSIONS=200; STARTUP_REPS=1; shift ;;
        --no-build) BUILD=0; shift ;;
        --with-mcp-proxy) WITH_MCP_PROXY=1; shift ;;
        --with-contextforge) WITH_CONTEXTFORGE=1; shift ;;
        --no-nginx) WITH_NGINX=0; shift ;;
        --gateway-bin) EXTRA_GATEWAYS+=("$2"); shift 2 ;;
        --workers-variants) WORKER_VARIANTS=$2; shift 2 ;;
        --upstream-bin) UPSTREAM_BIN=$2; shift 2 ;;
        --narrowgate-bin) NARROWGATE_BIN=$2; shift 2 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# Processes we start, stopped on any exit.
PIDS=()
WORK=$(mktemp -d "${TMPDIR:-/tmp}/narrowgate-bench.XXXXXX")
cleanup() {
    local status=$?
    for pid in "${PIDS[@]:-}"; do
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]:-}"; do
        [ -z "$pid" ] && continue
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    if [ "${KEEP_WORK:-0}" = 1 ] || [ $status -ne 0 ]; then
        log "scratch folder kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------------
# Build.
BIN="$ROOT/target/release"
if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    (cd "$ROOT" && cargo build --release --quiet --bin narrowgate \
        --bin demo-upstream --example loadgen --example bench-validation)
fi
for b in "$BIN/narrowgate" "$BIN/demo-upstream" "$BIN/examples/loadgen" "$BIN/examples/bench-validation"; do
    [ -x "$b" ] || die "missing $b (run without --no-build)"
done
LOADGEN="$BIN/examples/loadgen"
UPSTREAM_BIN=${UPSTREAM_BIN:-$BIN/demo-upstream}
NARROWGATE_BIN=${NARROWGATE_BIN:-$BIN/narrowgate}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo null; }

# Starts `demo-upstream http --port 0 [ARGS]` and sets UP_PID and UP_URL.
start_upstream() {
    local name=$1; shift
    : >"$WORK/$name.out"
    "$UPSTREAM_BIN" http --port 0 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    UP_PID=$!
    PIDS+=("$UP_PID")
    for _ in $(seq 100); do
        UP_URL=$(sed -n 's/^listening on //p' "$WORK/$name.out" 2>/dev/null || true)
        [ -n "$UP_URL" ] && return 0
        sleep 0.05
    done
    die "$name did not start; see $WORK/$name.err"
}

# Waits until GET $1 answers 200 and (optionally) lists at least $2 tools as enabled.
wait_ready() {
    local url=$1 want=${2:-0} body
    for _ in $(seq 600); do
        if body=$(curl -fsS --max-time 1 "$url" 2>/dev/null); then
            local enabled
            enabled=$(grep -o '"state":"enabled"' <<<"$body" | wc -l)
            [ "$enabled" -ge "$want" ] && return 0
        fi
        sleep 0.1
    done
    die "$url not ready: ${body:-no answer}"
}

RAW="$WORK/raw.jsonl"
record() { cat >>"$RAW"; }   # one JSON object per line

# ---------------------------------------------------------------------------------------------
# The machine and the run.
GIT_REV=${BENCH_GIT_REV:-$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)}
GIT_DIRTY=$(cd "$ROOT" && { git diff --quiet HEAD -- src Cargo.toml tests/upstream bench 2>/dev/null && echo false || echo true; })
python3 - "$RAW" <<EOF
import json, os, platform, sys
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
load = open("/proc/loadavg").read().split()[:3]
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"kind": "meta", "nproc": os.cpu_count(), "cpu": cpu,
        "mem_gib": round(mem / 1048576, 1), "kernel": platform.release(),
        "loadavg_start": load, "git_rev": "$GIT_REV", "src_modified": $( [ "$GIT_DIRTY" = true ] && echo True || echo False ),
        "rounds": $ROUNDS, "duration_s": $DURATION, "warmup_s": $WARMUP, "clients": "$CLIENTS",
        "modes": "$MODES", "loadgen_threads": $LOADGEN_THREADS, "sessions": $SESSIONS,
        "contracts_n": $CONTRACTS_N, "upstream_bin": "$UPSTREAM_BIN", "narrowgate_bin": "$NARROWGATE_BIN",
        "extra_gateways": "${EXTRA_GATEWAYS[*]:-}"}) + "\n")
EOF

# ---------------------------------------------------------------------------------------------
# Upstreams and the gateway.
start_upstream upstream-legacy
UP_LEGACY_PID=$UP_PID; UP_LEGACY_URL=$UP_URL
start_upstream upstream-stateless --stateless
UP_STATELESS_PID=$UP_PID; UP_STATELESS_URL=$UP_URL
log "upstreams: $UP_LEGACY_URL (sessions), $UP_STATELESS_URL (stateless)"

KEY="narrowgate-bench-key"
KEY_HASH=$(printf %s "$KEY" | "$NARROWGATE_BIN" hash-key)
export LOADGEN_KEY="$KEY"

# Writes a gateway config to $1 with contracts from $2 and the upstreams given as NAME=URL.
write_config() {
    local file=$1 contracts=$2 port=$3; shift 3
    {
        echo "# Generated by bench/run.sh"
        echo "listen: 127.0.0.1:$port"
        echo "path: /mcp"
        echo "contracts: $contracts"
        echo "upstreams:"
        for kv in "$@"; do
            echo "  ${kv%%=*}: { url: \"${kv#*=}\", timeout: 10s }"
        done
        echo "callers:"
        echo "  - name: bench"
        echo "    api_key_sha256: $KEY_HASH"
        echo "    tools: ['*']"
        echo "    rate: 100000/s"
        echo "state: memory"
        # Each gateway its own receipts database: builds may differ in schema, and no gateway
        # should wait on another's writes.
        echo "receipts:"
        echo "  path: ${file%.yaml}-receipts.db"
        # The load opens more sessions (--sessions) and connections than one caller gets by
        # default; builds before the `http` block would refuse the key, so only for those that
        # know it.
        if "${CONFIG_BIN:-$NARROWGATE_BIN}" schema config 2>/dev/null | grep -q max_sessions_per_caller; then
            echo "http:"
            echo "  max_connections: 10000"
            echo "  max_connections_per_client: 10000"
            echo "  max_sessions: 100000"
            echo "  max_sessions_per_caller: 100000"
        fi
    } >"$file"
}

GW_PORT=$(free_port)
write_config "$WORK/gateway.yaml" "$BENCH/contracts" "$GW_PORT" \
    "demo=$UP_LEGACY_URL" "demo_stateless=$UP_STATELESS_URL"
"$NARROWGATE_BIN" serve --config "$WORK/gateway.yaml" >"$WORK/gateway.out" 2>"$WORK/gateway.err" &
GW_PID=$!
PIDS+=("$GW_PID")
GW_URL="http://127.0.0.1:$GW_PORT/mcp"
wait_ready "http://127.0.0.1:$GW_PORT/readyz" 4
log "narrowgate ready at $GW_URL (pid $GW_PID)"

sleep 1
printf '{"kind":"idle","gateway_rss_kib":%s,"upstream_legacy_rss_kib":%s,"upstream_stateless_rss_kib":%s}\n' \
    "$(rss_kib $GW_PID)" "$(rss_kib $UP_LEGACY_PID)" "$(rss_kib $UP_STATELESS_PID)" | record

# ---------------------------------------------------------------------------------------------
# Targets: NAME URL_LEGACY URL_STATELESS TOOL_NAME_LEGACY TOOL_NAME_STATELESS WATCH_NAME WATCH_PID
# (tool names are templates: `{}` is the name in bench/calls.json; `-` is a field left empty)
TARGETS=()
add_target() { TARGETS+=("$*"); }
add_target direct "$UP_LEGACY_URL" "$UP_STATELESS_URL" {} {} - -
add_target narrowgate "$GW_URL" "$GW_URL" {} {}_stateless gateway "$GW_PID"
if [ "$WITH_NGINX" = 1 ]; then
    # shellcheck source=bench/gateways/nginx.sh
    source "$BENCH/gateways/nginx.sh"
    nginx_start "$UP_LEGACY_URL" "$UP_STATELESS_URL"   # sets NG_PID NG_URL_*
    add_target nginx "$NG_URL_LEGACY" "$NG_URL_STATELESS" {} {} gateway "$NG_PID"
fi

# start_gateway_target NAME BIN [SERVE ARGS...]: another narrowgate target with the same config
# on its own port.
start_gateway_target() {
    local name=$1 bin=$2; shift 2
    local port pid
    port=$(free_port)
    CONFIG_BIN=$bin write_config "$WORK/gateway-$name.yaml" "$BENCH/contracts" "$port" \
        "demo=$UP_LEGACY_URL" "demo_stateless=$UP_STATELESS_URL"
    "$bin" serve "$@" --config "$WORK/gateway-$name.yaml" \
        >"$WORK/gateway-$name.out" 2>"$WORK/gateway-$name.err" &
    pid=$!
    PIDS+=("$pid")
    wait_ready "http://127.0.0.1:$port/readyz" 4
    add_target "$name" "http://127.0.0.1:$port/mcp" "http://127.0.0.1:$port/mcp" {} {}_stateless gateway "$pid"
    printf '{"kind":"idle","target":"%s","gateway_rss_kib":%s}\n' "$name" "$(rss_kib $pid)" | record
    log "$name ($bin${*:+ $*}) ready at http://127.0.0.1:$port/mcp (pid $pid)"
}

# Other narrowgate builds (--gateway-bin NAME=PATH).
for extra in "${EXTRA_GATEWAYS[@]:-}"; do
    [ -z "$extra" ] && continue
    bin=${extra#*=}
    name=${extra%%=*}
    [ -x "$bin" ] || die "--gateway-bin $extra: $bin is not executable"
    case "$name" in
        direct|nginx|narrowgate|narrowgate-w*|mcp-proxy|contextforge)
            die "--gateway-bin $extra: '$name' is the name of a built-in target; pick another" ;;
    esac
    start_gateway_target "$name" "$bin"
done

# The same build with fewer runtime threads (`serve --workers N`).
for w in $WORKER_VARIANTS; do
    start_gateway_target "narrowgate-w$w" "$NARROWGATE_BIN" --workers "$w"
done

if [ "$WITH_MCP_PROXY" = 1 ]; then
    # shellcheck source=bench/gateways/mcp-proxy.sh
    source "$BENCH/gateways/mcp-proxy.sh"
    mcp_proxy_start "$UP_LEGACY_URL" "$UP_STATELESS_URL"   # sets MP_PID MP_URL_* MP_TOOL_*
    add_target mcp-proxy "$MP_URL_LEGACY" "$MP_URL_STATELESS" "$MP_TOOL_LEGACY" "$MP_TOOL_STATELESS" gateway "$MP_PID"
fi
if [ "$WITH_CONTEXTFORGE" = 1 ]; then
    # shellcheck source=bench/gateways/contextforge.sh
    source "$BENCH/gateways/contextforge.sh"
    contextforge_start "$UP_LEGACY_URL" "$UP_STATELESS_URL"  # sets CF_PID CF_URL_* CF_TOOL_* CF_TOKEN
    add_target contextforge "$CF_URL_LEGACY" "$CF_URL_STATELESS" "$CF_TOOL_LEGACY" "$CF_TOOL_STATELESS" gateway "$CF_PID"
fi

# run_scenario TARGET-LINE MODE CLIENTS ROUND [DURATION WARMUP]
run_scenario() {
    local name url_l url_s tool_l tool_s wname wpid
    read -r name url_l url_s tool_l tool_s wname wpid <<<"$1"
    local mode=$2 clients=$3 round=$4 duration=${5:-$DURATION} warmup=${6:-$WARMUP}
    local url=$url_l tool=$tool_l upstream_pid=$UP_LEGACY_PID
    if [ "$mode" = stateless ]; then url=$url_s; tool=$tool_s; upstream_pid=$UP_STATELESS_PID; fi
    [ "$url" = - ] && return 0   # this target does not speak this mode
    local watch=(--watch "upstream=$upstream_pid")
    [ "$wname" != - ] && watch+=(--watch "$wname=$wpid")
    local key_args=()
    [ "$name" = contextforge ] && key_args=(--key "$CF_TOKEN")
    "$LOADGEN" run --url "$url" --mode "$mode" --calls "$BENCH/calls.json" --tool-name "$tool" \
        --clients "$clients" --duration "$duration" --warmup "$warmup" --threads "$LOADGEN_THREADS" \
        --label "$mode-c$clients|$name|$round" "${key_args[@]}" "${watch[@]}"
}

# ---------------------------------------------------------------------------------------------
# Sanity: every target answers every call of the mix correctly, in both modes.
for t in "${TARGETS[@]}"; do
    for mode in $MODES; do
        out=$(run_scenario "$t" "$mode" 2 check 0.3 0.1) || die "loadgen failed against ${t%% *} ($mode)"
        [ -z "$out" ] && continue
        errors=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["errors"] if r["requests_total"] else -1)' "$out")
        [ "$errors" = 0 ] || die "${t%% *} ($mode) answers wrongly: $out"
    done
done
log "all targets answer correctly: ${#TARGETS[@]} targets x modes [$MODES]"

# ---------------------------------------------------------------------------------------------
# Memory with many sessions: through the gateway and, for comparison, straight to the upstream.
log "opening $SESSIONS sessions through the gateway"
"$LOADGEN" sessions --url "$GW_URL" --count "$SESSIONS" --calls "$BENCH/calls.json" \
    --watch "gateway=$GW_PID" --watch "upstream=$UP_LEGACY_PID" --label narrowgate | record
log "opening $SESSIONS sessions straight to the upstream"
"$LOADGEN" sessions --url "$UP_LEGACY_URL" --count "$SESSIONS" --calls "$BENCH/calls.json" \
    --watch "upstream=$UP_LEGACY_PID" --label direct | record

# ---------------------------------------------------------------------------------------------
# Load, interleaved: every round runs each scenario against each target in turn, alternating
# the order between rounds so that neither side always goes first.
log "load: $ROUNDS rounds x modes [$MODES] x clients [$CLIENTS] x ${#TARGETS[@]} targets, ${DURATION}s each"
for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        for clients in $CLIENTS; do
            order=("${TARGETS[@]}")
            if [ $((round % 2)) -eq 0 ]; then
                order=()
                for ((i = ${#TARGETS[@]} - 1; i >= 0; i--)); do order+=("${TARGETS[$i]}"); done
            fi
            for t in "${order[@]}"; do
                run_scenario "$t" "$mode" "$clients" "$round" | record
            done
        done
    done
    log "round $round/$ROUNDS done"
done
printf '{"kind":"after_load","gateway_rss_kib":%s}\n' "$(rss_kib $GW_PID)" | record

# ---------------------------------------------------------------------------------------------
# Start-up: spawn to /readyz 200 (and to every tool enabled), with the bench contracts and with
# CONTRACTS_N generated ones, against the running legacy upstream.
GEN="$WORK/contracts-$CONTRACTS_N"
python3 "$BENCH/gen_contracts.py" "$GEN" "$CONTRACTS_N"
for rep in $(seq "$STARTUP_REPS"); do
    for set in bench generated; do
        port=$(free_port)
        if [ $set = bench ]; then
            write_config "$WORK/startup.yaml" "$BENCH/contracts" "$port" \
                "demo=$UP_LEGACY_URL" "demo_stateless=$UP_STATELESS_URL"
            want=4
        else
            write_config "$WORK/startup.yaml" "$GEN" "$port" "demo=$UP_LEGACY_URL"
            want=$CONTRACTS_N
        fi
        "$LOADGEN" startup --ready-url "http://127.0.0.1:$port/readyz" --expect-enabled "$want" \
            --timeout 300 --poll-ms 10 --log "$WORK/startup-$set-$rep.log" --label "$set" \
            -- "$NARROWGATE_BIN" serve --config "$WORK/startup.yaml" | record
    done
done

# ---------------------------------------------------------------------------------------------
# Validation micro-benchmark (library only).
log "validation micro-benchmark"
"$BIN/examples/bench-validation" "$BENCH/contracts" | record

# ---------------------------------------------------------------------------------------------
mkdir -p "$BENCH/results"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$BENCH/results/$STAMP.json"
python3 "$BENCH/report.py" "$RAW" "$OUT"
log "results: $OUT"
