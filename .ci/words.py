#!/usr/bin/env python3
"""Words the glossary (src/lib.rs, "Words") retired: each must appear nowhere in the code, the tests
or the docs, since a reader would look for the thing it named. Each entry says what replaced it.
The history (CHANGELOG.md, benches/results/) may still use them. Exit 1, naming each use found."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
RETIRED = {
    # memory/source.rs: purged chunks kept mapped are the free chunks of the regions' units.
    r"\bspares\b": "the free chunks of the regions' 2 MiB units (memory/source.rs)",
}
files = [
    p
    for d in ("src", "tests", "docs", "capi", "test-support", "examples")
    for p in (root / d).rglob("*")
    if p.suffix in (".rs", ".md") and p.is_file()
] + [root / "README.md", root / "DESIGN.md"]
bad = 0
for p in files:
    for n, line in enumerate(p.read_text().splitlines(), 1):
        for word, instead in RETIRED.items():
            if re.search(word, line, re.IGNORECASE):
                print(f"{p.relative_to(root)}:{n}: retired word `{word}`: say {instead}")
                bad += 1
if len(files) < 50:
    print(f"words: only {len(files)} files found: the tree is not where this script expects it")
    bad += 1
print(f"words: {len(files)} files checked for {len(RETIRED)} retired words, {bad} uses")
sys.exit(1 if bad else 0)
