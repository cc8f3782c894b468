//! The persistent scaling kernels (all iterations between checks in one
//! cooperative launch) on pair counts they serve only when asked to (up to
//! 16 pairs; by default four), with the resident kernels off: a test
//! binary of its own, so that the limits are set before the process first
//! reads them.

mod common;

use common::check_sizes_against_the_reference;
use gpu_waterz_transport::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_persistent_kernels_equal_the_reference_for_up_to_sixteen_pairs() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::PERSISTENT_MAX_PAIRS_ENV, "16");
    std::env::set_var(gpu::RESIDENT_MAX_PAIRS_ENV, "0");
    let g = gpu_waterz_runtime::testing::gpu();
    check_sizes_against_the_reference(&g, &[(1, 2), (3, 300), (9, 129), (16, 1000)]);
}
