#!/usr/bin/env python3
"""Checks the layering that DESIGN.md's "Modules and layering" table states: src/ is a handful of
folders (layers), and the files of each use only their own folder and the folders listed above it.
Reads every `crate::NAME` path in src/**/*.rs (use lines, `use crate::{a, b::c}` groups and paths in
code), maps each file to its folder (src/FOLDER/...; `os` and `region` are folders too), counts an
item lib.rs re-exports (`crate::PoolAlloc`, `crate::testing`) as its folder's, and fails naming every
edge that points down the list or to a folder the table does not list. Inside every folder (and
every folder module within one, such as `thread/heap/`) it also fails on an import cycle between the
units, a unit being a file or a sub-folder (`super::x`, `crate::path::to::folder::x`). Comments, doc
comments and `#[cfg(test)] mod tests` blocks (at a file's end) are ignored.

    python3 .ci/layers.py            # exit 1 on a violation
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
design = (root / "DESIGN.md").read_text()
section = design.split("## Modules and layering", 1)[1].split("\n## ", 1)[0]
order = []
for line in section.splitlines():
    if line.startswith("| `"):
        first = line.split("|")[1]
        order.extend(re.findall(r"`([a-z_]+)/?`", first))
rank = {m: i for i, m in enumerate(order)}
# Modules on one row share a rank.
for line in section.splitlines():
    if line.startswith("| `"):
        names = re.findall(r"`([a-z_]+)/?`", line.split("|")[1])
        for n in names[1:]:
            rank[n] = rank[names[0]]

# Items lib.rs re-exports, by the module that defines them: `pub use global::PoolAlloc;`.
owner = {}
for m in re.finditer(r"pub use ([a-z_]+)::(?:[a-z_]+::)*(\{[^}]*\}|[A-Za-z_]+);", (root / "src/lib.rs").read_text()):
    for item in re.findall(r"[A-Za-z_]+", m.group(2)):
        owner[item] = m.group(1)

def strip_comments(text):
    text = re.split(r"\n#\[cfg\(test\)\]\n\s*mod tests\b", text, maxsplit=1)[0]
    out = []
    for line in text.splitlines():
        code = line.split("//", 1)[0] if "//" in line and '"' not in line.split("//", 1)[0] else line
        if line.lstrip().startswith("//"):
            code = ""
        out.append(code)
    return "\n".join(out)

def referenced(text):
    names = set()
    text = strip_comments(text)
    for m in re.finditer(r"\bcrate::\{", text):
        # a brace group: take the top-level names inside it
        depth, i, start = 1, m.end(), m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        group, level, item = text[start : i - 1], 0, ""
        for ch in group + ",":
            if ch == "{":
                level += 1
            elif ch == "}":
                level -= 1
            if ch == "," and level == 0:
                head = re.match(r"\s*([a-z_]+)", item)
                if head:
                    names.add(head.group(1))
                item = ""
            else:
                item += ch
    for m in re.finditer(r"\bcrate::([A-Za-z_]+)\b", text):
        names.add(m.group(1))
    return {owner.get(n, n) for n in names if n in owner or n.islower()}

bad = []
src = root / "src"
for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src)
    if rel.parts == ("lib.rs",):
        continue
    folder = rel.parts[0].removesuffix(".rs")
    if len(rel.parts) == 1:
        bad.append(f"{rel}: a file at the top of src/; each module belongs to a layer folder")
        continue
    if folder not in rank:
        bad.append(f"{rel}: folder `{folder}/` is not in DESIGN.md's layering table")
        continue
    for used in sorted(referenced(path.read_text())):
        if used == folder or used in ("self", "super", "sync"):
            continue
        if used not in rank:
            # macros and items of lib.rs (if_pools!, re-exports) are not folders
            if (src / used).is_dir():
                bad.append(f"{rel}: uses `{used}/`, which DESIGN.md's table does not list")
            continue
        if rank[used] > rank[folder]:
            bad.append(f"{rel}: `{folder}/` uses `{used}/`, listed below it in DESIGN.md")

def expand_groups(text):
    """`crate::{a, b::{c, d}}` written out as `crate::a crate::b::c crate::b::d` (appended)."""
    paths = []
    def walk(prefix, body):
        level, item = 0, ""
        for ch in body + ",":
            if ch == "{":
                level += 1
            elif ch == "}":
                level -= 1
            if ch == "," and level == 0:
                item = item.strip()
                m = re.match(r"([a-z_:]*?)::\{(.*)\}$", item, re.S)
                if m:
                    walk(prefix + m.group(1) + "::", m.group(2))
                elif item:
                    paths.append(prefix + item)
                item = ""
            else:
                item += ch
    for m in re.finditer(r"\bcrate::\{", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        walk("crate::", text[m.end() : i - 1])
    return text + "\n" + "\n".join(paths)

# Import cycles between the units (files, sub-folders) of each folder.
def module_path(d):
    return "::".join(d.relative_to(src).parts)

for d in sorted([p for p in src.rglob("*") if p.is_dir()]):
    units = {f.stem: [f] for f in d.glob("*.rs") if f.stem != "mod"}
    units.update({s.name: sorted(s.rglob("*.rs")) for s in d.iterdir() if s.is_dir()})
    prefix = module_path(d)
    graph = {}
    for n, files in units.items():
        used = set()
        for f in files:
            text = expand_groups(strip_comments(f.read_text()))
            used |= set(re.findall(r"\bcrate::%s::([a-z_]+)\b" % prefix, text))
            if f.parent == d:
                used |= set(re.findall(r"\bsuper::([a-z_]+)\b", text))
                for m in re.finditer(r"\bsuper::\{([^}]*)\}", text):
                    used |= set(re.findall(r"\b([a-z_]+)\b", m.group(1)))
        graph[n] = {u for u in used if u in units and u != n}
    state = {}
    def visit(n, path):
        state[n] = 1
        for u in sorted(graph[n]):
            if state.get(u) == 1:
                cyc = path[path.index(u):] + [u]
                bad.append(f"{prefix}/: import cycle " + " -> ".join(cyc))
            elif u not in state:
                visit(u, path + [u])
        state[n] = 2
    for n in sorted(graph):
        if n not in state:
            visit(n, [n])

# The files and modules the table names exist: in a folder's row, every `x.rs` and `x/`, and every
# module named first in parentheses ("(`size_class`: ..."), is a file or folder under src/FOLDER/
# (at any depth: `heap/`'s files are named inside its parentheses) or, with a slash, a path from
# src/ or the repository's root. A renamed or removed file fails here, not in a reader's search.
for line in section.splitlines():
    if not line.startswith("| `"):
        continue
    folder = re.findall(r"`([a-z_]+)/?`", line.split("|")[1])[0]
    text = "|".join(line.split("|")[2:])
    names = set(re.findall(r"`([a-z_0-9/]+(?:\.rs|/))`", text))
    names |= set(re.findall(r"\(`([a-z_0-9]+)`", text))
    base = src / folder if (src / folder).is_dir() else src
    for n in sorted(names):
        plain = n.rstrip("/")
        if "/" in plain:
            found = any((d / plain).exists() for d in (src, root, base))
        else:
            stem = plain[:-3] if plain.endswith(".rs") else plain
            found = any(p.stem == stem or p.name == stem for p in base.rglob("*"))
        if not found:
            bad.append(f"DESIGN.md's row for `{folder}/` names `{n}`, which is not under src/{folder}/")

if bad:
    print("layering (DESIGN.md, Modules and layering) broken:")
    print("\n".join("  " + b for b in bad))
    sys.exit(1)
print(f"layering ok: {len(order)} folders, each using only itself and those above it; no import cycle in a folder; every file the table names exists")
