//! `cargo xtask test`: every test that runs without a GPU: the Rust tests,
//! then, in a virtualenv with stock waterz 0.10.1 from PyPI and the
//! `gpu_waterz` Python package built from this tree, the equivalence suites
//! of the CLI and of the Python package against stock waterz.

use crate::{no_more_args, project_root, run_command};
use anyhow::{Context, Result};
use std::process::Command;

/// The stock waterz the reference is checked against, and what its suite needs.
const COMPAT_PACKAGES: &[&str] = &[
    "waterz==0.10.1",
    "numpy",
    "h5py",
    "zarr",
    "funlib.persistence",
    "pytest",
    "maturin>=1.5,<2",
    "ziglang",
    "POT==0.9.5",
    "scikit-image",
    "dask[distributed]",
];

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
    // The Python package as it ships: an abi3 wheel for manylinux2014
    // (glibc >= 2.17; maturin links with zig and checks the policy), and the
    // sdist, which must build too; the suite runs from the installed wheel.
    let wheel = build_wheel(&root, &python)?;
    run_command(
        Command::new(&python)
            .current_dir(&root)
            .args(["-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps"])
            .arg(&wheel),
    )
    .context("installing the gpu_waterz wheel")?;
    run_command(
        Command::new(&python)
            .current_dir(&root)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/compat"])
            .env("GPU_WATERZ_BIN", crate::cargo_target_dir().join("release/gpu-waterz")),
    )
    .context("the equivalence suite against stock waterz failed")
}

/// Builds the Python package's manylinux2014 abi3 wheel (and its sdist, as
/// a check) with maturin and zig from the virtualenv of `python`; returns
/// the wheel's path.
fn build_wheel(root: &std::path::Path, python: &std::path::Path) -> Result<std::path::PathBuf> {
    let bin = python.parent().context("the virtualenv's bin folder")?;
    let out = root.join("target/wheels");
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let manifest = root.join("crates/gpu-waterz-python/Cargo.toml");
    run_command(
        Command::new(bin.join("maturin"))
            .current_dir(root)
            .args(["build", "--release", "--zig", "--compatibility", "manylinux2014", "-i"])
            .arg(python)
            .arg("--out")
            .arg(&out)
            .arg("-m")
            .arg(&manifest)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", root.join("target")),
    )
    .context("building the manylinux2014 wheel (maturin with zig)")?;
    run_command(
        Command::new(bin.join("maturin"))
            .current_dir(root)
            .args(["sdist", "--out"])
            .arg(&out)
            .arg("-m")
            .arg(&manifest)
            .env("PATH", &path),
    )
    .context("building the sdist")?;
    let wheel = std::fs::read_dir(&out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("maturin wrote no wheel")?;
    let name = wheel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    anyhow::ensure!(
        name.contains("abi3") && name.contains("manylinux_2_17"),
        "the wheel {name} is not abi3 manylinux2014"
    );
    Ok(wheel)
}
