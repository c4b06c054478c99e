#!/usr/bin/env bash
# A campaign: every target (or those named) for SECONDS each, one after another, on one core, with
# cargo-fuzz on stable Rust. Prints executions, corpus size and coverage per target; logs in
# fuzz/logs/, crashes in fuzz/artifacts/TARGET/, grown corpora in fuzz/corpus/TARGET/.
#   fuzz/campaign.sh [SECONDS] [TARGET...]        (default: 300 seconds, every target)
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
seconds=${1:-300}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi
flags=(-O -a -s none)
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    flags+=(--target-dir "$CARGO_TARGET_DIR/libfuzzer")
fi
cargo fuzz build "${flags[@]}"
mkdir -p fuzz/logs
printf '%-12s %12s %10s %8s %8s  %s\n' target executions exec/s corpus cov result
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    log="fuzz/logs/$t.log"
    if cargo fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "crates/fastpath-fuzz/seeds/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (see $log)"
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    printf '%-12s %12s %10s %8s %8s  %s\n' "$t" "$execs" "$rate" "$corpus" "$cov" "$result"
done
