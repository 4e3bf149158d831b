#!/usr/bin/env bash
# narrowgate fleet benchmark: calls per second of one, two and three replicas behind nginx
# (docker/nginx.conf) sharing Redis (`state:`) and PostgreSQL (`receipts.url`), and what each part
# of the fleet spends per call: CPU of the replicas, nginx, Redis, PostgreSQL and the upstream,
# Redis round trips (script runs) and commands per call, and PostgreSQL commits per call. Those per-call costs are what predict a
# larger cluster (see BENCHMARKS.md, "Replicas").
#
#   bench/fleet.sh                    # replicas 1 2 3, stateless and legacy, 3 rounds
#   bench/fleet.sh --replicas "1 3" --rounds 1 --duration 5
#
# Options (or the environment variables in brackets):
#   --replicas "1 2 3" [REPLICAS]   fleet sizes measured
#   --modes "stateless legacy" [MODES]
#   --clients N [CLIENTS=32]        concurrent loadgen clients (closed loop)
#   --duration S [DURATION=5]       measured seconds per run (after 1 s of warm-up)
#   --rounds N [ROUNDS=3]           rounds; each measures every size and mode once (interleaved)
#   --no-build                      use the release binaries already in target/release
#   KEEP_WORK=1                     keep the scratch folder
#
# Needs redis-server, PostgreSQL's server programs (initdb, postgres) and nginx: the Debian packages
# redis-server, postgresql and nginx-light (tests/run.sh installs them). Everything listens on
# loopback. Writes bench/results/fleet-<UTC time>.json and prints a markdown table of medians.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
REPLICAS=${REPLICAS:-"1 2 3"}
MODES=${MODES:-"stateless legacy"}
CLIENTS=${CLIENTS:-32}
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --replicas) REPLICAS=$2; shift 2 ;;
        --modes) MODES=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "fleet.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[fleet %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

PIDS=()
WORK=$(mktemp -d "${TMPDIR:-/tmp}/narrowgate-fleet.XXXXXX")
chmod 755 "$WORK"
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
    (cd "$ROOT" && cargo build --release --quiet --bin narrowgate --bin demo-upstream --example loadgen)
fi
for b in narrowgate demo-upstream examples/loadgen; do
    [ -x "$BIN/$b" ] || die "missing $BIN/$b (run without --no-build)"
done
command -v redis-server >/dev/null || die "redis-server is missing: apt-get install redis-server"
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PG_BIN/initdb" ] || die "PostgreSQL's server programs are missing: apt-get install postgresql"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || die "nginx is missing: apt-get install nginx-light"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {  # wait_port PORT WHAT
    for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
    die "$2 did not listen on port $1"
}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# --- Redis, PostgreSQL (fsync on: commits cost what they cost in production), the upstream -------
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!; PIDS+=("$REDIS_PID")
wait_port "$REDIS_PORT" redis-server

PG_PORT=$(free_port)
mkdir -p "$WORK/pg"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$WORK/pg"
as_pg "$PG_BIN/initdb" -D "$WORK/pg/data" -U narrowgate --auth=trust -E UTF8 >"$WORK/initdb.log" 2>&1 ||
    die "initdb failed: see $WORK/initdb.log"
as_pg "$PG_BIN/postgres" -D "$WORK/pg/data" -p "$PG_PORT" -c listen_addresses=127.0.0.1 -k "$WORK/pg" \
    >"$WORK/postgres.log" 2>&1 &
PG_PID=$!; PIDS+=("$PG_PID")
wait_port "$PG_PORT" postgres
PG_URL="postgres://narrowgate@127.0.0.1:$PG_PORT/postgres"

"$BIN/demo-upstream" http --port 0 >"$WORK/demo.out" 2>"$WORK/demo.err" &
DEMO_PID=$!; PIDS+=("$DEMO_PID")
for _ in $(seq 300); do DEMO_URL=$(sed -n 's/^listening on //p' "$WORK/demo.out"); [ -n "$DEMO_URL" ] && break; sleep 0.1; done
[ -n "$DEMO_URL" ] || die "the demo upstream did not start: see $WORK/demo.err"
"$BIN/demo-upstream" http --port 0 --stateless >"$WORK/demo2.out" 2>"$WORK/demo2.err" &
DEMO2_PID=$!; PIDS+=("$DEMO2_PID")
for _ in $(seq 300); do DEMO2_URL=$(sed -n 's/^listening on //p' "$WORK/demo2.out"); [ -n "$DEMO2_URL" ] && break; sleep 0.1; done
[ -n "$DEMO2_URL" ] || die "the stateless demo upstream did not start: see $WORK/demo2.err"

