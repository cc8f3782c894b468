//! `cargo xtask doc`: every crate's documentation, warnings denied.

use crate::{kernels::pinned_toolchain, no_more_args, project_root, run_command};
use anyhow::{Context, Result};
use std::process::Command;

pub fn run(args: &[String]) -> Result<()> {
    no_more_args(args)?;
    let root = project_root();
    run_command(
        Command::new("cargo")
            .current_dir(&root)
            .args(["doc", "--workspace", "--no-deps"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    )
    .context("the workspace's documentation has warnings")?;
    // The device crate builds only for nvptx64, with the pinned nightly.
    let toolchain = pinned_toolchain()?;
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root.join("kernels-rs"))
        .arg(format!("+{toolchain}"))
        .args(["doc", "--no-deps", "--locked", "-Zbuild-std=core"])
        .args(["--target", "nvptx64-nvidia-cuda", "--target-dir"])
        .arg(root.join("target/kernels-doc"))
        .env("RUSTDOCFLAGS", "-D warnings");
    for var in ["RUSTC", "RUSTDOC", "RUSTC_WRAPPER", "RUSTUP_TOOLCHAIN", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET"] {
        cmd.env_remove(var);
    }
    run_command(&mut cmd).context("kernels-rs's documentation has warnings")?;
    println!("doc: every crate documented without warnings");
    Ok(())
}
