#!/usr/bin/env bash
# The status page on a receipts store of 10 million rows (issue 29: "answers within 200 ms").
#
# For each layout (`day`: all ROWS receipts within the last 24 hours, about 116 calls/s, the worst
# case of the 24h window; `month`: ROWS spread over 30 days, about 14,000 in the last hour):
#   1. the gateway creates the SQLite file (its own schema), is stopped, and
#      `bench-status-store generate` appends ROWS receipts (timed; the file's size);
#   2. the gateway starts on it while `bench-status-store feed` keeps appending receipts at the
#      layout's rate (a live store: the page's last minutes are raw receipts, as in production);
#      `bench-status-store watch` times the roll-up catching up (`receipt_minutes_done.until`
#      within 2 minutes of now) and samples the gateway's RSS; on `day`, the page is timed
#      meanwhile too (a store still being summarised);
#   3. `GET /status?window=15m|1h|24h` and `/status` are timed N times each, interleaved, against
#      that gateway and a second one on an EMPTY receipts store (the page's fixed cost), started
#      once for the whole run: medians, p90 and the ratio of medians;
#   4. the SQL the page runs, part by part (`bench-status-store parts`), and
#      `narrowgate receipts --summary --since 24h --db FILE` (the raw receipts: what a window would
#      cost without the summaries), 3 runs.
# Everything listens on 127.0.0.1; the stores live under WORK (target/tmp/bench-status) and are
# deleted at the end unless KEEP=1. Writes bench/results/status-<UTC time>.json (not committed).
#
#   cargo build --release --bin narrowgate --bin demo-upstream --example bench-status-store
#   bench/status.sh                      # both layouts, 10M rows, N=30: ~4 minutes on 2 cores,
#                                        # 3.2 GB of disk at a time (one store)
#   LAYOUTS=day bench/status.sh          # one layout
#   ROWS=1000000 N=10 bench/status.sh    # a quick run
#   PROFILE=1 bench/status.sh            # also `perf record` the gateway over 10 pages of 24h
#                                        # (inclusive time per function: target/tmp/bench-status-*-perf.txt)
#   LEAN=1 bench/status.sh               # arguments_digest '' (a smaller file; default: sha256:…)
#   KEEP=1 bench/status.sh               # keep the stores, logs and JSON under WORK
#   BEFORE_BIN=/path/to/narrowgate bench/status.sh   # also time another build (`before`) on the
#                                        # same stores in the same interleaved rounds (started
#                                        # once the roll-up has caught up)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/target/release}
ROWS=${ROWS:-10000000}
N=${N:-30}
LAYOUTS=${LAYOUTS:-day month}
WORK=${WORK:-$ROOT/target/tmp/bench-status}
KEEP=${KEEP:-0}
PROFILE=${PROFILE:-0}
TOOL=$BIN/examples/bench-status-store
for b in narrowgate demo-upstream examples/bench-status-store; do
    [ -x "$BIN/$b" ] || { echo "bench/status.sh: $BIN/$b is missing: build it first (see the header)" >&2; exit 1; }
