//! `cargo xtask gpu-test`: the GPU test suite, here or as a bundle.

use crate::{no_more_args, project_root, run_command, take_value};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set for the Python suite on the GPU machine: a GPU test that finds no GPU
/// fails instead of skipping. (Rust GPU tests are `#[ignore]`d and run here
/// with `--include-ignored`, where a missing GPU fails them.)
const REQUIRE_GPU_ENV: &str = "GPU_WATERZ_REQUIRE_GPU";

const RUN_SCRIPT: &str = r#"#!/usr/bin/env bash
# gpu-waterz GPU test bundle, made by `cargo xtask gpu-test --bundle`.
# Usage: ./run.sh [--sanitize] [libtest arguments...]
#   --sanitize  run every binary under compute-sanitizer (memcheck, racecheck)
# GPU tests are #[ignore]d (CI has no GPU and counts them as ignored); here
# every binary runs with --include-ignored, so they run and must pass.
# Data: ./data (copied from ../shared/data when the bundle was made), or
# GPU_WATERZ_DATA.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
export GPU_WATERZ_REQUIRE_GPU=1
export GPU_WATERZ_DATA="${GPU_WATERZ_DATA:-$here/data}"
export GPU_WATERZ_BIN="${GPU_WATERZ_BIN:-$here/tools/gpu-waterz}"
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
failed=()
for bin in "$here"/bin/*; do
  name="$(basename "$bin")"
  if [ "$sanitize" = 1 ]; then
    for tool in memcheck racecheck; do
      echo "== $name under compute-sanitizer --tool $tool"
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" --include-ignored --test-threads 1 "$@" || failed+=("$name($tool)")
    done
  else
    echo "== $name"
    "$bin" --include-ignored "$@" || failed+=("$name")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "GPU TEST BUNDLE: FAILED: ${failed[*]}"
  exit 1
fi
echo "GPU TEST BUNDLE: all binaries passed"
"#;

const BENCH_SCRIPT: &str = r#"#!/usr/bin/env bash
# gpu-waterz GPU benchmarks, made by `cargo xtask gpu-test --bundle`.
# Usage: ./bench.sh [criterion arguments...]; GPU_WATERZ_BENCH_VOXELS sets the size.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
for bin in "$here"/bench/*; do
  echo "== $(basename "$bin")"
  "$bin" --bench "$@"
done
"#;

/// Runs `cargo <args>` and returns the names and paths of the executables
/// it built.
fn build_binaries(args: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let output = Command::new("cargo")
        .current_dir(project_root())
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !output.status.success() {
        bail!("cargo {} failed", args.join(" "));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut binaries = Vec::new();
    for line in stdout.lines() {
        // Plain string search keeps xtask free of a JSON dependency: cargo
        // writes `"executable":"<path>"` for each built test binary.
        // Only test and bench harnesses: the CLI binary that integration
        // tests need is built too, but is not a test.
        let profile = line.find("\"profile\":{").map(|p| &line[p..]).and_then(|r| r.find('}').map(|e| &r[..e]));
        if !profile.is_some_and(|p| p.contains("\"test\":true")) {
            continue;
        }
        let Some(start) = line.find("\"executable\":\"") else {
            continue;
        };
        let rest = &line[start + 14..];
        let Some(end) = rest.find('"') else { continue };
        let path = PathBuf::from(&rest[..end]);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        binaries.push((name, path));
    }
    if binaries.is_empty() {
        bail!("cargo {} built no binaries", args.join(" "));
    }
    Ok(binaries)
}

fn copy_binaries(binaries: &[(String, PathBuf)], dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    for (name, path) in binaries {
        std::fs::copy(path, dir.join(name)).with_context(|| format!("copying {}", path.display()))?;
    }
    Ok(())
}

fn bundle(dir: &Path) -> Result<()> {
    // xtask's own tests (tidy) read the source tree, which a bundle does
    // not carry; they need no GPU and run with `cargo xtask test`.
    let tests = build_binaries(&["test", "--workspace", "--exclude", "xtask", "--no-run"])?;
    copy_binaries(&tests, &dir.join("bin"))?;
    let benches = build_binaries(&["bench", "--no-run", "-p", "gpu-waterz-benches", "--bench", "gpu_stages"])?;
    copy_binaries(&benches, &dir.join("bench"))?;
    // The CLI, for the CLI's integration tests (GPU_WATERZ_BIN in run.sh).
    let cli = ["build", "--release", "-p", "gpu-waterz-cli"];
    run_command(Command::new("cargo").current_dir(project_root()).args(cli))?;
    // The end-to-end benchmark, prebuilt: the GPU machine has no cargo.
    crate::bench_cremi::build()?;
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools)?;
    std::fs::copy(crate::cargo_target_dir().join("release/gpu-waterz"), tools.join("gpu-waterz"))?;
    std::fs::copy(crate::cargo_target_dir().join("release/bench-cremi"), tools.join("bench-cremi"))?;
    let data_src = project_root().join("../shared/data");
    let data_dst = dir.join("data");
    if data_src.is_dir() {
        std::fs::create_dir_all(&data_dst)?;
        for entry in std::fs::read_dir(&data_src)? {
            let entry = entry?;
            let target = data_dst.join(entry.file_name());
            if !target.exists() {
                std::fs::copy(entry.path(), &target)?;
            }
        }
    } else {
        bail!("{} is absent: the bundle's real-data tests need it", data_src.display());
    }
    for (name, text) in [("run.sh", RUN_SCRIPT), ("bench.sh", BENCH_SCRIPT)] {
        let script = dir.join(name);
        std::fs::write(&script, text)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    println!(
        "gpu-test: bundled {} test and {} bench binaries into {} (run.sh, bench.sh)",
        tests.len(),
        benches.len(),
        dir.display()
    );
    Ok(())
}

pub fn run(args: &[String]) -> Result<()> {
    let mut args = args.to_vec();
    let bundle_dir = take_value(&mut args, "--bundle")?;
    no_more_args(&args)?;
    match bundle_dir {
        Some(dir) => bundle(Path::new(&dir)),
        None => run_command(
            Command::new("cargo")
                .current_dir(project_root())
                .args(["test", "--workspace", "--", "--include-ignored"])
                .env(REQUIRE_GPU_ENV, "1"),
        ),
    }
}
