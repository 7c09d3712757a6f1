#!/usr/bin/env bash
# Runs every fuzz target for a fixed time (seconds, default 60). A crash input is copied into
# fuzz/regressions/<target>/, where `cargo test` replays it on every run, and the script fails.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
status=0
# Every [[bin]] of fuzz/Cargo.toml: global_alloc, pool, threaded, collections, region (each keeps at least
# one input in regressions/<target>/: a replay that finds none fails).
for target in $(cargo fuzz list); do
  mkdir -p "corpus/$target" "artifacts/$target"
  echo "fuzzing $target for ${secs}s"
  if ! cargo +nightly fuzz run "$target" "corpus/$target" -- \
      -max_total_time="$secs" -rss_limit_mb=4096 -malloc_limit_mb=2048 -print_final_stats=1; then
    mkdir -p "regressions/$target"
    cp "artifacts/$target"/* "regressions/$target/" 2>/dev/null || true
    echo "fuzz target $target crashed; inputs saved in fuzz/regressions/$target/"
    status=1
  fi
done
exit $status
