#!/usr/bin/env python3
"""A/B timing of poolalloc builds on the report's workloads, side by side.

usage: python3 benches/ab.py NAME=TARGET_DIR[@VAR=VALUE...][,NAME=...] ROUNDS SCALE [workload[:scale],...]

Each TARGET_DIR holds a report binary built with
`cargo build --profile bench --bench report [--features hardened] --target-dir TARGET_DIR`
(from this tree or a patched copy). Every workload's poolalloc child is run once per build per
round, the order rotated; the table gives medians and each build's time over the first one's,
with the geometric mean; a second the same for CPU time (user + system of the whole child, steadier
on a loaded machine), a third each build's median minor page faults and peak RSS; a fourth the share of poolalloc's
chunk memory in huge pages near the child's peak RSS (`Stats::huge_page_share`; report binaries
that print it, every poolalloc child since benches/report/huge_pages.rs).
See benches/results/experiments.md.
"""
import subprocess, sys, os, statistics, math, glob, resource
bins = {}
envs = {}
for v in sys.argv[1].split(','):
    # NAME=PATH or NAME=PATH@VAR=VALUE[@VAR=VALUE...] (environment variables for that build's runs
    # only, e.g. a profiler turned on); PATH is a target dir or the report binary itself. The
    # pseudo-variable CPUS=LIST runs that build's children under `taskset -c LIST` (CPUS=0: one
    # core, no cache line moves between cores; benches/results/clock-2026-11-28.md, section 2).
    spec, *extra = v.split('@')
    name, d = spec.split('=', 1)
    envs[name] = dict(e.split('=', 1) for e in extra)
    bins[name] = d if os.path.isfile(d) else [b for b in glob.glob(d + '/release/deps/report-*') if not b.endswith('.d')][0]
rounds = int(sys.argv[2]); scale = sys.argv[3]
wls = ["larson","xmalloc-test","cache-scratch","glibc-simple","alloc-test","mstress","sh6bench","rust-collections","frag-fill-free90","frag-long-short","frag-drift","frag-free-all"]
if len(sys.argv) > 4: wls = sys.argv[4].split(',')
# A workload may carry its own scale (`larson:12`, as the report's quick mode runs it).
scales = {w.split(':')[0]: (w.split(':') + [scale])[1] for w in wls}
wls = list(scales)
names = list(bins)
# The JSON document json-roundtrip reads, as the report's parent writes it.
json_doc = os.environ.get("POOLALLOC_BENCH_JSON", "target/poolalloc-report/metadata.json")
mem = {w: {n: [] for n in names} for w in wls}
res = {w: {n: [] for n in names} for w in wls}
cpu = {w: {n: [] for n in names} for w in wls}
huge = {w: {n: [] for n in names} for w in wls}
for r in range(rounds):
    for wi, w in enumerate(wls):
        for k in range(len(names)):
            n = names[(k + r + wi) % len(names)]
            # A build's own variables win (POOLALLOC_BENCH_ALLOC=jemalloc runs a peer in its place).
            env = dict(os.environ, POOLALLOC_BENCH_JSON=json_doc, POOLALLOC_BENCH_WORKLOAD=w, POOLALLOC_BENCH_ALLOC="poolalloc", POOLALLOC_BENCH_THREADS="2", POOLALLOC_BENCH_SCALE=scales[w])
            env.update(envs[n])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus = env.pop("CPUS", None)
            cmd = (["taskset", "-c", cpus] if cpus else []) + [bins[n]]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True).stdout
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[w][n].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            line = [l for l in out.splitlines() if l.startswith("RESULT")][0]
            kv = dict(f.split('=', 1) for f in line.split()[1:] if '=' in f)
            res[w][n].append(float(kv["secs"]))
            mem[w][n].append((int(kv.get("faults", 0)), int(kv["peak_rss"])))
            # poolalloc children: the share of chunk memory in huge pages near the peak RSS.
            if "huge_share" in kv: huge[w][n].append(float(kv["huge_share"]))
    print("round", r + 1, "done", file=sys.stderr)
base = names[0]

def ratio_table(samples, unit):
    """Medians per build, each over the first build's, and the geometric mean of those ratios."""
    print("| workload | " + " | ".join(f"{n} {unit}" for n in names) + " | " + " | ".join(f"{n}/{base} {unit}" for n in names[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(names) - 1))
    logs = {n: [] for n in names[1:]}
    for w in wls:
        m = {n: statistics.median(samples[w][n]) for n in names}
        for n in names[1:]: logs[n].append(math.log(m[n] / m[base]))
        print(f"| {w} | " + " | ".join(f"{m[n]:.3f}" for n in names) + " | " + " | ".join(f"{m[n]/m[base]:.2f}" for n in names[1:]) + " |")
    print("| geomean | " + " | ".join("" for n in names) + " | " + " | ".join(f"{math.exp(sum(logs[n])/len(logs[n])):.3f}" for n in names[1:]) + " |")
    print()

ratio_table(res, "s")
# CPU time (user + system, whole process) is steadier than wall time on a loaded machine; it
# counts every thread's work, start-up included.
ratio_table(cpu, "cpu s")
print("| workload | " + " | ".join(f"{n} faults / peak RSS MiB" for n in names) + " |")
print("|---|" + "---:|" * len(names))
for w in wls:
    cells = [f"{statistics.median(f for f, _ in mem[w][n]):.0f} / {statistics.median(r for _, r in mem[w][n]) / 2**20:.1f}" for n in names]
    print(f"| {w} | " + " | ".join(cells) + " |")
if any(huge[w][n] for w in wls for n in names):
    print()
    print("| workload | " + " | ".join(f"{n} huge share" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for w in wls:
        cells = [f"{statistics.median(huge[w][n]):.2f}" if huge[w][n] else "" for n in names]
        print(f"| {w} | " + " | ".join(cells) + " |")
