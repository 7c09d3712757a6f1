#!/usr/bin/env python3
"""Runs one wasm32 test binary (a libtest harness) under wasmtime, one test per instance.

Cargo calls this as the target's runner (CARGO_TARGET_WASM32_WASIP1*_RUNNER): `run-tests.py
BINARY.wasm [libtest args]`. On wasm32 a panic aborts the whole instance (panic=abort), so the
first failing test would hide every test after it and lose its own captured output: each test
runs in an instance of its own (the module is compiled once, `wasmtime compile`), with its output
shown when it fails. A test that needs what the target lacks is counted apart, as skipped, with
the reason: a thread where there are none (`failed to spawn thread`), a child process. Prints
libtest's summary line; exits 1 if a test failed.

Environment: WASMTIME (default `wasmtime`), WASM_THREADS=1 to enable wasi-threads
(`wasm32-wasip1-threads`).
"""
import os
import subprocess
import sys

SKIP_REASONS = [
    ("failed to spawn thread", "needs a thread (no threads on this target)"),
    ("operation not supported on this platform", "needs a child process or another OS service"),
    ("Command::", "needs a child process"),
]


def main():
    wasm, args = sys.argv[1], sys.argv[2:]
    wasmtime = os.environ.get("WASMTIME", "wasmtime")
    flags = ["-W", "threads=y", "-S", "threads=y"] if os.environ.get("WASM_THREADS") == "1" else []
    cwasm = wasm[: -len(".wasm")] + ".cwasm" if wasm.endswith(".wasm") else wasm + ".cwasm"
    if not os.path.exists(cwasm) or os.path.getmtime(cwasm) < os.path.getmtime(wasm):
        subprocess.run([wasmtime, "compile", *flags, "-o", cwasm, wasm], check=True)
    # The package's folder at its own path: tests find their files by CARGO_MANIFEST_DIR.
    here = os.getcwd()
    run = [wasmtime, "run", "--allow-precompiled", *flags, "--dir", f"{here}::{here}", cwasm]

    # Filters and --skip given by cargo narrow the list; our own flags are ours to set.
    own = {"--quiet", "-q", "--nocapture", "--show-output"}
    filt = [a for a in args if a not in own and not a.startswith("--test-threads")]
    listed = subprocess.run(run + ["--list", "--format", "terse", *filt],
                            capture_output=True, text=True)
    name = os.path.basename(wasm)
    lines = listed.stdout.splitlines()
    if listed.returncode != 0 or any(not l.endswith((": test", ": benchmark")) for l in lines):
        # A harness of its own (`harness = false`): it ignored the arguments and ran its cases.
        return whole(name, listed)
    tests = [l[: -len(": test")] for l in lines if l.endswith(": test")]
    print(f"\nrunning {len(tests)} tests ({name}, one wasmtime instance each)")
    passed, failed, ignored, skipped = 0, [], 0, {}
    for t in tests:
        r = subprocess.run(run + ["--exact", t, "--nocapture", "--test-threads=1", *[
            a for a in filt if a.startswith("--ignored") or a == "--include-ignored"]],
            capture_output=True, text=True)
        out = r.stdout + r.stderr
        if r.returncode == 0 and "test result: ok" in out:
            if "1 ignored" in out:
                ignored += 1
            else:
                passed += 1
            continue
        reason = next((why for key, why in SKIP_REASONS if key in out), None)
        if reason:
            skipped.setdefault(reason, []).append(t)
            continue
        failed.append(t)
        print(f"\n---- {t} (exit {r.returncode}) ----")
        lines = [l for l in out.splitlines() if not l.lstrip()[:1].isdigit() or "panicked" in l]
        print("\n".join(lines[-40:]))
    for why, ts in skipped.items():
        print(f"skipped, {why}: {len(ts)}: " + ", ".join(ts))
    nskip = sum(len(ts) for ts in skipped.values())
    status = "FAILED" if failed else "ok"
    print(f"test result: {status}. {passed} passed; {len(failed)} failed; {ignored} ignored; "
          f"0 measured; {nskip} skipped ({name})")
    if failed:
        print("failures:\n    " + "\n    ".join(failed))
    return 1 if failed else 0


def whole(name, r):
    """The result of a binary with a harness of its own, run once as a whole."""
    out = r.stdout + r.stderr
    print(f"\n{name}: a harness of its own, run as a whole")
    if r.returncode == 0:
        print(out.rstrip())
        print(f"test result: ok. ({name})")
        return 0
    reason = next((why for key, why in SKIP_REASONS if key in out), None)
    keep = [l for l in out.splitlines() if l.startswith("test ") or "panicked" in l]
    print("\n".join(keep[-40:]))
    if reason:
        print(f"test result: ok. the cases above passed; the rest skipped, {reason} ({name})")
        return 0
    print(out[-4000:])
    print(f"test result: FAILED. exit {r.returncode} ({name})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
