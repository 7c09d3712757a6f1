#!/usr/bin/env bash
# The report's thread-scaling table on a machine without cargo: runs target/device/report (made by
# benches/device/build.sh) as `report --threads=1,2,4,8,16 --rounds=N <workload>`, one invocation per
# workload, every allocator (poolalloc, system, jemalloc, mimalloc, rusty_alloc, snmalloc) at
# every count, scale 4 (the report's full mode).
#
# Usage: OUT=/some/dir bash benches/device/run.sh
# On the 16-core device machine (DEVELOPERS' guide: `device`): after `bash benches/device/build.sh`
# here, the device tool's `run` with carry ["target/device"], command `bash benches/device/run.sh`
# and timeout_s 450 (the default plan ended in 273 s there on 2026-12-04, before local-churn
# joined it, which should add about a minute at scale 4: not yet timed there). Add
# DEVBENCH_REPORT=<another stripped report binary under target/device> to time another build with
# the same peers (results: benches/results/remote-messages-2026-12-04.md).
# Writes to $OUT (default target/device/out): scaling.md (the report's tables, one per workload),
# summary.md (poolalloc and vs best peer per workload and count), log.txt (machine, progress,
# everything), build-info.txt (what was built).
#
# Knobs (environment):
#   DEVBENCH_QUICK=1        smoke test: counts 1,2, 1 round, --quick (scale 1)
#   DEVBENCH_COUNTS         thread counts (default 1,2,4,8,16)
#   DEVBENCH_PLAN           workload:rounds, in run order
#                           (default "local-churn:3 larson:5 xmalloc-test:5 rayon-drop:5 http-service:4
#                           threads:5")
#   DEVBENCH_BUDGET         seconds from start after which no report runs any more (default 390):
#                           a workload still running then is stopped and its table is made from
#                           the rounds done (its progress lines), the ones not started are skipped
#   DEVBENCH_CELL_LIMIT     seconds one child (one workload/allocator/count run) may take before
#                           it is killed as hung (default 30; the longest normal one is ~2 s)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
# What build.sh lays out (ignored, under target/): carry it to the device machine.
D="$ROOT/target/device"
[ -d "$D" ] || { echo "no $D: run benches/device/build.sh first" >&2; exit 1; }
cd "$ROOT"
START=$(date +%s)
OUT=${OUT:-$D/out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"

QUICK=${DEVBENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    COUNTS=${DEVBENCH_COUNTS:-1,2}
    PLAN=${DEVBENCH_PLAN:-"local-churn:1 larson:1 xmalloc-test:1 rayon-drop:1 http-service:1 threads:1"}
    QFLAG=--quick
else
    COUNTS=${DEVBENCH_COUNTS:-1,2,4,8,16}
    PLAN=${DEVBENCH_PLAN:-"local-churn:3 larson:5 xmalloc-test:5 rayon-drop:5 http-service:4 threads:5"}
    QFLAG=
fi
BUDGET=${DEVBENCH_BUDGET:-390}
CELL_LIMIT=${DEVBENCH_CELL_LIMIT:-30}
DEADLINE=$((START + BUDGET))
REPORT="${DEVBENCH_REPORT:-$D/report}"

# Medians of a workload's progress lines ("[i/n  Ns] round R <w> <t> threads <alloc> <x> <unit>")
# in the report's table layout: the table of a run that was stopped before it printed its own.
table_from_log() { # workload logfile
    awk -v W="$1" -v COUNTS="$COUNTS" '
    function med(s,   a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        if (n == 0) return -1
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        for (i = 1; i <= NF; i++) if ($i == "round") break
        if (i > NF || $(i + 2) != W || $(i + 4) != "threads") next
        t = $(i + 3); al = $(i + 5); v[t, al] = v[t, al] " " $(i + 6); n[t, al]++
        unit = $(i + 7) ($(i + 8) != "" ? " " $(i + 8) : "")
        if (rounds < $(i + 1)) rounds = $(i + 1)
    }
    END {
        split("poolalloc system jemalloc mimalloc rusty_alloc snmalloc", A, " ")
        nc = split(COUNTS, C, ",")
        printf "\n**%s** (%s) -- PARTIAL: made by devbench from the progress lines of a stopped run (rounds started: %d); n = runs per cell\n\n", W, unit, rounds
        printf "| threads | poolalloc | system | jemalloc | mimalloc | rusty_alloc | snmalloc | vs best peer | n |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
        for (c = 1; c <= nc; c++) {
            t = C[c]; line = "| " t; best = 0; ns = ""
            for (k = 1; k <= 6; k++) {
                m = med(v[t, A[k]]); x[k] = m
                line = line " | " (m < 0 ? "-" : sprintf("%.3f", m)); ns = ns (k > 1 ? "/" : "") (n[t, A[k]] + 0)
                if (k >= 3 && m > best) best = m
            }
            r = (x[1] > 0 && best > 0) ? sprintf("**%.2f**", x[1] / best) : "-"
            print line " | " r " | " ns " |"
        }
    }' "$2"
}

# poolalloc's throughput and its ratio to the best peer, a row per workload, a column per count.
summary() { # scaling.md
    awk -v COUNTS="$COUNTS" '
    /^\*\*[^*]+\*\* \(/ { w = $1; gsub(/\*/, "", w); u = $0; sub(/^[^(]*\(/, "", u); sub(/\).*/, "", u); order[++nw] = w; unit[w] = u; next }
    /^\| [0-9]+ \|/ && w != "" {
        split($0, f, "|"); t = f[2] + 0; p = f[3]; r = f[9]
        gsub(/ /, "", p); gsub(/^ +| +$/, "", r); gsub(/\*/, "", r)
        P[w, t] = p; R[w, t] = r
    }
    END {
        nc = split(COUNTS, C, ",")
        h = "| workload (unit) |"; s = "|---|"
        for (c = 1; c <= nc; c++) { h = h " " C[c] " |"; s = s "---:|" }
        print h; print s
        for (i = 1; i <= nw; i++) {
            w = order[i]; a = "| " w " (" unit[w] "): poolalloc |"; b = "| " w ": vs best peer |"
            for (c = 1; c <= nc; c++) { a = a " " P[w, C[c]] " |"; b = b " " R[w, C[c]] " |" }
            print a; print b
        }
    }' "$1"
}

# Kills a child of the report (the same executable, run with no arguments) older than CELL_LIMIT:
# a hung workload would otherwise hold the machine until the budget runs out. Its parent then
# fails that workload (the log says which cell) and the next workload runs.
watchdog() {
    local hz up p start age
    hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
    while sleep 2; do
        up=$(cut -d' ' -f1 /proc/uptime); up=${up%.*}
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/exe" 2>/dev/null)" = "$REPORT" ] || continue
            [ "$(tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -c .)" = 1 ] || continue
            start=$(sed 's/.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f20) || continue
            [ -n "$start" ] || continue
            age=$((up - start / hz))
            if [ "$age" -gt "$CELL_LIMIT" ]; then
                echo "devbench watchdog: killing child ${p#/proc/} after ${age}s ($(tr '\0' '\n' <"$p/environ" | grep -E '^POOLALLOC_BENCH_(WORKLOAD|ALLOC|THREADS)=' | tr '\n' ' '))"
                kill -9 "${p#/proc/}" 2>/dev/null
            fi
        done
    done
}

main() {
    echo "== benches/device/run.sh $(date -u +%FT%TZ) on $(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"
    echo "counts=$COUNTS plan=\"$PLAN\" quick=$QUICK budget=${BUDGET}s cell_limit=${CELL_LIMIT}s"
    echo "== nproc"; nproc
    echo "== lscpu | head -20"; lscpu 2>&1 | head -20
    echo "== uptime"; uptime 2>&1 || cat /proc/loadavg
    echo "== uname -a"; uname -a
    echo "== glibc"; ldd --version 2>&1 | head -1
    echo "== memory"; grep -E '^(MemTotal|MemAvailable)' /proc/meminfo
    echo "== THP"; for f in enabled defrag; do echo "$f: $(cat /sys/kernel/mm/transparent_hugepage/$f 2>&1)"; done
    echo "== build-info.txt"; cat "$D/build-info.txt" 2>&1
    [ -x "$REPORT" ] || chmod +x "$REPORT"
    echo "== ldd target/device/report (with LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    ldd "$REPORT" 2>&1
    if ldd "$REPORT" 2>&1 | grep -q 'not found'; then
        echo "devbench: a shared library is missing (above); stopping"
        return 1
    fi
    cp "$D/build-info.txt" "$OUT/build-info.txt" 2>/dev/null

    : >"$OUT/scaling.md"
    watchdog &
    local wd=$! spec w rounds left rc t0
    for spec in $PLAN; do
        w=${spec%%:*}; rounds=${spec##*:}
        left=$((DEADLINE - $(date +%s)))
        if [ "$left" -lt 20 ]; then
            echo "== $w: SKIPPED (${left}s of the budget left)"
            printf '\n**%s**: not run (budget spent)\n' "$w" >>"$OUT/scaling.md"
            continue
        fi
        echo "== $w: $REPORT --threads=$COUNTS --rounds=$rounds $QFLAG $w   (at $(( $(date +%s) - START ))s, stopped after ${left}s)"
        t0=$(date +%s)
        # Progress (stderr) goes to the log and the screen; the table (stdout) to its own file.
        timeout -k 5 "$left" "$REPORT" --threads="$COUNTS" --rounds="$rounds" $QFLAG "$w" \
            >"$WORK/$w.md" 2> >(tee "$WORK/$w.log" >&2)
        rc=$?
        sleep 0.2  # let tee finish
        echo "== $w: exit $rc after $(( $(date +%s) - t0 ))s"
        if [ "$rc" = 0 ] && grep -q '^| ' "$WORK/$w.md"; then
            cat "$WORK/$w.md" >>"$OUT/scaling.md"
        else
            echo "== $w: no table from the report (exit $rc): the medians of the runs done instead"
            table_from_log "$w" "$WORK/$w.log" >>"$OUT/scaling.md"
            echo >>"$OUT/scaling.md"
        fi
    done
    kill "$wd" 2>/dev/null; wait "$wd" 2>/dev/null
    summary "$OUT/scaling.md" >"$OUT/summary.md"
    echo
    echo "== scaling.md"; cat "$OUT/scaling.md"
    echo
    echo "== summary.md"; cat "$OUT/summary.md"
    echo "== uptime"; uptime 2>&1 || cat /proc/loadavg
    echo "== done in $(( $(date +%s) - START ))s"
}

# The report, not its build, runs here: no cargo (CARGO names nothing, so a report that tried to
# run it would fail loudly), its target dir a scratch one holding the JSON input it would otherwise
# ask `cargo metadata` for, the registry sources the rayon workloads read from target/device, and the
# C++ runtime snmalloc links from target/device/lib.
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_HOME="$D/cargo-home"
export CARGO=/nonexistent/devbench-no-cargo
for v in $(env | sed -n 's/^\(POOLALLOC_BENCH_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/devbench.XXXXXX")
export CARGO_TARGET_DIR="$WORK/target"
mkdir -p "$CARGO_TARGET_DIR/poolalloc-report"
cp "$D/metadata.json" "$CARGO_TARGET_DIR/poolalloc-report/metadata.json"

main 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
rm -rf "$WORK"
exit "$rc"
