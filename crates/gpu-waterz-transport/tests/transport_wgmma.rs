//! Hopper's warpgroup scaling kernel (64 × 128 tiles, `wgmma`, sm_90a) on
//! pair counts it serves only when asked to (by default from 64 pairs):
//! ragged tiles, one split (the block updates) and more (the finish
//! kernel updates), chunks cut short by `d`. A test binary of its own, so
//! that the limit is set before the process first reads it. On a GPU other
//! than compute capability 9.0 the kernel cannot run, and the test says so
//! and fails.

mod common;

use common::check_sizes_against_the_reference;
use gpu_waterz_transport::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU of compute capability 9.0: run with --include-ignored (cargo xtask gpu-test)"]
fn the_warpgroup_kernel_equals_the_reference_from_two_pairs_on() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::WIDE_MIN_PAIRS_ENV, "2");
    let g = gpu_waterz_runtime::testing::gpu();
    assert_eq!(g.compute_capability().unwrap(), (9, 0), "the warpgroup kernel runs on compute capability 9.0 only");
    assert!(g.sm90a_kernels().unwrap(), "a 9.0 device loads the sm_90a cubin");
    check_sizes_against_the_reference(
        &g,
        &[(2, 300), (9, 129), (40, 1000), (129, 7), (257, 130), (300, 513), (600, 700), (1000, 600), (130, 33)],
    );
}
