#!/usr/bin/env python3
"""Checks the layering that DESIGN.md's "Modules and layering" table states: each module of src/
uses only modules listed above it (or itself). Reads every `crate::NAME` path in src/**/*.rs (use
lines, `use crate::{a, b::c}` groups and paths in code), maps each file to its top-level module
(src/NAME.rs or src/NAME/...; an item lib.rs re-exports, `crate::PoolAlloc`, counts as its
module's), and fails naming every edge that points down the list or to a module the table does not
list, and every import cycle between the files of one module (`super::` and `crate::NAME::FILE`).
Comments, doc comments and `#[cfg(test)] mod tests` blocks (at a file's end) are ignored.

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
        order.extend(re.findall(r"`([a-z_]+)`", first))
rank = {m: i for i, m in enumerate(order)}
# Modules on one row share a rank.
for line in section.splitlines():
    if line.startswith("| `"):
        names = re.findall(r"`([a-z_]+)`", line.split("|")[1])
        for n in names[1:]:
            rank[n] = rank[names[0]]

# Items lib.rs re-exports, by the module that defines them: `pub use global::PoolAlloc;`.
owner = {}
for m in re.finditer(r"pub use ([a-z_]+)::(\{[^}]*\}|[A-Za-z_]+);", (root / "src/lib.rs").read_text()):
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

def file_edges(path, module, text):
    """Files of the same module that `path` uses: `super::f`, `crate::module::f`."""
    text = strip_comments(text)
    used = set(re.findall(r"\bsuper::([a-z_]+)\b", text))
    used |= set(re.findall(r"\bcrate::%s::([a-z_]+)\b" % module, text))
    for m in re.finditer(r"\bsuper::\{([^}]*)\}", text):
        used |= set(re.findall(r"\b([a-z_]+)\b", m.group(1)))
    return used

bad = []
src = root / "src"
for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src)
    if rel.parts == ("lib.rs",):
        continue
    module = rel.parts[0].removesuffix(".rs")
    if module not in rank:
        bad.append(f"{rel}: module `{module}` is not in DESIGN.md's layering table")
        continue
    for used in sorted(referenced(path.read_text())):
        if used == module or used in ("self", "super"):
            continue
        if used not in rank:
            # macros and items of lib.rs (if_pools!, re-exports) are not modules
            if (src / f"{used}.rs").exists() or (src / used).is_dir():
                bad.append(f"{rel}: uses `{used}`, which DESIGN.md's table does not list")
            continue
        if rank[used] > rank[module]:
            bad.append(f"{rel}: `{module}` uses `{used}`, listed below it in DESIGN.md")

# Import cycles between the files of one directory module.
for d in sorted(p for p in src.iterdir() if p.is_dir()):
    files = {f.stem: f for f in d.glob("*.rs") if f.stem != "mod"}
    graph = {n: {u for u in file_edges(f, d.name, f.read_text()) if u in files and u != n}
             for n, f in files.items()}
    state = {}
    def visit(n, path):
        state[n] = 1
        for u in sorted(graph[n]):
            if state.get(u) == 1:
                cyc = path[path.index(u):] + [u]
                bad.append(f"{d.name}/: import cycle " + " -> ".join(cyc))
            elif u not in state:
                visit(u, path + [u])
        state[n] = 2
    for n in sorted(graph):
        if n not in state:
            visit(n, [n])

if bad:
    print("layering (DESIGN.md, Modules and layering) broken:")
    print("\n".join("  " + b for b in bad))
    sys.exit(1)
print(f"layering ok: {len(order)} modules, each using only those above it")
