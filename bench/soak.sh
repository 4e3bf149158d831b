#!/usr/bin/env bash
# narrowgate soak run: an hour (by default) of mixed load through one gateway while hostile upstreams
# attack it and its configuration is reloaded, sampling the gateway's memory, file descriptors and
# threads throughout. It answers one question: does anything grow or get lost over time?
#
#   bench/soak.sh                    # one hour; writes bench/results/soak-<UTC time>.json
#   bench/soak.sh --duration 600     # ten minutes
#
# Options (or the environment variables in brackets):
#   --duration S [DURATION=3600]   length of the run, in seconds
#   --sample S [SAMPLE=10]         seconds between two samples of RSS, fds and threads
#   --window S [WINDOW=30]         seconds of one load window (loadgen runs back to back)
#   --clients N [CLIENTS=8]        concurrent clients per mode (legacy and stateless run at once)
#   --reload-every S [RELOAD=120]  seconds between two reloads (contract edit and SIGHUP, alternately)
#   --no-build                     use the release binaries already in target/release
#
# What runs, all on loopback:
#   - the demo upstream twice (sessions, and stateless) under bench/contracts, driven by loadgen in
#     both modes without pause; every answer is checked (an error is a lost call);
#   - hostile-upstream over HTTP with `ping-flood` and `list-changed-flood` (each call to its `echo`
#     floods the gateway with upstream requests and tool-list changes), called every few seconds;
#   - hostile-upstream over stdio with `stderr-flood` (at each start, a line of many MiB without a
#     newline) and `schema-injection`;
#   - a reload every RELOAD seconds: an edited contract description (file watch) or SIGHUP.
# The summary compares the gateway's RSS of the first and the last tenth of the run, and reports
# the peaks of RSS, fds and threads, calls made, errors, and reloads.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
DURATION=${DURATION:-3600}
SAMPLE=${SAMPLE:-10}
WINDOW=${WINDOW:-30}
CLIENTS=${CLIENTS:-8}
RELOAD=${RELOAD:-120}
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) DURATION=$2; shift 2 ;;
        --sample) SAMPLE=$2; shift 2 ;;
        --window) WINDOW=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --reload-every) RELOAD=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

