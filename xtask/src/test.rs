//! `cargo xtask test`: every test that runs without a GPU: the Rust tests,
//! then, in a virtualenv with stock waterz 0.10.1 from PyPI and the
//! `gpu_waterz` Python package built from this tree, the equivalence suites
//! of the CLI and of the Python package against stock waterz.

use crate::{no_more_args, project_root, run_command};
use anyhow::{Context, Result};
use std::process::Command;

/// The stock waterz the reference is checked against, and what its suite needs.
const COMPAT_PACKAGES: &[&str] = &["waterz==0.10.1", "numpy", "h5py", "zarr", "funlib.persistence", "pytest"];

/// The virtualenv with stock waterz and the suite's packages (made or
/// updated here); returns its Python.
pub fn compat_venv(root: &std::path::Path) -> Result<std::path::PathBuf> {
    let venv = root.join("target/compat-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        run_command(Command::new("python3").args(["-m", "venv"]).arg(&venv))
            .context("creating the virtualenv for the waterz equivalence suite (needs python3 with venv)")?;
    }
    run_command(Command::new(&python).args(["-m", "pip", "install", "--quiet"]).args(COMPAT_PACKAGES))
        .context("installing stock waterz from PyPI")?;
    Ok(python)
}

pub fn run(args: &[String]) -> Result<()> {
    no_more_args(args)?;
    let root = project_root();
    run_command(Command::new("cargo").current_dir(&root).args(["test", "--workspace"]))?;
    run_command(Command::new("cargo").current_dir(&root).args(["build", "--release", "-p", "gpu-waterz-cli"]))?;
    // The downstream example, run as a user runs it (on the CPU here: Auto
    // falls back and says so).
    run_command(Command::new("cargo").current_dir(&root).args(["run", "--quiet", "-p", "gpu-waterz-example-decode"]))
        .context("the downstream example failed")?;

    let python = compat_venv(&root)?;
    // The Python package, built by maturin as users build it (README).
    run_command(
        Command::new(&python)
            .current_dir(&root)
            .args(["-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", "./crates/gpu-waterz-python"])
            .env("CARGO_TARGET_DIR", root.join("target")),
    )
    .context("building and installing the gpu_waterz Python package")?;
    run_command(
        Command::new(&python)
            .current_dir(&root)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/compat"])
            .env("GPU_WATERZ_BIN", root.join("target/release/gpu-waterz")),
    )
    .context("the equivalence suite against stock waterz failed")
}
