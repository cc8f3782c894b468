//! The row kernels on the pair counts they serve only when asked to (up to
//! 16 pairs; by default one), with the persistent and resident launches
//! off so that every scaling half-step runs them: a test binary of its
//! own, so that the limits are set before the process first reads them.

mod common;

use common::check_sizes_against_the_reference;
use gpu_waterz_transport::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_row_kernels_equal_the_reference_for_up_to_sixteen_pairs() {
    // SAFETY of the environment: this binary's only test sets it before
    // anything reads it.
    std::env::set_var(gpu::ROWS_MAX_PAIRS_ENV, "16");
    std::env::set_var(gpu::PERSISTENT_MAX_PAIRS_ENV, "0");
    std::env::set_var(gpu::RESIDENT_MAX_PAIRS_ENV, "0");
    let g = gpu_waterz_runtime::testing::gpu();
    check_sizes_against_the_reference(&g, &[(2, 300), (9, 129), (16, 200)]);
}
