//! The thin layer over rustc's nvptx intrinsics that the kernels use:
//! thread indices, barriers, shared memory and GPU-scope atomics.

use core::arch::nvptx;

/// The thread's index within its block along x.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// The block's index within the grid along x.
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// The number of threads per block along x.
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_dim_x() as u32 }
}

/// The number of blocks in the grid along x.
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// Waits until every thread of the block has reached this point and their
/// shared-memory writes are visible.
///
/// # Safety
/// Every thread of the block must reach the same call (no divergence).
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller guarantees convergence.
    unsafe { nvptx::_syncthreads() }
}

/// The block's dynamic shared memory, as launched (`shared_mem_bytes`).
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}

/// Adds `value` to `*address` atomically at GPU scope, discarding the old
/// value (PTX `red.relaxed.gpu.global.add.u64`).
///
/// # Safety
/// `address` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_add_u64(address: *mut u64, value: u64) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        core::arch::asm!(
            "red.relaxed.gpu.global.add.u64 [{a}], {v};",
            a = in(reg64) address,
            v = in(reg64) value,
            options(nostack)
        );
    }
}

/// Stops the kernel with an error (PTX `trap`).
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` aborts the kernel; it has no other effect.
    unsafe { nvptx::trap() }
}