KEY="narrowgate-fleet-key"
KEY_HASH=$(printf %s "$KEY" | "$BIN/narrowgate" hash-key)
export LOADGEN_KEY="$KEY"

# --- Three replicas (the smaller fleets use the first ones), each with its own config -------------
REPLICA_PORTS=()
REPLICA_PIDS=()
for i in 1 2 3; do
    dir="$WORK/replica-$i"
    mkdir -p "$dir/contracts"
    cp "$BENCH/contracts/"*.yaml "$dir/contracts/"
    port=$(free_port)
    cat >"$dir/narrowgate.yaml" <<EOF
listen: 127.0.0.1:$port
path: /mcp
contracts: contracts
upstreams:
  demo: { url: "$DEMO_URL", timeout: 10s }
  demo_stateless: { url: "$DEMO2_URL", timeout: 10s }
callers:
  - name: fleet
    api_key_sha256: $KEY_HASH
    tools: ['*']
    rate: 1000000/s
state: redis://127.0.0.1:$REDIS_PORT
receipts:
  url: $PG_URL
http:
  max_connections: 4096
  max_connections_per_client: 4096
  max_sessions: 100000
  max_sessions_per_caller: 100000
EOF
    NARROWGATE_LOG=warn "$BIN/narrowgate" serve --config "$dir/narrowgate.yaml" >"$dir/out" 2>"$dir/err" &
    pid=$!; PIDS+=("$pid")
    REPLICA_PORTS+=("$port"); REPLICA_PIDS+=("$pid")
done
for i in 0 1 2; do
    for _ in $(seq 600); do curl -fsS --max-time 1 "http://127.0.0.1:${REPLICA_PORTS[$i]}/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    curl -fsS --max-time 1 "http://127.0.0.1:${REPLICA_PORTS[$i]}/readyz" >/dev/null ||
        die "replica $((i + 1)) is not ready: see $WORK/replica-$((i + 1))/err"
done
log "3 replicas ready; Redis :$REDIS_PORT, PostgreSQL :$PG_PORT"

# nginx on docker/nginx.conf with the first N replicas; one instance per fleet size.
start_nginx() {  # start_nginx N -> sets NGINX_PORT, NGINX_PID
    local n=$1 dir="$WORK/nginx-$1" servers="" i
    mkdir -p "$dir"
    for i in $(seq 0 $((n - 1))); do servers+="server 127.0.0.1:${REPLICA_PORTS[$i]}; "; done
    NGINX_PORT=$(free_port)
    awk -v servers="$servers" -v port="$NGINX_PORT" '
        /^[ \t]*server narrowgate-1:8080;/ { print "        " servers; next }
        /^[ \t]*server narrowgate-/ { next }
        /^[ \t]*access_log/ { print "    access_log off;"; next }
        { sub(/listen 8080;/, "listen 127.0.0.1:" port ";"); print }
    ' "$ROOT/docker/nginx.conf" >"$dir/nginx.conf"
    "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -g "daemon off; pid $dir/nginx.pid;" \
        >"$dir/out" 2>&1 &
    NGINX_PID=$!; PIDS+=("$NGINX_PID")
    wait_port "$NGINX_PORT" nginx
}
declare -A NGINX_PORTS NGINX_PIDS
for n in $REPLICAS; do
    start_nginx "$n"
    NGINX_PORTS[$n]=$NGINX_PORT; NGINX_PIDS[$n]=$NGINX_PID
done

