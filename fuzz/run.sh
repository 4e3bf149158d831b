#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 10); fails if any target crashes.
#
#   fuzz/run.sh [SECONDS]
#
# FUZZ_DEV=1 builds the targets unoptimised (cargo fuzz --dev): the build is minutes shorter and
# each run executes fewer inputs, which suits tests/run.sh's short regression runs; long runs by
# hand leave it unset.
#
# How this runs on a stable toolchain (only stable Rust is installed here, and no nightly can be
# fetched): cargo fuzz's default AddressSanitizer needs nightly's `-Zsanitizer`, so every
# command here passes `--sanitizer none` (`-s none`). Everything else cargo fuzz asks of rustc
# is stable: the libFuzzer coverage instrumentation (`-Cpasses=sancov-module` and
# `-Cllvm-args=-sanitizer-coverage-*`), `--cfg fuzzing`, debug assertions and overflow checks;
# libfuzzer-sys builds libFuzzer itself with the system C++ compiler. No RUSTC_BOOTSTRAP is
# needed (checked with cargo-fuzz 0.13.2 on rustc 1.95.0). Without ASan, what is caught is what
# safe Rust reports: panics (failed assertions, slices out of range, arithmetic overflow),
# aborts, out-of-memory (-rss_limit_mb) and hangs (-timeout). A stack overflow kills the
# fuzzer with SIGSEGV (exit 139) before libFuzzer can save the input: the run still fails, and
# the last NEW lines of its log show what it was working on.
#
# A crash leaves its input in fuzz/artifacts/TARGET/; replay it with
#   cd fuzz && cargo fuzz run -s none TARGET artifacts/TARGET/crash-...
# New inputs that reach new code are kept in fuzz/corpus/TARGET/ (only the seed-* files there
# are committed).
set -euo pipefail

duration="${1:-10}"
case "$duration" in
'' | *[!0-9]*)
    echo "usage: fuzz/run.sh [SECONDS]  (seconds per target, default 10)" >&2
    exit 2
    ;;
esac
profile=()
[[ "${FUZZ_DEV:-}" == 1 ]] && profile=(--dev)
cd "$(dirname "$0")"
started=$(date +%s)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: cargo-fuzz is not installed; installing it with \`cargo install cargo-fuzz --version 0.13.2 --locked\` (a few minutes, once)"
    if ! cargo install cargo-fuzz --version 0.13.2 --locked; then
        echo "fuzz/run.sh: could not install cargo-fuzz; install it by hand (cargo install cargo-fuzz --version 0.13.2 --locked) and run again" >&2
        exit 1
    fi
fi

# The fuzz crate's own target dir (fuzz/target), whatever the caller's CARGO_TARGET_DIR is:
# the instrumented build shares nothing with the gateway's.
unset CARGO_TARGET_DIR
targets=$(cargo fuzz list)

echo "fuzz/run.sh: building $(echo "$targets" | wc -w) targets (cargo fuzz build -s none ${profile[*]})"
cargo fuzz build -s none "${profile[@]}"
built=$(date +%s)
echo "fuzz/run.sh: built in $((built - started)) s"

logs=$(mktemp -d)
failed=()
for target in $targets; do
    mkdir -p "corpus/$target"
    echo "fuzz/run.sh: $target for ${duration} s"
    # -timeout: one input taking longer is a hang (a crash); -rss_limit_mb: memory is one too.
    if cargo fuzz run -s none "${profile[@]}" "$target" -- -max_total_time="$duration" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 >"$logs/$target.log" 2>&1; then
        # libFuzzer's last status line (executions, coverage, corpus) and its rate.
        grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$logs/$target.log" | tail -n 1 || true
        grep -E 'stat::(number_of_executed_units|average_exec_per_sec)' "$logs/$target.log" || true
    else
        failed+=("$target")
        echo "fuzz/run.sh: $target FAILED; the end of its log:"
        tail -n 40 "$logs/$target.log"
    fi
done
rm -rf "$logs"

echo "fuzz/run.sh: done in $(($(date +%s) - started)) s (build $((built - started)) s, runs ${duration} s per target)"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz/run.sh: crashed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
