//! Helpers for GPU tests.
//!
//! GPU tests are marked `#[ignore = "needs an NVIDIA GPU ..."]`, so that a
//! machine without one (CI) counts them as ignored, not as passed; `cargo
//! xtask gpu-test` and the GPU test bundle run them with `--include-ignored`,
//! and there a missing GPU is a failure.

use crate::Gpu;

/// The reason GPU tests give in `#[ignore = ...]`.
pub const IGNORE_REASON: &str = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)";

/// The GPU for a GPU test; panics with the reason when there is none (the
/// test was asked for explicitly, so a missing GPU is a failure).
pub fn gpu() -> Gpu {
    match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => panic!("this GPU test was run on a machine without a usable GPU: {e}"),
    }
}
