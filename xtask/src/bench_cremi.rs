//! `cargo xtask bench-cremi`: builds the `bench-cremi` binary (benches/)
//! and runs it with the given arguments, recording into
//! `docs/BENCHMARKS.md` and `target/bench-cremi.json` unless told otherwise.
//! With `--waterz` and no `--python`, stock waterz runs from the
//! virtualenv that `cargo xtask test` makes (created here if absent). On a
//! machine without cargo, run the prebuilt binary from the GPU bundle
//! (`cargo xtask gpu-test --bundle DIR`: `DIR/tools/bench-cremi`).

use crate::{project_root, run_command};
use anyhow::{Context, Result};
use std::process::Command;

/// Builds `target/release/bench-cremi`.
pub fn build() -> Result<()> {
    let args = ["build", "--release", "-p", "gpu-waterz-benches", "--bin", "bench-cremi"];
    run_command(Command::new("cargo").current_dir(project_root()).args(args))
}

pub fn run(args: &[String]) -> Result<()> {
    let root = project_root();
    build()?;
    let mut args = args.to_vec();
    let has = |args: &[String], name: &str| args.iter().any(|a| a == name);
    if !has(&args, "--markdown") {
        args.extend(["--markdown".into(), root.join("docs/BENCHMARKS.md").display().to_string()]);
    }
    if !has(&args, "--json") {
        args.extend(["--json".into(), root.join("target/bench-cremi.json").display().to_string()]);
    }
    if has(&args, "--waterz") && !has(&args, "--python") {
        let python = crate::test::compat_venv(&root)?;
        args.extend(["--python".into(), python.display().to_string()]);
    }
    let mut cmd = Command::new(crate::cargo_target_dir().join("release/bench-cremi"));
    cmd.current_dir(&root).args(&args);
    if std::env::var_os("GPU_WATERZ_DATA").is_none() {
        cmd.env("GPU_WATERZ_DATA", root.join("../shared/data"));
    }
    run_command(&mut cmd).context("bench-cremi failed")
}
