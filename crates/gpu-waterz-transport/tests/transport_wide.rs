//! The wide float32 scaling kernel (128 × 128 tiles, `mma.sync`; on
//! compute capability 9.0 the warpgroup kernel is turned off for it) on
//! pair counts it serves only when asked to (by default from 64 pairs):
//! ragged tiles,
//! one split (the block updates) and more (the finish kernel updates). A
//! test binary of its own, so that the limit is set before the process
//! first reads it.

mod common;

use common::check_sizes_against_the_reference;
use gpu_waterz_transport::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_wide_kernel_equals_the_reference_from_two_pairs_on() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::WIDE_MIN_PAIRS_ENV, "2");
    std::env::set_var(gpu::WGMMA_ENV, "0");
    let g = gpu_waterz_runtime::testing::gpu();
    check_sizes_against_the_reference(
        &g,
        &[(2, 300), (9, 129), (40, 1000), (129, 7), (257, 130), (300, 513), (600, 700), (1000, 600)],
    );
}
