//! `cargo xtask gpu-test`: the GPU test suite, here or as a bundle.

use crate::{no_more_args, project_root, run_command, take_value};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Set for every test process of the GPU suite: a GPU test that finds no
/// GPU fails instead of skipping (see `gpu_waterz_runtime::testing`).
const REQUIRE_GPU_ENV: &str = "GPU_WATERZ_REQUIRE_GPU";

const RUN_SCRIPT: &str = r#"#!/usr/bin/env bash
# gpu-waterz GPU test bundle, made by `cargo xtask gpu-test --bundle`.
# Usage: ./run.sh [--sanitize] [libtest arguments...]
#   --sanitize  run every binary under compute-sanitizer (memcheck, racecheck)
# Data: ./data (copied from ../shared/data when the bundle was made), or
# GPU_WATERZ_DATA.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
export GPU_WATERZ_REQUIRE_GPU=1
export GPU_WATERZ_DATA="${GPU_WATERZ_DATA:-$here/data}"
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
failed=()
for bin in "$here"/bin/*; do
  name="$(basename "$bin")"
  if [ "$sanitize" = 1 ]; then
    for tool in memcheck racecheck; do
      echo "== $name under compute-sanitizer --tool $tool"
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" --test-threads 1 "$@" || failed+=("$name($tool)")
    done
  else
    echo "== $name"
    "$bin" "$@" || failed+=("$name")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "GPU TEST BUNDLE: FAILED: ${failed[*]}"
  exit 1
fi
echo "GPU TEST BUNDLE: all binaries passed"
"#;

/// Builds the workspace's test binaries and returns their paths and names.
fn build_test_binaries() -> Result<Vec<(String, std::path::PathBuf)>> {
    let output = Command::new("cargo")
        .current_dir(project_root())
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    if !output.status.success() {
        bail!("cargo test --no-run failed");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut binaries = Vec::new();
    for line in stdout.lines() {
        // Plain string search keeps xtask free of a JSON dependency: cargo
        // writes `"executable":"<path>"` for each built test binary.
        let Some(start) = line.find("\"executable\":\"") else {
            continue;
        };
        let rest = &line[start + 14..];
        let Some(end) = rest.find('"') else { continue };
        let path = std::path::PathBuf::from(&rest[..end]);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        binaries.push((name, path));
    }
    if binaries.is_empty() {
        bail!("cargo built no test binaries");
    }
    Ok(binaries)
}

fn bundle(dir: &Path) -> Result<()> {
    let binaries = build_test_binaries()?;
    let bin_dir = dir.join("bin");
    if bin_dir.exists() {
        std::fs::remove_dir_all(&bin_dir)
            .with_context(|| format!("clearing {}", bin_dir.display()))?;
    }
    std::fs::create_dir_all(&bin_dir)?;
    for (name, path) in &binaries {
        std::fs::copy(path, bin_dir.join(name))
            .with_context(|| format!("copying {}", path.display()))?;
    }
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
        eprintln!(
            "gpu-test: {} is absent; the bundle's data tests will skip",
            data_src.display()
        );
    }
    let script = dir.join("run.sh");
    std::fs::write(&script, RUN_SCRIPT)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    println!(
        "gpu-test: bundled {} test binaries into {} (run {}/run.sh on the GPU machine)",
        binaries.len(),
        dir.display(),
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
                .args(["test", "--workspace"])
                .env(REQUIRE_GPU_ENV, "1"),
        ),
    }
}
