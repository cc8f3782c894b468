//! Safe wrappers around the kernels: each checks what its kernel assumes,
//! then launches it on the [`Gpu`]'s stream.

use crate::gpu::{DeviceBuffer, Gpu, Param};
use crate::{DriverContext, Result};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_waterz_abi::ReduceParams;

/// Threads per block of the reduction kernels (a power of two).
const REDUCE_BLOCK: u32 = 256;

/// The exact sum of a device buffer of `u32`s, as a `u64`.
///
/// Runs the Rust kernel `sum_u32` (shared-memory tree per block, one global
/// atomic per block) and downloads the one result.
pub fn sum_u32(gpu: &Gpu, input: &DeviceBuffer<u32>) -> Result<u64> {
    let n = input.len() as u64;
    if n == 0 {
        return Ok(0);
    }
    let output = gpu.zeros::<u64>(1)?;
    let blocks_needed = n.div_ceil(REDUCE_BLOCK as u64);
    let max_blocks = gpu.multiprocessor_count()? as u64 * 8;
    let grid = blocks_needed.min(max_blocks) as u32;
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (REDUCE_BLOCK, 1, 1),
        shared_mem_bytes: REDUCE_BLOCK * 8,
    };
    let f = gpu.function("sum_u32")?;
    let params = Param(ReduceParams { n });
    let mut launch = gpu.stream().launch_builder(&f);
    launch.arg(&input.inner).arg(&params).arg(&output.inner);
    // SAFETY: `input` holds `n` u32s, `output` one zeroed u64; the block is
    // a power of two with `REDUCE_BLOCK * 8` bytes of shared memory, as
    // `sum_u32` requires.
    unsafe { launch.launch(cfg) }.context(|| "launching sum_u32".into())?;
    Ok(gpu.download(&output)?[0])
}
