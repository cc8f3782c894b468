//! Step 2: the plateau corners in index order (waterz's initial queue) and
//! the ordered level-synchronous breadth-first search over mutual edges
//! that reproduces waterz's queue positions.
//!
//! The masks these kernels read never mark a face that leaves the volume
//! (the host checks the thresholds before computing them), so a marked
//! direction's neighbour is always a voxel of the volume.

use crate::device::*;
use crate::primitives::{tile_compact, tile_sum};
use gpu_waterz_abi::watershed::{
    is_mutual, neighbour, WsBfsClaimArgs, WsBfsEmitArgs, WsBfsInitArgs, WsBfsProposeArgs, WsCornerCompactArgs,
    WsCornerCountArgs, DIRECTION_BITS, UNQUEUED,
};
use gpu_waterz_abi::Dims3;

/// Whether voxel `i` is a plateau corner (see [`ws_corner_count`]).
///
/// # Safety
/// `bits` holds one mask per voxel of `dims`, none marking a face out of
/// the volume; `i` indexes one.
#[inline(always)]
unsafe fn is_corner(bits: *const u8, dims: Dims3, i: u64) -> bool {
    // SAFETY: `i < n`; a marked direction's neighbour is inside.
    unsafe {
        let b = *bits.add(i as usize);
        let (mut descends, mut plateau) = (false, false);
        for d in 0..6 {
            if b & DIRECTION_BITS[d] != 0 {
                if is_mutual(*bits.add(neighbour(i, d, dims) as usize), d) {
                    plateau = true;
                } else {
                    descends = true;
                }
            }
        }
        descends && plateau
    }
}

kernel! {
    /// Counts, per scan tile, the plateau corners that touch a plateau: voxels with a marked
    /// face that the neighbour does not mark back, and one that it does. Only
    /// such corners start waterz's queue in a way that matters: a corner with
    /// no mutual edge pushes nobody, and no plateau voxel compares positions
    /// with it, so leaving it out keeps every plateau voxel's relative position.
    ///
    /// # Safety
    /// `bits` holds one mask per voxel of `dims` (`n < 2^32` voxels), none
    /// marking a face out of the volume; `tile_sums` one u64 per scan tile;
    /// launched like `scan_tile_sums`.
    ///
    /// # Parameters
    /// - `bits`, `dims`: edge masks; `tile_sums`: each tile's corner count.
    ///
    /// # Thread mapping
    /// Block `b` owns scan tile `b` (`SCAN_TILE` voxels), thread `t` its
    /// voxels `t * SCAN_ITEMS ..`.
    pub unsafe extern "ptx-kernel" fn ws_corner_count(
        bits: *const u8,
        dims: gpu_waterz_abi::Dims3,
        tile_sums: *mut u64,
    ) as WsCornerCountArgs {
        let n = dims.z * dims.y * dims.x;
        // SAFETY: launched as documented; `i < n`.
        unsafe { tile_sum(n, |i| is_corner(bits, dims, i) as u64, tile_sums) }
    }
}

kernel! {
    /// Writes the plateau corners' indices in index order (waterz's initial
    /// queue), after [`ws_corner_count`] and an exclusive scan of its counts.
    ///
    /// # Safety
    /// As [`ws_corner_count`]; `tile_offsets` is the scan of its counts and
    /// `corners` holds one u32 per corner.
    ///
    /// # Parameters
    /// - `bits`, `dims`: edge masks; `tile_offsets`; `corners`: the corners.
    ///
    /// # Thread mapping
    /// As [`ws_corner_count`].
    pub unsafe extern "ptx-kernel" fn ws_corner_compact(
        bits: *const u8,
        dims: gpu_waterz_abi::Dims3,
        tile_offsets: *const u64,
        corners: *mut u32,
    ) as WsCornerCompactArgs {
        let n = dims.z * dims.y * dims.x;
        // SAFETY: launched as documented; positions stay below the corner count.
        unsafe {
            tile_compact(n, |i| is_corner(bits, dims, i), tile_offsets, |i, pos| *corners.add(pos as usize) = i as u32)
        }
    }
}

kernel! {
    /// Queue positions of the first frontier: `order[frontier[k]] = k`.
    ///
    /// # Safety
    /// `frontier` holds `f` voxel indices below the length of `order`.
    ///
    /// # Parameters
    /// - `frontier`, `f`: the corners in index order; `order`: queue positions.
    ///
    /// # Thread mapping
    /// Grid-stride loop over the frontier.
    pub unsafe extern "ptx-kernel" fn ws_bfs_init(frontier: *const u32, f: u64, order: *mut u32) as WsBfsInitArgs {
        // SAFETY: `k < f`, and frontier entries index `order`.
        grid_stride(f, |k| unsafe { *order.add(*frontier.add(k as usize) as usize) = k as u32 });
    }
}

