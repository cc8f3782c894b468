//! Reductions. `sum_u32` is the foundation's smoke kernel: it exercises
//! dynamic shared memory, barriers and global atomics in one launch.

use crate::device::{atomic_add_u64, block_dim_x, block_idx_x, dynamic_shared, grid_dim_x, sync_threads, thread_idx_x};
use gpu_waterz_abi::SumU32Args;

kernel! {
    /// Sums `n` `u32` values into one `u64`, exactly.
    ///
    /// # Safety
    /// - `input` points to `n` readable `u32`s in device memory.
    /// - `output` points to one `u64` in device memory, zeroed before the launch.
    /// - The block size is a power of two, at most 1024, and the launch provides
    ///   `block_dim.x * 8` bytes of dynamic shared memory.
    ///
    /// # Parameters
    /// - `input`: the values.
    /// - `n`: how many there are.
    /// - `output`: receives the sum (accumulated with atomics across blocks).
    ///
    /// # Thread mapping
    /// A grid-stride loop: thread `t` of block `b` adds elements
    /// `b * block_dim + t + k * grid_dim * block_dim`. Each block then reduces its
    /// partial sums in shared memory by halving, and thread 0 adds the block's
    /// total to `output` with one atomic.
    pub unsafe extern "ptx-kernel" fn sum_u32(input: *const u32, n: u64, output: *mut u64) as SumU32Args {
        let tid = thread_idx_x();
        let block_dim = block_dim_x();
        let stride = (grid_dim_x() as u64) * (block_dim as u64);
        let mut i = (block_idx_x() as u64) * (block_dim as u64) + tid as u64;
        let mut partial = 0u64;
        while i < n {
            // SAFETY: `i < n`, and `input` holds `n` values.
            partial += unsafe { *input.add(i as usize) } as u64;
            i += stride;
        }
        let shared = dynamic_shared::<u64>();
        // SAFETY: the launch provides `block_dim` u64s of shared memory.
        unsafe { *shared.add(tid as usize) = partial };
        // SAFETY: every thread of the block reaches the barrier.
        unsafe { sync_threads() };
        let mut half = block_dim / 2;
        while half > 0 {
            if tid < half {
                // SAFETY: both indices are below `block_dim`.
                unsafe { *shared.add(tid as usize) += *shared.add((tid + half) as usize) };
            }
            // SAFETY: the loop bound is uniform across the block.
            unsafe { sync_threads() };
            half /= 2;
        }
        if tid == 0 {
            // SAFETY: `output` is a valid u64 in global memory.
            unsafe { atomic_add_u64(output, *shared) };
        }
    }
}