# CPU ticks (1/100 s) of processes: the replicas, nginx (its workers), redis, postgres (every backend),
# the demo upstreams.
ticks_of() {  # ticks_of PID... -> sum of utime+stime of those processes and their children threads
    local sum=0 p
    for p in "$@"; do
        [ -r "/proc/$p/stat" ] || continue
        sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$sum"
}
pids_named() { pgrep -x "$1" | tr '\n' ' '; }
snapshot() {  # snapshot N -> JSON of counters
    local n=$1 gw=() i
    for i in $(seq 0 $((n - 1))); do gw+=("${REPLICA_PIDS[$i]}"); done
    local redis_cmds redis_scripts pg_commits
    redis_cmds=$(redis-cli -p "$REDIS_PORT" info stats | awk -F: '/^total_commands_processed/ {print $2+0}')
    # Script runs: each is one round trip, whatever it calls inside (those count as commands).
    redis_scripts=$(redis-cli -p "$REDIS_PORT" info commandstats |
        awk -F'[:=,]' '/^cmdstat_eval(sha)?:/ {n += $3} END {print n + 0}')
    pg_commits=$("$PSQL" -h 127.0.0.1 -p "$PG_PORT" -U narrowgate -d postgres -Atc \
        "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'" 2>/dev/null || echo 0)
    # shellcheck disable=SC2046
    printf '{"gateways":%s,"nginx":%s,"redis":%s,"postgres":%s,"upstream":%s,"redis_commands":%s,"redis_scripts":%s,"pg_commits":%s}' \
        "$(ticks_of "${gw[@]}")" "$(ticks_of $(pids_named nginx))" "$(ticks_of "$REDIS_PID")" \
        "$(ticks_of $(pids_named postgres))" "$(ticks_of "$DEMO_PID" "$DEMO2_PID")" \
        "${redis_cmds:-0}" "${redis_scripts:-0}" "${pg_commits:-0}"
}
PSQL="$PG_BIN/psql"
[ -x "$PSQL" ] || PSQL=$(command -v psql || true)
[ -n "$PSQL" ] || die "psql is missing: apt-get install postgresql-client"

RAW="$WORK/raw.jsonl"
for round in $(seq "$ROUNDS"); do
    for n in $REPLICAS; do
        for mode in $MODES; do
            suffix=""; [ "$mode" = stateless ] && suffix="_stateless"
            url="http://127.0.0.1:${NGINX_PORTS[$n]}/mcp"
            before=$(snapshot "$n")
            out=$("$BIN/examples/loadgen" run --url "$url" --mode "$mode" --calls "$BENCH/calls.json" \
                --tool-name "{}$suffix" --clients "$CLIENTS" --duration "$DURATION" --warmup 1 \
                --label "r$n-$mode") || die "loadgen failed for $n replicas, $mode"
            after=$(snapshot "$n")
            printf '{"round":%s,"replicas":%s,"mode":"%s","load":%s,"before":%s,"after":%s}\n' \
                "$round" "$n" "$mode" "$out" "$before" "$after" >>"$RAW"
            log "round $round: $n replica(s), $mode: $(echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r.get("throughput_rps", 0)), "calls/s,", r.get("errors"), "errors")')"
        done
    done
done

mkdir -p "$BENCH/results"
OUT="$BENCH/results/fleet-$(date -u +%Y%m%dT%H%M%SZ).json"
python3 - "$RAW" "$OUT" "$(nproc)" <<'PY'
import json, statistics, sys
raw, out, cores = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(raw) if l.strip()]
groups = {}
for r in rows:
    load, b, a = r["load"], r["before"], r["after"]
    # The counters cover the warm-up and the measured window: so does requests_total.
    calls = load.get("requests_total") or 1
    per = {k: (a[k] - b[k]) * 10.0 / calls for k in ("gateways", "nginx", "redis", "postgres", "upstream")}
    per["redis_commands"] = (a["redis_commands"] - b["redis_commands"]) / calls
    per["redis_scripts"] = (a["redis_scripts"] - b["redis_scripts"]) / calls
    per["pg_commits"] = (a["pg_commits"] - b["pg_commits"]) / calls
    per["rps"] = load.get("throughput_rps", 0)
    per["errors"] = load.get("errors", 0)
    groups.setdefault((r["replicas"], r["mode"]), []).append(per)
summary = []
print(f"| replicas | mode | calls/s | gateways ms CPU/call | nginx | Redis | PostgreSQL | upstream | Redis scripts (cmds)/call | PG commits/call | errors |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (n, mode), runs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    summary.append({"replicas": n, "mode": mode, "runs": len(runs), **med})
    print(f"| {n} | {mode} | {med['rps']:.0f} | {med['gateways']:.3f} | {med['nginx']:.3f} | {med['redis']:.3f} | "
          f"{med['postgres']:.3f} | {med['upstream']:.3f} | {med['redis_scripts']:.2f} ({med['redis_commands']:.1f}) | {med['pg_commits']:.3f} | "
          f"{sum(r['errors'] for r in runs)} |")
json.dump({"cores": cores, "summary": summary, "rows": rows}, open(out, "w"), indent=1)
print(f"\n{cores} cores; medians of {len(rows) // max(1, len(groups))} runs each; results: {out}")
PY
