#!/usr/bin/env python3
"""Summarises a bench/run.sh run: medians per scenario and target, ratios against direct and
against nginx relaying the same calls (the floor: what relaying the bytes costs).

    report.py RAW.jsonl OUT.json      # writes OUT.json, prints the markdown tables

Ratios and added latencies are paired: each round's gateway run is compared with the same
round's direct run (they ran seconds apart), and the median of those per-round figures is
reported, so slow drift of a shared machine cancels out.
"""
import json
import statistics
import sys
from collections import defaultdict

TARGETS = {
    "throughput_16": 0.7,  # gateway/direct at 16 clients, at least
    "added_p50_ms_1": 0.3,  # added p50 with one client, below
    "idle_rss_mib": 40.0,  # below
    "cpu_ms_per_call": 0.3,  # gateway CPU per call, below
    "cpu_vs_nginx_16": 2.0,  # gateway CPU per call / nginx's at 16 clients, at most
    "cpu_vs_nginx_1": 1.5,  # the same with one client, at most
    "p50_vs_nginx_ms_1": 0.1,  # p50 with one client above nginx's, at most
}


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=3):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def main() -> None:
    raw_path, out_path = sys.argv[1], sys.argv[2]
    raw = [json.loads(line) for line in open(raw_path) if line.strip()]
    meta = next((r for r in raw if r["kind"] == "meta"), {})
    runs = [r for r in raw if r["kind"] == "run" and not r["label"].endswith("|check")]

    # (scenario, target) -> {round: run}
    by = defaultdict(dict)
    scenarios, targets = [], []
    for r in runs:
        scenario, target, rnd = r["label"].split("|")
        by[(scenario, target)][rnd] = r
        if scenario not in scenarios:
            scenarios.append(scenario)
        if target not in targets:
            targets.append(target)
    order = {"direct": 0, "nginx": 1, "narrowgate": 2}
    targets.sort(key=lambda t: order.get(t, 3))

    def lat(r, key):
        return (r.get("latency_ms") or {}).get(key)

    def cpu(r, who):
        return ((r.get("cpu") or {}).get(who) or {}).get("cpu_ms_per_call")

    summary = {}
    rows = []
    for s in scenarios:
        direct = by.get((s, "direct"), {})
        nginx = by.get((s, "nginx"), {})
        for t in targets:
            cur = by.get((s, t), {})
            if not cur:
                continue
            rs = list(cur.values())
            row = {
                "scenario": s,
                "target": t,
                "rounds": len(rs),
                "throughput_rps": med(r["throughput_rps"] for r in rs),
                "p50_ms": med(lat(r, "p50") for r in rs),
                "p90_ms": med(lat(r, "p90") for r in rs),
                "p99_ms": med(lat(r, "p99") for r in rs),
                "errors": sum(r["errors"] for r in rs),
                "requests": sum(r["requests"] for r in rs),
                "gateway_cpu_ms_per_call": med(cpu(r, "gateway") for r in rs),
                "upstream_cpu_ms_per_call": med(cpu(r, "upstream") for r in rs),
                "loadgen_cpu_ms_per_call": med(cpu(r, "loadgen") for r in rs),
            }
            if t != "direct":
                pairs = [(cur[k], direct[k]) for k in cur if k in direct]
                row["ratio_throughput"] = med(
                    g["throughput_rps"] / d["throughput_rps"] for g, d in pairs if d["throughput_rps"]
                )
                row["added_p50_ms"] = med(
                    lat(g, "p50") - lat(d, "p50") for g, d in pairs if lat(g, "p50") is not None and lat(d, "p50") is not None
                )
                row["added_p99_ms"] = med(
                    lat(g, "p99") - lat(d, "p99") for g, d in pairs if lat(g, "p99") is not None and lat(d, "p99") is not None
                )
            if t not in ("direct", "nginx") and nginx:
                pairs = [(cur[k], nginx[k]) for k in cur if k in nginx]
                row["cpu_vs_nginx"] = med(
                    cpu(g, "gateway") / cpu(n, "gateway") for g, n in pairs
                    if cpu(g, "gateway") is not None and cpu(n, "gateway")
                )
                row["p50_vs_nginx_ms"] = med(
                    lat(g, "p50") - lat(n, "p50") for g, n in pairs
                    if lat(g, "p50") is not None and lat(n, "p50") is not None
                )
            rows.append(row)
            summary[f"{s}|{t}"] = row

    idle = next((r for r in raw if r["kind"] == "idle" and "target" not in r), {})
    idle_extra = [r for r in raw if r["kind"] == "idle" and "target" in r]
    after = next((r for r in raw if r["kind"] == "after_load"), {})
    sessions = [r for r in raw if r["kind"] == "sessions"]
    startups = [r for r in raw if r["kind"] == "startup"]
    validation = next((r for r in raw if r["kind"] == "validation"), None)

    startup = {}
    for label in sorted({r["label"] for r in startups}):
        rs = [r for r in startups if r["label"] == label]
        startup[label] = {
            "runs": len(rs),
            "ready_ms": med(r["ready_ms"] for r in rs),
            "enabled_ms": med(r["enabled_ms"] for r in rs),
            "rss_kib_ready": med(r["rss_kib_ready"] for r in rs),
            "tools_enabled": med(r["tools_enabled"] for r in rs),
            "errors": [r["error"] for r in rs if r.get("error")],
        }

    # Targets of issue 7, for each narrowgate target (the default build, and variants such as
    # `narrowgate-w1`: the same binary with --workers 1).
    ng_targets = sorted({r["target"] for r in rows if r["target"].startswith("narrowgate")},
                        key=lambda t: (t != "narrowgate", t))
    checks = []

    def check(name, value, limit, ok):
        checks.append({"target": name, "value": value, "limit": limit,
                       "holds": None if value is None else ok(value, limit)})

    for t in ng_targets:
        def ng(s):
            return summary.get(f"{s}|{t}", {})
        for mode in ("legacy", "stateless"):
            check(f"{t}: throughput at 16 clients, {mode}: gateway/direct ≥ 0.7",
                  ng(f"{mode}-c16").get("ratio_throughput"), TARGETS["throughput_16"], lambda v, l: v >= l)
        for mode in ("legacy", "stateless"):
            check(f"{t}: added p50 with 1 client, {mode}: < 0.3 ms",
                  ng(f"{mode}-c1").get("added_p50_ms"), TARGETS["added_p50_ms_1"], lambda v, l: v < l)
        loaded = sorted({int(r["scenario"].rsplit("-c", 1)[1]) for r in rows
                         if not r["scenario"].endswith("-c1")})
        loaded_label = " and ".join(str(c) for c in loaded) + " clients"
        for label, under_load in ((loaded_label, True), ("1 client", False)):
            cpu_values = [r["gateway_cpu_ms_per_call"] for r in rows
                          if r["target"] == t and r["gateway_cpu_ms_per_call"] is not None
                          and r["scenario"].endswith("-c1") != under_load]
            check(f"{t}: gateway CPU per call < 0.3 ms, {label} (worst scenario median)",
                  max(cpu_values) if cpu_values else None, TARGETS["cpu_ms_per_call"], lambda v, l: v < l)
        for mode in ("legacy", "stateless"):
            for clients, limit in (("16", "cpu_vs_nginx_16"), ("1", "cpu_vs_nginx_1")):
                check(f"{t}: gateway CPU per call / nginx's, {clients} client(s), {mode}: ≤ {TARGETS[limit]}",
                      ng(f"{mode}-c{clients}").get("cpu_vs_nginx"), TARGETS[limit], lambda v, l: v <= l)
            check(f"{t}: p50 above nginx's with 1 client, {mode}: ≤ 0.1 ms",
                  ng(f"{mode}-c1").get("p50_vs_nginx_ms"), TARGETS["p50_vs_nginx_ms_1"], lambda v, l: v <= l)
    rss = idle.get("gateway_rss_kib")
    check("narrowgate: idle RSS < 40 MiB", None if rss is None else rss / 1024, TARGETS["idle_rss_mib"],
          lambda v, l: v < l)

    result = {
        "meta": meta,
        "scenarios": rows,
        "idle": idle,
        "idle_extra": idle_extra,
        "after_load": after,
        "sessions": sessions,
        "startup": startup,
        "validation": validation,
        "targets": checks,
        "raw": raw,
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)

    # ---- markdown
    p = print
    p(f"Machine: {meta.get('nproc')} cores, {meta.get('cpu')}, {meta.get('mem_gib')} GiB; "
      f"load average at start {' '.join(meta.get('loadavg_start', []))}; git {meta.get('git_rev')}"
      f"{' (src modified)' if meta.get('src_modified') else ''}.")
    p(f"{meta.get('rounds')} rounds × {meta.get('duration_s')} s per run (+{meta.get('warmup_s')} s warm-up), "
      f"medians over rounds; ratios and added latency paired per round.\n")
    d1 = summary.get("legacy-c1|direct", {})
    if (d1.get("p50_ms") or 0) > 20 or (d1.get("p90_ms") or 0) > 20:
        p("**Warning:** direct legacy calls take over 20 ms with one client: the upstream's SSE "
          "answers stall on Nagle's algorithm and delayed ACKs (its sockets lack TCP_NODELAY), so "
          "legacy figures measure that stall, not the gateway.\n")
    p("| scenario | target | req/s | ×direct | p50 ms | +p50 ms | p50 − nginx's | p90 ms | p99 ms | +p99 ms "
      "| gateway CPU ms/call | ×nginx CPU | upstream CPU ms/call | errors |")
    p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p(f"| {r['scenario']} | {r['target']} | {fmt(r['throughput_rps'], 0)} | {fmt(r.get('ratio_throughput'), 2)} "
          f"| {fmt(r['p50_ms'])} | {fmt(r.get('added_p50_ms'))} | {fmt(r.get('p50_vs_nginx_ms'))} "
          f"| {fmt(r['p90_ms'])} | {fmt(r['p99_ms'])} "
          f"| {fmt(r.get('added_p99_ms'))} | {fmt(r['gateway_cpu_ms_per_call'])} | {fmt(r.get('cpu_vs_nginx'), 2)} "
          f"| {fmt(r['upstream_cpu_ms_per_call'])} | {r['errors']} |")
    p("")
    p("| memory and start-up | value |")
    p("|---|---:|")
    if rss is not None:
        p(f"| narrowgate idle RSS | {rss / 1024:.1f} MiB |")
    for r in idle_extra:
        p(f"| {r['target']} idle RSS | {r['gateway_rss_kib'] / 1024:.1f} MiB |")
    if after.get("gateway_rss_kib"):
        p(f"| narrowgate RSS after the load runs | {after['gateway_rss_kib'] / 1024:.1f} MiB |")
    for s in sessions:
        for proc, v in s["processes"].items():
            if s["label"] == "narrowgate" and proc != "gateway":
                continue
            name = "narrowgate" if proc == "gateway" else "demo upstream (direct)"
            if v.get("rss_kib_with_sessions"):
                p(f"| {name} RSS with {s['opened']} open sessions | {v['rss_kib_with_sessions'] / 1024:.1f} MiB "
                  f"({fmt(v['kib_per_session'], 1)} KiB/session; {fmt((v['rss_kib_after_close'] or 0) / 1024, 1)} MiB after closing) |")
        if s["errors"]:
            p(f"| session errors ({s['label']}) | {s['errors']}: {s['error_samples'][:1]} |")
    for label, v in startup.items():
        what = "bench contracts (4 tools)" if label == "bench" else f"{meta.get('contracts_n')} generated contracts"
        p(f"| start-up to /readyz 200, {what} | {fmt(v['ready_ms'], 0)} ms (all tools enabled: "
          f"{fmt(v['enabled_ms'], 0)} ms; RSS {fmt((v['rss_kib_ready'] or 0) / 1024, 1)} MiB) |")
        for e in v["errors"]:
            p(f"| start-up error ({label}) | {e} |")
    if validation:
        p("")
        p("| validation (library, ns/op) | check_arguments | check_result | per call | reject_arguments | compile contract |")
        p("|---|---:|---:|---:|---:|---:|")
        for tool, v in validation["tools"].items():
            p(f"| {tool} | {v['check_arguments_ns']:.0f} | {v['check_result_ns']:.0f} | {v['per_call_total_ns']:.0f} "
              f"| {v['reject_arguments_ns']:.0f} | {v['compile_contract_ns']:.0f} |")
    p("")
    p("| target | measured | holds |")
    p("|---|---:|---|")
    for c in checks:
        holds = "–" if c["holds"] is None else ("yes" if c["holds"] else "**no**")
        p(f"| {c['target']} | {fmt(c['value'])} | {holds} |")


if __name__ == "__main__":
    main()