PIDS=()
WORK=$(mktemp -d "${TMPDIR:-/tmp}/narrowgate-soak.XXXXXX")
cleanup() {
    local status=$?
    for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true; done
    if [ "${KEEP_WORK:-0}" = 1 ] || [ $status -ne 0 ]; then log "scratch folder kept: $WORK"; else rm -rf "$WORK"; fi
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BIN="$ROOT/target/release"
if [ "$BUILD" = 1 ]; then
    log "building release binaries"
    (cd "$ROOT" && cargo build --release --quiet --bin narrowgate \
        --bin demo-upstream --example loadgen --bin hostile-upstream)
fi
for b in narrowgate demo-upstream examples/loadgen hostile-upstream; do
    [ -x "$BIN/$b" ] || die "missing $BIN/$b (run without --no-build)"
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_http NAME BIN ARGS...: starts an HTTP upstream that prints `listening on URL`; sets URL.
start_http() {
    local name=$1 bin=$2; shift 2
    "$bin" http --port 0 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PIDS+=("$!")
    for _ in $(seq 100); do
        URL=$(sed -n 's/^listening on //p' "$WORK/$name.out" 2>/dev/null || true)
        [ -n "$URL" ] && return 0
        sleep 0.05
    done
    die "$name did not start; see $WORK/$name.err"
}

start_http demo "$BIN/demo-upstream"; DEMO_URL=$URL
start_http demo-stateless "$BIN/demo-upstream" --stateless; DEMO_STATELESS_URL=$URL
start_http hostile "$BIN/hostile-upstream" --attack ping-flood --attack list-changed-flood \
    --flood-count 2000; HOSTILE_URL=$URL

KEY="narrowgate-soak-key"
KEY_HASH=$(printf %s "$KEY" | "$BIN/narrowgate" hash-key)
export LOADGEN_KEY="$KEY"

mkdir -p "$WORK/contracts"
cp "$BENCH/contracts/"*.yaml "$WORK/contracts/"
hostile_contract() {   # hostile_contract UPSTREAM EXPOSED DESCRIPTION
    cat <<EOF
upstream: $1
tools:
  $2:
    upstream_tool: echo
    description: $3
    privilege: read
    rate: 100000/s
    input:
      type: object
      properties: { text: { type: string, maxLength: 64 } }
      required: [text]
      additionalProperties: false
EOF
}
hostile_contract hostile_http echo_http "Echo through the flooding upstream." >"$WORK/contracts/hostile_http.yaml"
hostile_contract hostile_stdio echo_stdio "Echo through the noisy upstream." >"$WORK/contracts/hostile_stdio.yaml"

PORT=$(free_port)
cat >"$WORK/gateway.yaml" <<EOF
listen: 127.0.0.1:$PORT
path: /mcp
contracts: contracts
upstreams:
  demo: { url: "$DEMO_URL", timeout: 10s }
  demo_stateless: { url: "$DEMO_STATELESS_URL", timeout: 10s }
  hostile_http: { url: "$HOSTILE_URL", timeout: 10s }
  hostile_stdio:
    command: $BIN/hostile-upstream
    args: [stdio, --attack, stderr-flood, --attack, schema-injection, --stderr-bytes, "67108864"]
    timeout: 10s
callers:
  - name: soak
    api_key_sha256: $KEY_HASH
    tools: ['*']
    rate: 100000/s
receipts:
  path: receipts.db
  # An hour at full load writes tens of millions of receipts: keeping ten minutes of them also
  # soaks retention (the file must stop growing once pruning keeps pace).
  retention: 10m
state: memory
EOF
# Warnings only: the per-call info line alone is gigabytes an hour at this rate (NARROWGATE_LOG=info
# in the environment restores it).
NARROWGATE_LOG=${NARROWGATE_LOG:-warn} "$BIN/narrowgate" serve --config "$WORK/gateway.yaml" \
    >"$WORK/gateway.out" 2>"$WORK/gateway.err" &
GW_PID=$!
PIDS+=("$GW_PID")
GW="http://127.0.0.1:$PORT"
for _ in $(seq 600); do curl -fsS --max-time 1 "$GW/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS --max-time 1 "$GW/readyz" >/dev/null || die "the gateway did not become ready; see $WORK/gateway.err"
log "gateway ready at $GW/mcp (pid $GW_PID); soak for ${DURATION}s"

RAW="$WORK/raw.jsonl"
sample() {
    local rss fds threads db
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$GW_PID/status" 2>/dev/null || echo null)
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$GW_PID/status" 2>/dev/null || echo null)
    fds=$(find "/proc/$GW_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    db=$(stat -c %s "$WORK"/receipts.db* 2>/dev/null | awk '{n += $1} END {print n + 0}')
    printf '{"kind":"sample","t":%s,"rss_kib":%s,"fds":%s,"threads":%s,"receipts_bytes":%s,"healthz":%s}\n' \
        "$SECONDS" "$rss" "$fds" "$threads" "$db" \
        "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$GW/healthz" || echo 0)" >>"$RAW"
}

# A stateless call to a hostile tool: any HTTP answer with a JSON-RPC result or error counts as
# answered; no answer within 15 s is a lost call.
hostile_call() {
    local tool=$1 code
    code=$(curl -s -o "$WORK/hostile-answer.json" -w '%{http_code}' --max-time 15 "$GW/mcp" \
        -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
        -H 'Mcp-Method: tools/call' -H "Mcp-Name: $tool" \
        -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":{\"text\":\"soak\"},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}" \
        || true)
    local answered=false
    grep -q '"jsonrpc"' "$WORK/hostile-answer.json" 2>/dev/null && answered=true
    printf '{"kind":"hostile","t":%s,"tool":"%s","status":"%s","answered":%s}\n' \
        "$SECONDS" "$tool" "$code" "$answered" >>"$RAW"
}

END=$((SECONDS + DURATION))
# Load: both modes at once, window after window, until the end.
for mode in legacy stateless; do
    (
        suffix=""; [ "$mode" = stateless ] && suffix="_stateless"
        while [ $SECONDS -lt $END ]; do
            left=$((END - SECONDS)); [ $left -lt 2 ] && break
            d=$WINDOW; [ $left -lt "$d" ] && d=$left
            "$BIN/examples/loadgen" run --url "$GW/mcp" --mode "$mode" --calls "$BENCH/calls.json" \
                --tool-name "{}$suffix" --clients "$CLIENTS" --duration "$d" --warmup 0 \
                --label "$mode" >>"$RAW" 2>>"$WORK/loadgen-$mode.err" ||
                printf '{"kind":"loadgen_failed","mode":"%s","t":%s}\n' "$mode" "$SECONDS" >>"$RAW"
        done
    ) &
    PIDS+=("$!")
done

next_sample=0 next_hostile=0 next_reload=$RELOAD reloads=0
while [ $SECONDS -lt $END ]; do
    if [ $SECONDS -ge $next_sample ]; then sample; next_sample=$((SECONDS + SAMPLE)); fi
    if [ $SECONDS -ge $next_hostile ]; then
        hostile_call echo_http
        hostile_call echo_stdio
        next_hostile=$((SECONDS + 5))
    fi
    if [ $SECONDS -ge $next_reload ]; then
        reloads=$((reloads + 1))
        if [ $((reloads % 2)) = 1 ]; then
            hostile_contract hostile_http echo_http "Echo through the flooding upstream (reload $reloads)." \
                >"$WORK/contracts/hostile_http.yaml"
            printf '{"kind":"reload","t":%s,"how":"file"}\n' "$SECONDS" >>"$RAW"
        else
            kill -HUP "$GW_PID"
            printf '{"kind":"reload","t":%s,"how":"sighup"}\n' "$SECONDS" >>"$RAW"
        fi
        next_reload=$((SECONDS + RELOAD))
    fi
    kill -0 "$GW_PID" 2>/dev/null || die "the gateway exited; see $WORK/gateway.err"
    sleep 1
done
wait_for_load() { for pid in "${PIDS[@]: -2}"; do wait "$pid" 2>/dev/null || true; done; }
wait_for_load
sample
printf '{"kind":"log","gateway_err_bytes":%s,"gateway_err_longest_line":%s}\n' \
    "$(stat -c %s "$WORK/gateway.err")" "$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$WORK/gateway.err")" >>"$RAW"

