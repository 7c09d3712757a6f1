#!/usr/bin/env bash
# (Re)builds the report bench from the current working tree and lays out everything
# benches/device/run.sh needs on a machine without cargo:
#   target/device/report          the stripped report executable (parent and every child)
#   target/device/lib/            libstdc++.so.6 and libgcc_s.so.1 (snmalloc's C++ runtime)
#   target/device/metadata.json   `cargo metadata` (the report's write_json_input() file; its presence
#                            is what keeps the report from running cargo)
#   target/device/cargo-home/     the .rs files of the registry that the rayon workloads read (exactly
#                            the files read_registry() would pick here, up to 4 MB = scale 4)
#   target/device/build-info.txt  what was built (commit, dirty files, toolchain, checksum)
# Usage: bash benches/device/build.sh        (from anywhere; one cargo build, default jobs)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
# What build.sh lays out (ignored, under target/): carry it to the device machine.
D="$ROOT/target/device"
mkdir -p "$D"
cd "$ROOT"

echo "== cargo build --profile bench --bench report" >&2
json=$(mktemp)
trap 'rm -f "$json"' EXIT
cargo build --profile bench --bench report --message-format=json-render-diagnostics >"$json"
exe=$(jq -r 'select(.reason=="compiler-artifact" and .target.name=="report") | .executable // empty' "$json" | tail -1)
[ -n "$exe" ] && [ -x "$exe" ] || { echo "no report executable in cargo's messages" >&2; exit 1; }
echo "built $exe" >&2

rm -f "$D/report"
cp "$exe" "$D/report"
strip "$D/report"
chmod +x "$D/report"

# The C++ runtime snmalloc-rs links dynamically (glibc itself is left to the machine).
mkdir -p "$D/lib"
for lib in libstdc++.so.6 libgcc_s.so.1; do
    path=$(ldd "$exe" | awk -v l="$lib" '$1==l {print $3}')
    [ -n "$path" ] || path=$(ldconfig -p | awk -v l="$lib" '$1==l && /x86-64/ {print $NF; exit}')
    [ -n "$path" ] || { echo "cannot find $lib" >&2; exit 1; }
    cp -L "$path" "$D/lib/$lib"
done

cargo metadata --format-version 1 >"$D/metadata.json"

# The rayon workloads' input (benches/report/registry.rs): .rs files under
# $CARGO_HOME/registry/src, sorted by path (component-wise, as Rust's PathBuf), files over 256 KiB
# or not UTF-8 skipped, read until the total reaches 1 MB x scale. Only the crates.io index
# directory is taken (`cargo package` leaves unpacked poolalloc-0.1.0 copies beside it here, which
# a machine that only built the bench does not have). Built once; delete target/device/cargo-home to
# redo it.
if [ ! -d "$D/cargo-home/registry/src" ]; then
    python3 - "$D/cargo-home" <<'EOF'
import os, sys, shutil
home = os.environ.get("CARGO_HOME") or os.path.join(os.environ["HOME"], ".cargo")
src = os.path.join(home, "registry", "src")
dest = os.path.join(sys.argv[1], "registry", "src")
cap = 4 * 1_000_000 + 200_000  # scale 4 (the report's full mode), and a little over
files = []
for top in sorted(os.listdir(src)):
    if not top.startswith("index.crates.io-"):
        continue
    for dp, dn, fn in os.walk(os.path.join(src, top)):
        for f in fn:
            if f.endswith(".rs"):
                files.append(os.path.relpath(os.path.join(dp, f), src))
files.sort(key=lambda p: p.split("/"))
total = n = 0
for rel in files:
    if total >= cap:
        break
    p = os.path.join(src, rel)
    if not os.path.isfile(p):
        continue
    with open(p, "rb") as fh:
        b = fh.read()
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        continue
    if len(b) > 256 * 1024:
        continue
    total += len(b); n += 1
    os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
    shutil.copyfile(p, os.path.join(dest, rel))
print(f"registry subset: {n} files, {total} bytes", file=sys.stderr)
if total < cap - 200_000:
    sys.exit("not enough registry sources")
EOF
fi

{
    echo "built: $(date -u +%FT%TZ) on $(hostname)"
    echo "commit: $(git rev-parse HEAD) ($(git log -1 --format=%s | cut -c1-100))"
    echo "dirty files (git status --short):"
    git status --short | sed 's/^/  /'
    echo "diff stat vs HEAD:"
    git diff --stat HEAD | sed 's/^/  /'
    echo "diff sha256: $(git diff HEAD | sha256sum | cut -c1-16)"
    echo "rustc: $(rustc -V)"
    echo "report sha256: $(sha256sum "$D/report" | cut -c1-16)  (from $exe)"
} >"$D/build-info.txt"
cat "$D/build-info.txt" >&2
du -sh "$D" >&2