kernel! {
    /// Each unqueued mutual neighbour of a frontier voxel records the earliest
    /// frontier position that reaches it (`best`, u32 min).
    ///
    /// # Safety
    /// `frontier` holds `f` voxels of `dims`; `bits`, `order`, `best` hold one
    /// entry per voxel of `dims`, no mask marking a face out of the volume;
    /// `best` starts at `UNQUEUED`.
    ///
    /// # Parameters
    /// - `frontier`, `f`; `bits`, `dims`; `order`: queue positions so far;
    ///   `best`: earliest parent position per voxel.
    ///
    /// # Thread mapping
    /// Grid-stride loop over the frontier, six directions each.
    pub unsafe extern "ptx-kernel" fn ws_bfs_propose(
        frontier: *const u32,
        f: u64,
        bits: *const u8,
        dims: gpu_waterz_abi::Dims3,
        order: *const u32,
        best: *mut u32,
    ) as WsBfsProposeArgs {
        grid_stride(f, |k| {
            // SAFETY: indices in bounds as documented.
            unsafe {
                let p = *frontier.add(k as usize) as u64;
                let b = *bits.add(p as usize);
                for d in 0..6 {
                    if b & DIRECTION_BITS[d] != 0 {
                        let u = neighbour(p, d, dims);
                        if is_mutual(*bits.add(u as usize), d) && *order.add(u as usize) == UNQUEUED {
                            atomic_min_u32(best.add(u as usize), k as u32);
                        }
                    }
                }
            }
        });
    }
}

kernel! {
    /// Flags the (frontier position, direction) pairs that queue a voxel:
    /// `flags[6 k + d] = 1` when frontier voxel `k` is the earliest parent of
    /// its neighbour in direction `d`.
    ///
    /// # Safety
    /// As [`ws_bfs_propose`]; `flags` holds `6 f` u32s.
    ///
    /// # Parameters
    /// As [`ws_bfs_propose`], plus `flags`.
    ///
    /// # Thread mapping
    /// Grid-stride loop over the frontier, six directions each.
    pub unsafe extern "ptx-kernel" fn ws_bfs_claim(
        frontier: *const u32,
        f: u64,
        bits: *const u8,
        dims: gpu_waterz_abi::Dims3,
        order: *const u32,
        best: *const u32,
        flags: *mut u32,
    ) as WsBfsClaimArgs {
        grid_stride(f, |k| {
            // SAFETY: indices in bounds as documented.
            unsafe {
                let p = *frontier.add(k as usize) as u64;
                let b = *bits.add(p as usize);
                for d in 0..6 {
                    let mut claim = 0u32;
                    if b & DIRECTION_BITS[d] != 0 {
                        let u = neighbour(p, d, dims);
                        if is_mutual(*bits.add(u as usize), d)
                            && *order.add(u as usize) == UNQUEUED
                            && *best.add(u as usize) == k as u32
                        {
                            claim = 1;
                        }
                    }
                    *flags.add((6 * k + d as u64) as usize) = claim;
                }
            }
        });
    }
}

kernel! {
    /// Appends the claimed voxels to the next frontier in (parent, direction)
    /// order and gives them their queue positions.
    ///
    /// # Safety
    /// As [`ws_bfs_claim`], whose `flags` this reads: a flag is set only
    /// where a marked direction leads; `offsets` is the exclusive scan of
    /// `flags`; `next` holds as many u32s as flags are set.
    ///
    /// # Parameters
    /// - `frontier`, `f`, `dims`, `flags`, `offsets`;
    ///   `base`: queue position of the next frontier's first voxel;
    ///   `next`: the next frontier; `order`: queue positions.
    ///
    /// # Thread mapping
    /// Grid-stride loop over the frontier, six directions each.
    pub unsafe extern "ptx-kernel" fn ws_bfs_emit(
        frontier: *const u32,
        f: u64,
        dims: gpu_waterz_abi::Dims3,
        flags: *const u32,
        offsets: *const u64,
        base: u64,
        next: *mut u32,
        order: *mut u32,
    ) as WsBfsEmitArgs {
        grid_stride(f, |k| {
            // SAFETY: indices in bounds as documented.
            unsafe {
                let p = *frontier.add(k as usize) as u64;
                for d in 0..6 {
                    let slot = (6 * k + d as u64) as usize;
                    if *flags.add(slot) != 0 {
                        let u = neighbour(p, d, dims);
                        let pos = *offsets.add(slot);
                        *next.add(pos as usize) = u as u32;
                        *order.add(u as usize) = (base + pos) as u32;
                    }
                }
            }
        });
    }
}
