#!/usr/bin/env bash
# The misuse catalogue of mimalloc-bench (bench/security: hardened_malloc's kinds of misuse, each C
# case at 8 B, 4 KiB and 256 KiB, plus the C++ ones: 116 programs) run under LD_PRELOAD of one or
# more C libraries, and the count each catches. The sources are fetched at run time into a
# temporary directory and never kept in this repository.
#
#   benches/security/catalogue.sh [--src DIR] NAME=LIB.so ... [glibc]
#
# `glibc` runs the programs with nothing preloaded. --src takes an existing checkout of
# mimalloc-bench (or of its bench/security directory) instead of cloning one.
#
# A case is caught as mimalloc-bench's bench.sh counts it: the program did not print NOT_CAUGHT
# (it died of a signal before, or what it tests held: a freed block read as zeros, a different
# block handed out). "signal" counts the programs that died of a signal (abort or fault). A
# program still running after 10 s is killed and counted as not caught ("timeout").
#
# Output: one line per case and allocator ("caught", "signal NAME" or "-", and the first line the
# program wrote to stderr: an abort's message), then the counts and the cases missed.
set -u
src=""
if [ "${1:-}" = "--src" ]; then src=$2; shift 2; fi
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }
work=$(mktemp -d /tmp/poolalloc-catalogue.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -z "$src" ]; then
    git clone -q --depth 1 https://github.com/daanx/mimalloc-bench "$work/mb" || exit 1
    src="$work/mb"
fi
[ -d "$src/bench/security" ] && src="$src/bench/security"
[ -f "$src/common.h" ] || { echo "no bench/security in $src" >&2; exit 1; }
mkdir -p "$work/bin"
flags="-O0 -w -Wno-free-nonheap-object -fno-inline -fno-builtin-inline -fno-inline-small-functions -fno-ipa-pure-const"
for f in "$src"/*.c; do
    n=$(basename "$f" .c)
    for s in small:8 medium:4096 large:262144; do
        cc $flags -I"$src" -DALLOCATION_SIZE="${s#*:}" -o "$work/bin/${n}_${s%%:*}" "$f" || exit 1
    done
done
for f in "$src"/*.cc; do
    n=$(basename "$f" .cc)
    c++ -w -std=c++17 -fsized-deallocation -I"$src" -DALLOCATION_SIZE=4096 -o "$work/bin/$n" "$f" || exit 1
done
cases=$(ls "$work/bin" | sort)
echo "cases: $(echo "$cases" | wc -l)"
for spec in "$@"; do
    name=${spec%%=*}
    lib=""
    [ "$spec" != "glibc" ] && lib=$(readlink -f "${spec#*=}")
    caught=0 signal=0 total=0 missed=""
    for c in $cases; do
        total=$((total + 1))
        out=$(cd "$work" && if [ -n "$lib" ]; then
            LD_PRELOAD="$lib" timeout -s KILL 10 "$work/bin/$c" 2>"$work/err" </dev/null
        else
            timeout -s KILL 10 "$work/bin/$c" 2>"$work/err" </dev/null
        fi; echo "rc=$?")
        rc=${out##*rc=}
        how="-"
        if [ "$rc" -ge 128 ] && [ "$rc" != 137 ]; then
            how="signal $(kill -l $((rc - 128)))"
            signal=$((signal + 1))
        elif [ "$rc" = 137 ]; then
            how="timeout"
        fi
        if [ "$how" != timeout ] && ! grep -q NOT_CAUGHT <<<"$out"; then
            caught=$((caught + 1))
            [ "$how" = "-" ] && how="caught"
        else
            missed="$missed $c"
        fi
        echo "$name $c $how $(head -c 300 "$work/err" | grep -a -v '^$' | head -1 | cut -c1-110)"
    done
    echo "== $name: caught $caught of $total ($signal died of a signal)"
    echo "== $name missed:$missed"
done
