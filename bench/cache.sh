#!/usr/bin/env bash
# The result cache (`cache:`) in numbers: the same `weather` calls (bench/calls.json's first call)
# through two gateways on one demo upstream, one whose `weather` contract has `cache: 60s` and one
# without, interleaved for ROUNDS rounds of DURATION s at CLIENTS clients. Reports calls/s, gateway
# CPU per call and how many calls reached the upstream (the receipts' attempts). See BENCHMARKS.md.
#
#   bench/cache.sh            # after a release build (cargo build --release --bin narrowgate
#                             # --bin demo-upstream --example loadgen)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="$ROOT/target/release"
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
CLIENTS=${CLIENTS:-16}
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
for b in narrowgate demo-upstream examples/loadgen; do
    [ -x "$BIN/$b" ] || { echo "bench/cache.sh: $BIN/$b is missing: build it first (see the header)" >&2; exit 1; }
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$BIN/demo-upstream" http --port 0 >"$WORK/up.out" 2>"$WORK/up.err" &
PIDS+=($!)
for _ in $(seq 100); do UP=$(sed -n 's/^listening on //p' "$WORK/up.out"); [ -n "$UP" ] && break; sleep 0.05; done
[ -n "$UP" ] || { echo "demo-upstream did not start" >&2; exit 1; }

KEY=narrowgate-bench-key
HASH=$(printf %s "$KEY" | "$BIN/narrowgate" hash-key)
jq_calls() { python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[:1]))' "$ROOT/bench/calls.json"; }
jq_calls >"$WORK/calls.json"

# start NAME EXTRA_CONTRACT_LINE: a gateway whose weather contract has the extra line.
start() {
    local name=$1 extra=$2 port
    port=$(free_port)
    mkdir -p "$WORK/$name"
    sed "s/^  weather:\$/  weather:\n$extra/" "$ROOT/bench/contracts/demo.yaml" >"$WORK/$name/demo.yaml"
    cat >"$WORK/$name.yaml" <<YAML
listen: 127.0.0.1:$port
contracts: $WORK/$name
upstreams:
  demo: { url: "$UP", timeout: 10s }
callers:
  - { name: bench, api_key_sha256: $HASH, tools: ['*'] }
receipts: { path: $WORK/$name-receipts.db }
http: { max_connections: 10000, max_connections_per_client: 10000 }
YAML
    "$BIN/narrowgate" serve --config "$WORK/$name.yaml" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PIDS+=($!)
    eval "${name}_PID=$!; ${name}_URL=http://127.0.0.1:$port/mcp; ${name}_CONFIG=$WORK/$name.yaml"
    for _ in $(seq 300); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "$name not ready: $(cat "$WORK/$name.err")" >&2; exit 1
}
start uncached ""
start cached "    cache: 60s"

: >"$WORK/runs.jsonl"
for round in $(seq "$ROUNDS"); do
    for name in uncached cached; do
        url_var=${name}_URL; pid_var=${name}_PID
        LOADGEN_KEY=$KEY "$BIN/examples/loadgen" run --url "${!url_var}" --mode legacy --calls "$WORK/calls.json" \
            --clients "$CLIENTS" --duration "$DURATION" --warmup 0.5 --label "$name|$round" \
            --watch "gateway=${!pid_var}" >>"$WORK/runs.jsonl"
    done
done
for name in uncached cached; do
    config_var=${name}_CONFIG
    "$BIN/narrowgate" receipts --config "${!config_var}" --json --tool weather >"$WORK/$name-receipts.json"
done
python3 - "$WORK" <<'PY'
import json, statistics, sys
work = sys.argv[1]
runs = [json.loads(l) for l in open(f"{work}/runs.jsonl")]
print("| gateway | calls/s (median) | gateway CPU ms/call | p50 ms | errors | receipts | upstream calls (attempts) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name in ("uncached", "cached"):
    mine = [r for r in runs if r["label"].startswith(name + "|")]
    rps = statistics.median(r["throughput_rps"] for r in mine)
    cpu = statistics.median(r["cpu"]["gateway"]["cpu_ms_per_call"] for r in mine)
    p50 = statistics.median(r["latency_ms"]["p50"] for r in mine)
    errors = sum(r["errors"] for r in mine)
    receipts = json.load(open(f"{work}/{name}-receipts.json"))
    attempts = sum(r["attempts"] for r in receipts)
    print(f"| {name} | {rps:.0f} | {cpu:.4f} | {p50:.3f} | {errors} | {len(receipts)} | {attempts} |")
PY
