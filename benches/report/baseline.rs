//! The baseline: poolalloc as of a pinned earlier commit, run beside this build in every report,
//! so that a change that makes poolalloc slower than the last good build shows in the report that
//! measures it, on the same machine in the same hour (a ratio to the peers alone cannot tell a
//! regression of ours from a better day of theirs).
//!
//! The parent extracts the commit's tree from this repository (`git archive`, so nothing in the
//! working tree is touched) into `<target>/baseline/<commit>/`, builds that tree's own report
//! benchmark into `<target>/baseline/<commit>/target/` (its own target directory and lock file:
//! the running `cargo bench` holds the usual one), and runs its poolalloc child like any other runner.
//! The child protocol (`POOLALLOC_BENCH_*` in, one `RESULT` line out) is the same at the
//! baseline commit; a workload the baseline does not know gets no baseline cell.
//!
//! To move the baseline, change [`COMMIT`] and say so in README.md and CHANGELOG.md.

use crate::harness::cargo::{bench_executable, cargo, target_args, target_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The baseline commit: d80727a (2026-11-29), the arenas (issue 42) with the report harness whose
/// children dispatch through an inlined choice and one jump table for every allocator. The pin
/// before it, f8814ef, had a harness whose choice was a call of its own (sh6bench's poolalloc
/// child: 151.0 M instructions where the same library takes 143.9 M now): against it, a report
/// measured the harness as well as the allocator. Move the pin only to a commit whose report
/// children dispatch the same way as this one's (see `Switch` in bench.rs).
pub const COMMIT: &str = "d80727a6193d1d313e050be2d7be636a91fdb67e";

/// The short name of the baseline in tables and progress lines.
pub fn name() -> String {
    format!("baseline {}", &COMMIT[..7])
}

/// The baseline's report executable, built if needed; `Err` says why there is none (the commit is
/// not in this clone, a shallow one; `git` or the build failed). The report prints that reason
/// instead of the column, so a missing baseline is never silent.
pub fn build() -> Result<PathBuf, String> {
    if std::env::var_os("POOLALLOC_BENCH_NO_BASELINE").is_some() {
        return Err("POOLALLOC_BENCH_NO_BASELINE is set".into());
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = target_dir().join("baseline");
    let src = root.join(COMMIT);
    // Extracted whole or not at all: the marker is written last.
    let marker = src.join(".extracted");
    if !marker.exists() {
        let have = Command::new("git")
            .current_dir(repo)
            .args(["cat-file", "-e", &format!("{COMMIT}^{{commit}}")])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if !have.success() {
            return Err(format!(
                "commit {COMMIT} is not in this clone (shallow?): `git fetch --unshallow` brings it"
            ));
        }
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
        eprintln!("extracting the baseline {COMMIT} into {}", src.display());
        let mut archive = Command::new("git")
            .current_dir(repo)
            .args(["archive", "--format=tar", COMMIT])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run git archive: {e}"))?;
        let tar = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(&src)
            .stdin(
                archive
                    .stdout
                    .take()
                    .expect("git archive's stdout is piped"),
            )
            .status()
            .map_err(|e| format!("cannot run tar: {e}"))?;
        // Both ends must succeed: a git that stopped early leaves tar a short, but valid, tree.
        let git = archive
            .wait()
            .map_err(|e| format!("waiting for git archive: {e}"))?;
        if !git.success() || !tar.success() {
            return Err(format!("git archive ({git}) | tar -x ({tar}) failed"));
        }
        std::fs::write(&marker, COMMIT).map_err(|e| format!("{}: {e}", marker.display()))?;
    }
    eprintln!("building the baseline's report benchmark ({COMMIT})");
    let out = Command::new(cargo())
        .current_dir(&src)
        .args(["build", "--profile", "bench", "--bench", "report"])
        .args(["--message-format", "json-render-diagnostics"])
        .args(target_args())
        // A target directory of the commit's own: cargo takes a path dependency's build in a shared
        // one as fresh when another tree of the same name and version built it (the harness at
        // another commit), and the bench then fails to compile against it.
        .arg("--target-dir")
        .arg(src.join("target"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err("building the baseline failed (its errors are above)".into());
    }
    bench_executable(&String::from_utf8_lossy(&out.stdout), "report")
        .ok_or_else(|| "cargo did not name the baseline's report executable".into())
}
