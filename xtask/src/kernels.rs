//! `cargo xtask kernels`: Rust device code to PTX.

use crate::{no_more_args, project_root, run_command, take_flag, take_value};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;

/// The architecture whose PTX is committed and embedded by the runtime.
pub const DEFAULT_ARCH: &str = "sm_90";

/// The pinned toolchain, read from `kernels-rs/rust-toolchain.toml`.
pub fn pinned_toolchain() -> Result<String> {
    let path = project_root().join("kernels-rs/rust-toolchain.toml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("channel") {
            let value = rest.trim_start().trim_start_matches('=').trim().trim_matches('"');
            return Ok(value.to_string());
        }
    }
    bail!("{} has no channel", path.display())
}

/// Where the PTX for `arch` is kept.
pub fn ptx_path(arch: &str) -> PathBuf {
    let dir = project_root().join("kernels-rs/ptx");
    if arch == DEFAULT_ARCH {
        dir.join("gpu_waterz_kernels.ptx")
    } else {
        dir.join(format!("gpu_waterz_kernels.{arch}.ptx"))
    }
}

/// Builds the kernels for `arch` and returns the PTX text.
pub fn build(arch: &str) -> Result<String> {
    if !arch.starts_with("sm_") || arch[3..].parse::<u32>().is_err() {
        bail!("--arch must look like sm_90, not {arch:?}");
    }
    let toolchain = pinned_toolchain()?;
    let kernels_dir = project_root().join("kernels-rs");
    let target_dir = project_root().join("target/kernels");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&kernels_dir)
        .arg(format!("+{toolchain}"))
        .args(["build", "--release", "--locked", "-Zbuild-std=core", "--target", "nvptx64-nvidia-cuda"])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTFLAGS", format!("-C target-cpu={arch}"));
    // The outer cargo's settings must not leak into the nightly build.
    for var in [
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "RUSTUP_TOOLCHAIN",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    run_command(&mut cmd).with_context(|| {
        format!("building kernels-rs; is the toolchain installed? `rustup toolchain install {toolchain} --profile minimal --component rust-src,llvm-tools,llvm-bitcode-linker`")
    })?;
    let built = target_dir.join("nvptx64-nvidia-cuda/release/gpu_waterz_kernels.ptx");
    std::fs::read_to_string(&built).with_context(|| format!("reading {}", built.display()))
}

pub fn run(args: &[String]) -> Result<()> {
    let mut args = args.to_vec();
    let check = take_flag(&mut args, "--check");
    let arch = take_value(&mut args, "--arch")?.unwrap_or_else(|| DEFAULT_ARCH.to_string());
    no_more_args(&args)?;
    let ptx = build(&arch)?;
    let path = ptx_path(&arch);
    if check {
        let committed = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        if committed != ptx {
            bail!(
                "{} is stale: it differs from what kernels-rs builds now; run `cargo xtask kernels{}` and commit it",
                path.display(),
                if arch == DEFAULT_ARCH { String::new() } else { format!(" --arch {arch}") }
            );
        }
        println!("kernels: {} is up to date ({} bytes, {arch})", path.display(), ptx.len());
    } else {
        std::fs::write(&path, &ptx).with_context(|| format!("writing {}", path.display()))?;
        println!("kernels: wrote {} ({} bytes, {arch})", path.display(), ptx.len());
    }
    Ok(())
}