mkdir -p "$BENCH/results"
OUT="$BENCH/results/soak-$(date -u +%Y%m%dT%H%M%SZ).json"
python3 - "$RAW" "$OUT" "$DURATION" <<'EOF'
import json, statistics, sys
raw, out, duration = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(raw) if l.strip()]
samples = [r for r in rows if r["kind"] == "sample" and r["rss_kib"] is not None]
loads = [r for r in rows if r.get("requests_total") is not None]
hostile = [r for r in rows if r["kind"] == "hostile"]
tenth = max(1, len(samples) // 10)
first = statistics.median(s["rss_kib"] for s in samples[:tenth])
last = statistics.median(s["rss_kib"] for s in samples[-tenth:])
summary = {
    "duration_s": duration,
    "samples": len(samples),
    "rss_kib_first_tenth_median": first,
    "rss_kib_last_tenth_median": last,
    "rss_growth_pct": round((last - first) * 100 / first, 1),
    "rss_kib_max": max(s["rss_kib"] for s in samples),
    "fds_first": samples[0]["fds"], "fds_last": samples[-1]["fds"], "fds_max": max(s["fds"] for s in samples),
    "threads_max": max(s["threads"] for s in samples),
    "receipts_mib_at_half": round(samples[len(samples) // 2]["receipts_bytes"] / 2**20, 1),
    "receipts_mib_last": round(samples[-1]["receipts_bytes"] / 2**20, 1),
    "healthz_not_200": sum(1 for s in samples if str(s["healthz"]) != "200"),
    "calls": sum(r["requests_total"] for r in loads),
    "call_errors": sum(r["errors"] for r in loads),
    "error_samples": sorted({e for r in loads for e in r.get("error_samples", [])})[:5],
    "loadgen_failures": sum(1 for r in rows if r["kind"] == "loadgen_failed"),
    "hostile_calls": len(hostile),
    "hostile_unanswered": sum(1 for r in hostile if not r["answered"]),
    "reloads": sum(1 for r in rows if r["kind"] == "reload"),
    "log": next((r for r in rows if r["kind"] == "log"), None),
}
json.dump({"summary": summary, "rows": rows}, open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
EOF
log "results: $OUT"
