#!/usr/bin/env bash
# Code size of a minimal no_std wasm module (alloc, free, realloc exported over a static global
# allocator), per allocator, after `wasm-opt -Oz` (binaryen: `apt-get install binaryen`).
#   bash benches/wasm-size/run.sh
set -euo pipefail
cd "$(dirname "$0")"
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
command -v wasm-opt >/dev/null || { apt-get update -qq && apt-get install -y -qq binaryen >/dev/null; }
echo "| allocator | wasm (cargo, opt-level z, LTO) | after wasm-opt -Oz |"
echo "|---|---:|---:|"
for f in region talc dlmalloc; do
  cargo build -q --release --target wasm32-unknown-unknown --no-default-features --features "$f" \
    --target-dir target
  w=target/wasm32-unknown-unknown/release/poolalloc_wasm_size.wasm
  wasm-opt -Oz --strip-debug --strip-producers -o "target/$f.wasm" "$w"
  echo "| $f | $(stat -c %s "$w") B | $(stat -c %s "target/$f.wasm") B |"
done