done
# What was measured (read at the start): the commit, files under src/ differing from it, the build time.
export GIT_STATE="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) $(git -C "$ROOT" status --short -- src 2>/dev/null | wc -l) changed files under src/"
export BIN_MTIME="$(date -u -r "$BIN/narrowgate" +%FT%TZ)"
case "$WORK" in "$ROOT"/target/*|/tmp/*) ;; *) echo "bench/status.sh: WORK must be under target/ or /tmp" >&2; exit 1 ;; esac
rm -rf "$WORK"
mkdir -p "$WORK/contracts" "$ROOT/bench/results"
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "$KEEP" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }
# rss PID: "VmRSS VmHWM" in KiB (now, and the peak so far).
rss() { awk '/^VmRSS/ {r=$2} /^VmHWM/ {h=$2} END {print r, h}' "/proc/$1/status" 2>/dev/null || echo "- -"; }
log() { printf '%s bench/status.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

KEY=narrowgate-status-bench-key
HASH=$(printf %s "$KEY" | "$BIN/narrowgate" hash-key)
cp "$ROOT/bench/contracts/demo.yaml" "$WORK/contracts/"

# start NAME DB [BINARY]: a gateway (admin caller, the demo upstream over stdio) with receipts in
# DB. Sets NAME_PID and NAME_ADDR; waits for /readyz.
start() {
    local name=$1 db=$2 bin=${3:-$BIN/narrowgate} port
    port=$(free_port)
    cat >"$WORK/$name.yaml" <<YAML
listen: 127.0.0.1:$port
contracts: $WORK/contracts
upstreams:
  demo: { command: $BIN/demo-upstream, args: [stdio], timeout: 10s }
callers:
  - { name: admin, api_key_sha256: $HASH, tools: ['*'], roles: [admin] }
receipts: { path: $db }
YAML
    "$bin" serve --config "$WORK/$name.yaml" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    local pid=$!
    PIDS+=("$pid")
    eval "${name}_PID=$pid; ${name}_ADDR=127.0.0.1:$port"
    for _ in $(seq 1200); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "bench/status.sh: gateway $name not ready: $(tail -5 "$WORK/$name.err")" >&2
    exit 1
}
# forget PID: a process that has ended is no longer ours to stop (its id may be reused).
forget() { local kept=() p; for p in "${PIDS[@]:-}"; do [ "$p" = "$1" ] || kept+=("$p"); done; PIDS=("${kept[@]:-}"); }
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; forget "$1"; }

# The baseline: a gateway on an empty store, up for the whole run.
start empty "$WORK/empty.db"
log "baseline gateway (empty store) on $empty_ADDR"
STATUS=$(curl -s -o /dev/null -w '%{http_code}' -u "bench:$KEY" "http://$empty_ADDR/status?window=24h")
if [ "$STATUS" = 200 ]; then
    PATHS=(/status?window=15m /status?window=1h /status?window=24h /status)
    WINDOWS=yes
else
    log "GET /status?window=24h answered $STATUS: the page does not take ?window= yet; timing /status only"
    PATHS=(/status)
    WINDOWS="no ($STATUS)"
fi
PATH_ARGS=()
for p in "${PATHS[@]}"; do PATH_ARGS+=(--path "$p"); done

for layout in $LAYOUTS; do
    case $layout in
        day) span=86400 ;;
        month) span=$((30 * 86400)) ;;
        *) echo "bench/status.sh: layout day|month, not $layout" >&2; exit 1 ;;
    esac
    db="$WORK/$layout.db"
    out="$WORK/$layout"
    # 1. The schema, by the gateway itself; then the receipts.
    start make "$db"
    stop "$make_PID"
    log "$layout: generating $ROWS receipts into $db"
    "$TOOL" generate --db "$db" --rows "$ROWS" --layout "$layout" ${LEAN:+--lean} >"$out-generate.json"
    log "$layout: $(cat "$out-generate.json")"

    # 2. The gateway on the store, the store kept live, the roll-up watched.
    started=$(now_ms)
    start big "$db"
    ready_ms=$(( $(now_ms) - started ))
    rate=$(python3 -c "print($ROWS / $span)")
    "$TOOL" feed --db "$db" --rate "$rate" --seconds 3600 >"$out-feed.json" 2>"$out-feed.err" &
    FEED_PID=$!
    PIDS+=("$FEED_PID")
    "$TOOL" watch --db "$db" --pid "$big_PID" --started-ms "$started" --timeout 1800 >"$out-watch.json" &
    WATCH_PID=$!
    PIDS+=("$WATCH_PID")
    log "$layout: gateway ready in $ready_ms ms; roll-up catching up (feeding $rate receipts/s)"
    if [ "$layout" = day ]; then
        # The page while the roll-up is still catching up (rounds stop once it has).
        "$TOOL" pages --target "big=$big_ADDR" --target "empty=$empty_ADDR" --baseline empty \
            "${PATH_ARGS[@]}" --n "$N" --key "$KEY" --while-lagging "$db" >"$out-lagging.json"
        log "$layout: page during catch-up: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["rounds_run"], "rounds, lag", d["lag_minutes_per_round"][:1], "->", d["lag_minutes_per_round"][-1:], "min")' "$out-lagging.json")"
    fi
    wait "$WATCH_PID" || true
    forget "$WATCH_PID"
    rss_caught_up=$(rss "$big_PID")
    TARGETS=(--target "big=$big_ADDR")
    if [ -n "${BEFORE_BIN:-}" ]; then
        start before "$db" "$BEFORE_BIN"
        TARGETS+=(--target "before=$before_ADDR")
    fi
    TARGETS+=(--target "empty=$empty_ADDR")
    log "$layout: roll-up: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if not k.startswith("samples")})' "$out-watch.json")"

    # 3. The page, against the empty store's, interleaved.
    log "$layout: timing ${PATHS[*]}, N=$N each, against the baseline"
    "$TOOL" pages "${TARGETS[@]}" --baseline empty \
        "${PATH_ARGS[@]}" --n "$N" --key "$KEY" >"$out-pages.json"
    rss_after=$(rss "$big_PID")
    rss_empty=$(rss "$empty_PID")

    # 4. Where the time goes: the page's SQL part by part, and the raw receipts' summary.
    for w in 15m 1h 24h; do
        "$TOOL" parts --db "$db" --window "$w" --n "$N" >"$out-parts-$w.json"
    done
    : >"$out-summary.txt"
    for _ in 1 2 3; do
        t0=$(now_ms)
        "$BIN/narrowgate" receipts --summary --since 24h --db "$db" >"$out-summary.out"
        echo $(( $(now_ms) - t0 )) >>"$out-summary.txt"
    done
    if [ "$PROFILE" = 1 ] && command -v perf >/dev/null; then
        log "$layout: perf record of the gateway over 10 pages of the 24h window"
        # DWARF call graphs (the release build has no frame pointers): inclusive time per function.
        perf record -F 499 --call-graph dwarf,16384 -p "$big_PID" -o "$out-perf.data" 2>"$out-perf.err" &
        PERF_PID=$!
        sleep 1
        "$TOOL" pages --target "big=$big_ADDR" --path "/status?window=24h" --n 10 --key "$KEY" >"$out-perf-pages.json"
        kill -INT "$PERF_PID" 2>/dev/null || true; wait "$PERF_PID" 2>/dev/null || true
        mkdir -p "$ROOT/target/tmp"
        perf report -i "$out-perf.data" --stdio --children --percent-limit 2 2>/dev/null \
            | grep -E '^ +[0-9.]+%' | grep -E 'narrowgate::|sqlite3_step|malloc|free' \
            >"$ROOT/target/tmp/bench-status-$layout-perf.txt" || true
        log "$layout: profile (inclusive %, self %): target/tmp/bench-status-$layout-perf.txt"
    fi
    rows_now=$(sqlite3 -readonly "$db" 'SELECT count(*) FROM receipts' 2>/dev/null || echo null)
    stop "$FEED_PID"
    stop "$big_PID"
    [ -z "${BEFORE_BIN:-}" ] || stop "$before_PID"
    cat >"$out-meta.json" <<JSON
{"layout": "$layout", "rows_generated": $ROWS, "rows_at_end": $rows_now, "ready_ms": $ready_ms,
 "feed_rate": $rate, "rss_kib_caught_up": "$rss_caught_up", "rss_kib_after_pages": "$rss_after",
 "rss_kib_empty_gateway": "$rss_empty", "windows": "$WINDOWS"}
JSON
    [ "$KEEP" = 1 ] || rm -f "$db" "$db-wal" "$db-shm"
done

RESULT="$ROOT/bench/results/status-$(date -u +%Y%m%dT%H%M%SZ).json"
python3 - "$WORK" "$RESULT" "$N" $LAYOUTS <<'PY'
import json, os, statistics, sys
work, result, n, layouts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def load(path):
    return json.load(open(path)) if os.path.exists(path) else None
report = {"n": int(n), "layouts": {}, "git": os.environ.get("GIT_STATE", ""),
          "binary_mtime": os.environ.get("BIN_MTIME", ""), "before_bin": os.environ.get("BEFORE_BIN", "")}
for layout in layouts:
    base = os.path.join(work, layout)
    summary_ms = [int(l) for l in open(base + "-summary.txt") if l.strip()]
    entry = {
        "meta": load(base + "-meta.json"),
        "generate": load(base + "-generate.json"),
        "watch": load(base + "-watch.json"),
        "lagging": load(base + "-lagging.json"),
        "pages": load(base + "-pages.json"),
        "parts": {w: load(f"{base}-parts-{w}.json") for w in ("15m", "1h", "24h")},
        "summary_24h_ms": summary_ms,
    }
    report["layouts"][layout] = entry
    g, w, m = entry["generate"], entry["watch"], entry["meta"]
    print(f"\n## layout {layout}: {g['rows']:,} receipts, {g['bytes'] / 2**30:.2f} GiB "
          f"({g['bytes_per_row']:.0f} B/row), generated in {g['seconds']:.0f} s "
          f"({g['rows_per_second']:,.0f} rows/s); ?window= accepted: {m['windows']}")
    print(f"gateway ready in {m['ready_ms']} ms; roll-up caught up in {w['caught_up_seconds']} s "
          f"(lag at start {w['lag_minutes_at_start']} min); RSS max while catching up "
          f"{w['rss_kib_max_sampled'] / 1024:.0f} MiB; RSS and peak RSS (KiB) after catch-up {m['rss_kib_caught_up']}, "
          f"after the pages {m['rss_kib_after_pages']} (empty-store gateway {m['rss_kib_empty_gateway']})")
    for title, run in (("while the roll-up catches up", entry["lagging"]), ("caught up", entry["pages"])):
        if not run or not run["rounds_run"]:
            continue
        print(f"\npage, {title} ({run['rounds_run']} rounds):")
        # big: this build on the 10M store; before: BEFORE_BIN on it; empty: this build, empty store.
        print("| path | store | median ms | p90 ms | × empty store | bytes |")
        print("|---|---|---:|---:|---:|---:|")
        for r in run["results"]:
            store = {"big": f"{layout}", "before": f"{layout}, before", "empty": "empty"}[r["target"]]
            ratio = "–" if r["ratio_to_baseline"] is None else f"{r['ratio_to_baseline']:.1f}"
            bad = "" if list(r["statuses"]) == ["200"] else f" statuses {r['statuses']}"
            print(f"| `{r['path']}` | {store} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} | {ratio} | "
                  f"{r['bytes']:,}{bad} |")
    print("\nthe page's SQL, medians in ms (rows read):")
    for wname, p in entry["parts"].items():
        parts = ", ".join(f"{k} {v:.2f}" for k, v in p["median_ms"].items() if k != "total")
        rows = ", ".join(f"{k} {v['rows']}" for k, v in p["rows"].items())
        print(f"  {wname}: total {p['median_ms']['total']:.1f} ({parts}) rows: {rows}")
    print(f"narrowgate receipts --summary --since 24h: {statistics.median(summary_ms)} ms median of {summary_ms}")
json.dump(report, open(result, "w"), indent=1)
print(f"\nmeasured: {report['git']}; narrowgate built {report['binary_mtime']}")
print(f"written: {result}")
PY
