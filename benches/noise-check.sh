#!/usr/bin/env bash
# The check of the report's flags (issue 49): one quick report of a few short workloads whose
# baseline column is this very build (`--baseline=self`), with a 30% slowdown planted in poolalloc's
# children of one of them (`--plant`). It passes when the planted workload is flagged slower than
# the baseline and every other workload is level: a build against itself flags nothing, and a 30%
# slowdown is seen in quick mode's three rounds. 30%, three times the margin: with 20% (twice it) a
# CI run read the planted workload at 1.11 (1.09-1.23), one round inside the margin, and passed
# only on the retry. Writes target/poolalloc-report/noise-check/.
# About a minute on 2 cores once the report is built (5 workloads x 8 runners x 3 rounds).
# A failed attempt runs once more, and the check fails only when both do: one busy spell of a shared
# CI machine can push a level cell past the margin in all three rounds (the planted workload's
# lowest round read 1.14 against the margin of 1.10 at load 0.46), and a rule that is wrong fails
# both attempts alike.
set -euo pipefail
cd "$(dirname "$0")/.."
plant=${NOISE_CHECK_PLANT:-glibc-simple}
json="${CARGO_TARGET_DIR:-target}/poolalloc-report/noise-check/report.json"
# One attempt. Its steps stop it by their status (`|| return`): errexit does not hold inside a
# function called as the condition of `if`, and a failed report must not leave the last one's
# JSON to be read.
check() {
  rm -f "$json"
  cargo bench --bench report -- --quick --baseline=self "--plant=$plant:30" \
    larson glibc-simple sh6bench mstress cache-scratch || return
  python3 - "$json" "$plant" <<'PY' || return
import json, sys
report, plant = json.load(open(sys.argv[1])), sys.argv[2]
bad = []
for w in report["workloads"]:
    r = w["vs_baseline"]
    want = "slower" if w["workload"] == plant else "level"
    print(f"{w['workload']:<14} vs itself {r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f}) "
          f"{r['verdict']:<6} (want {want})")
    if r["verdict"] != want:
        bad.append(w["workload"])
if not any(w["workload"] == plant for w in report["workloads"]):
    bad.append(f"{plant} (not run)")
if bad:
    sys.exit(f"noise check failed on: {', '.join(bad)}")
print("noise check: the planted 30% slowdown is flagged, nothing else is")
PY
}
if ! check; then
  echo "noise check: the first attempt failed (above); once more"
  check
fi
