//! Helpers for GPU tests that skip visibly on machines without a GPU.

use crate::Gpu;
use std::io::Write;

/// Environment variable that turns a skipped GPU test into a failure. The
/// gpu-test bundle and `cargo xtask gpu-test` set it, so that a GPU
/// assertion never passes silently on a machine that should have a GPU.
pub const REQUIRE_GPU_ENV: &str = "GPU_WATERZ_REQUIRE_GPU";

/// The GPU for test `test_name`, or `None` after printing a visible
/// `SKIPPED` line when there is none (a panic if [`REQUIRE_GPU_ENV`] is set).
///
/// The line goes straight to the process's stderr, past libtest's output
/// capture, so `cargo test` shows it.
pub fn gpu_or_skip(test_name: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            if std::env::var_os(REQUIRE_GPU_ENV).is_some_and(|v| v != "0") {
                panic!("{test_name}: a GPU is required ({REQUIRE_GPU_ENV} is set), but: {e}");
            }
            let _ = writeln!(std::io::stderr(), "SKIPPED GPU test {test_name}: {e}");
            None
        }
    }
}
