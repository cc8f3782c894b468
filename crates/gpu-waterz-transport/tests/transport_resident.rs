//! The resident scaling kernels (each block's matrix rows in shared memory
//! for all iterations between checks) on the sizes they serve by default:
//! one to 32 pairs where the rows and vectors fit a block's shared memory
//! (float64 at 32 × 700 does not, and runs the plain launches).

mod common;

use common::check_sizes_against_the_reference;

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn the_resident_kernels_equal_the_reference_for_up_to_thirty_two_pairs() {
    let g = gpu_waterz_runtime::testing::gpu();
    check_sizes_against_the_reference(&g, &[(1, 2), (3, 300), (9, 129), (13, 1000), (32, 700)]);
}
