#!/usr/bin/env python3
"""Two runs of the report compared: `python3 benches/noise-compare.py A/report.json B/report.json
[MARGIN]`.

Each runner's per-round times of each workload in B against the same in A. The rounds of two runs
were not made side by side, so they are not paired: a cell is flagged slower only when every round
of B is above every round of A by more than the report's margin (B's lowest over A's highest above
1 + margin), faster by the same rule the other way, and level otherwise; with fewer rounds than
the report's minimum, level. The margin and the minimum are the ones the reports were made with
(`benches/harness/src/noise.rs`), unless MARGIN is given. Exit status 1 when anything is flagged: two runs of one build on
a quiet machine must flag nothing against each other.
"""
import json
import sys


def cells(path):
    r = json.load(open(path))
    out = {}
    for w in r["workloads"]:
        for runner, t in w["secs"].items():
            rounds = [x for x in t["rounds"] if x is not None]
            if rounds:
                out[(w["workload"], runner)] = rounds
    return r, out


a_report, a = cells(sys.argv[1])
_, b = cells(sys.argv[2])
margin, least = a_report["margin"], a_report["min_rounds"]
if len(sys.argv) > 3:
    margin = float(sys.argv[3])
flagged = []
for key in sorted(a.keys() & b.keys()):
    x, y = a[key], b[key]
    verdict = "level"
    if min(len(x), len(y)) >= least:
        if min(y) / max(x) > 1 + margin:
            verdict = "slower"
        elif max(y) / min(x) < 1 / (1 + margin):
            verdict = "faster"
    med = lambda v: sorted(v)[len(v) // 2]
    print(f"{key[0]:<17} {key[1]:<19} {med(x):8.3f} -> {med(y):8.3f} s  {verdict}")
    if verdict != "level":
        flagged.append(f"{key[0]} {key[1]} {verdict}")
if not a.keys() & b.keys():
    sys.exit("no cell in both reports")
if flagged:
    sys.exit("flagged between the two runs: " + "; ".join(flagged))
print("level: nothing flagged between the two runs")
