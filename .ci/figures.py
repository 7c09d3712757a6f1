#!/usr/bin/env python3
"""Holds the figures the docs quote to docs/figures.toml, their one place: each page listed there
must quote each figure as written there. Forms: {comma} (3,519), {plain} (3519), {kb} (3.5, one
decimal of thousands). Exit 1, naming each quote not found."""
import pathlib
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
figures = tomllib.loads((root / "docs/figures.toml").read_text())
bad = 0
for key, f in figures.items():
    v = f["value"]
    forms = {"comma": f"{v:,}", "plain": str(v), "kb": f"{v / 1000:.1f}"}
    if not f["quotes"]:
        print(f"{key}: no page quotes it (a figure no page quotes does not belong here)")
        bad += 1
    for page, text in f["quotes"]:
        want = text.format(**forms)
        body = (root / page).read_text()
        if want not in body:
            print(f"{page}: does not quote {key} = {v} as `{want}` (docs/figures.toml)")
            bad += 1
print(f"figures: {sum(len(f['quotes']) for f in figures.values())} quotes of {len(figures)} figures checked, {bad} wrong")
sys.exit(1 if bad else 0)
