//! waterz's watershed on the GPU, exactly.
//!
//! 1. [`mask`]: each voxel's edge mask
//!    (`gpu_waterz_abi::watershed::steepest_mask`).
//! 2. [`plateau`]: the plateau corners in index order (waterz's initial
//!    queue), then a level-synchronous breadth-first search over mutual
//!    edges whose frontier keeps waterz's queue order: a voxel is queued by
//!    its earliest parent, and children of one parent follow direction
//!    order, so every voxel's position equals its position in waterz's FIFO
//!    queue.
//! 3. [`directions`]: each queued voxel keeps the direction waterz's queue
//!    would give it (`plateau_direction`).
//! 4. [`components`]: the basins are the weakly connected components of
//!    the remaining edges, as a union-find forest whose unions always link
//!    the larger root to the smaller, so each root is its component's
//!    smallest voxel: each tile of `8 × 8 × 32` voxels is joined in shared
//!    memory, then the tiles along their faces (global lock-free unions).
//! 5. [`labels`]: the components are numbered by that smallest voxel, as
//!    waterz's scan numbers them.

use gpu_waterz_abi::Dims3;

pub mod block;
pub mod components;
pub mod directions;
pub mod labels;
pub mod mask;
pub mod plateau;

/// `(z, y, x)` of voxel `i`, in 32-bit arithmetic (volumes on the GPU have
/// fewer than 2^32 voxels, which the host checks before any launch).
#[inline(always)]
pub fn coords(i: u64, dims: Dims3) -> (u64, u64, u64) {
    let (i, x_dim) = (i as u32, dims.x as u32);
    let row = i / x_dim;
    let x = i - row * x_dim;
    let z = row / dims.y as u32;
    let y = row - z * dims.y as u32;
    (z as u64, y as u64, x as u64)
}
