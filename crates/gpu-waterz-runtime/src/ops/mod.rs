//! Safe wrappers around the kernels: each checks what its kernel assumes
//! (buffer lengths, sizes), then launches it on the [`Gpu`]'s stream. Stage
//! crates compose these; they hold no `unsafe` themselves.

use crate::gpu::{DeviceBuffer, Gpu, Param};
use crate::{Result, RuntimeError};
use cudarc::driver::LaunchConfig;
use gpu_waterz_abi::ReduceParams;

pub mod graph;
pub mod parhac;
pub mod primitives;
pub mod watershed;

pub use primitives::{exclusive_scan, radix_sort_pairs, reduce_by_key, ReducedRuns};

/// Threads per block of grid-stride kernels.
pub(crate) const BLOCK: u32 = 256;

/// Launches kernel `$name` with `$cfg` and the listed arguments.
///
/// Every use states, in a `// SAFETY:` comment, why the kernel's documented
/// preconditions hold.
macro_rules! launch {
    ($gpu:expr, $name:literal, $cfg:expr, $($arg:expr),* $(,)?) => {{
        let f = $gpu.function($name)?;
        let mut builder = $gpu.stream().launch_builder(&f);
        $( cudarc::driver::PushKernelArg::arg(&mut builder, $arg); )*
        // SAFETY: the caller checked the kernel's preconditions (see the
        // `// SAFETY:` comment at the call site).
        crate::DriverContext::context(unsafe { builder.launch($cfg) }, || format!("launching {}", $name))?;
    }};
}
pub(crate) use launch;

/// A grid-stride launch over `n` items.
pub(crate) fn grid_stride_config(gpu: &Gpu, n: u64) -> Result<LaunchConfig> {
    let blocks = n.div_ceil(BLOCK as u64).max(1);
    let max_blocks = gpu.multiprocessor_count() as u64 * 32;
    Ok(LaunchConfig { grid_dim: (blocks.min(max_blocks) as u32, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 })
}

/// A launch of one block per tile of `tile` items.
pub(crate) fn tiled_config(n: u64, tile: u64, threads: u32, shared_bytes: u32) -> Result<LaunchConfig> {
    let tiles = n.div_ceil(tile).max(1);
    if tiles > i32::MAX as u64 {
        return Err(RuntimeError::InvalidLaunch { kernel: "tiled", reason: format!("{n} items need {tiles} blocks") });
    }
    Ok(LaunchConfig { grid_dim: (tiles as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared_bytes })
}

/// Fails unless `buffer` holds at least `needed` elements.
pub(crate) fn check_len<T>(kernel: &'static str, what: &str, buffer: &DeviceBuffer<T>, needed: u64) -> Result<()> {
    if (buffer.len() as u64) < needed {
        return Err(RuntimeError::InvalidLaunch {
            kernel,
            reason: format!("{what} holds {} elements, {needed} are needed", buffer.len()),
        });
    }
    Ok(())
}

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
    let max_blocks = gpu.multiprocessor_count() as u64 * 8;
    let cfg = LaunchConfig {
        grid_dim: (blocks_needed.min(max_blocks) as u32, 1, 1),
        block_dim: (REDUCE_BLOCK, 1, 1),
        shared_mem_bytes: REDUCE_BLOCK * 8,
    };
    let params = Param(ReduceParams { n });
    // SAFETY: `input` holds `n` u32s, `output` one zeroed u64; the block is
    // a power of two with `REDUCE_BLOCK * 8` bytes of shared memory.
    launch!(gpu, "sum_u32", cfg, &input.inner, &params, &output.inner);
    Ok(gpu.download(&output)?[0])
}
