//! gpu-waterz's task runner, in the matklad style: plain Rust, few
//! dependencies, run as `cargo xtask <task>`.
//!
//! Tasks:
//! - `kernels [--check] [--arch sm_90]`: build `kernels-rs` to PTX with the
//!   pinned nightly toolchain (sm_90, sm_90a for Hopper, and sm_80 for the older GPUs), and
//!   assemble the cubins for sm_80 to sm_120 with the pinned ptxas (from
//!   PyPI's nvidia-cuda-nvcc-cu12, installed into `target/ptxas-venv`);
//!   `--check` fails if the committed PTX or cubins are stale. `--arch`
//!   builds one architecture's PTX only.
//! - `test`: the whole CPU test suite, the README's test command: `cargo
//!   test --workspace`, then the equivalence suite against stock waterz
//!   (`tests/compat`, pytest in a virtualenv with PyPI's `waterz==0.10.1`).
//! - `gpu-test [--bundle DIR]`: run the GPU test suite here (a GPU is
//!   required), or build the test binaries and a run script into DIR for a
//!   machine with a GPU and no Rust toolchain.
//! - `doc`: the documentation of every crate, `kernels-rs` included (built
//!   for nvptx64 with the pinned toolchain), failing on any warning.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

mod bench_cremi;
mod doc;
mod gpu_test;
mod kernels;
mod test;

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  kernels [--check] [--arch sm_90]   build kernels-rs to PTX and cubins (kernels-rs/ptx/, cubin/)
  test                               all CPU tests: cargo test + the waterz equivalence suite
  gpu-test [--bundle DIR]            run the GPU tests, or bundle them into DIR
  bench-cremi [--waterz] [args...]   the end-to-end GPU benchmark (bench-cremi --help)
  doc                                every crate's docs, kernels-rs included, warnings denied
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        bail!("no task given");
    };
    match task.as_str() {
        "kernels" => kernels::run(rest),
        "gpu-test" => gpu_test::run(rest),
        "bench-cremi" => bench_cremi::run(rest),
        "test" => test::run(rest),
        "doc" => doc::run(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            bail!("unknown task {other:?}")
        }
    }
}

/// The workspace root (the parent of `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// Where cargo puts what it builds: `$CARGO_TARGET_DIR` when the user set it
/// (relative paths are taken from the workspace root, as cargo does), else
/// `target/` in the workspace.
pub fn cargo_target_dir() -> PathBuf {
    let root = project_root();
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

/// Runs a command, failing with its command line if it fails.
pub fn run_command(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd.status().with_context(|| format!("cannot start {shown}"))?;
    if !status.success() {
        bail!("{shown} failed with {status}");
    }
    Ok(())
}

/// Takes the value of `--name VALUE` out of `args`.
pub fn take_value(args: &mut Vec<String>, name: &str) -> Result<Option<String>> {
    match args.iter().position(|a| a == name) {
        None => Ok(None),
        Some(i) => {
            if i + 1 >= args.len() {
                bail!("{name} needs a value");
            }
            let v = args.remove(i + 1);
            args.remove(i);
            Ok(Some(v))
        }
    }
}

/// Takes the flag `name` out of `args`, returning whether it was there.
pub fn take_flag(args: &mut Vec<String>, name: &str) -> bool {
    match args.iter().position(|a| a == name) {
        None => false,
        Some(i) => {
            args.remove(i);
            true
        }
    }
}

/// Fails on arguments nobody took.
pub fn no_more_args(args: &[String]) -> Result<()> {
    if !args.is_empty() {
        bail!("unexpected arguments: {args:?}");
    }
    Ok(())
}
