//! waterz's watershed on the GPU, exactly.
//!
//! 1. [`ws_mask_f32`]/[`ws_mask_u8`]: each voxel's edge mask
//!    (`gpu_waterz_abi::watershed::steepest_mask`).
//! 2. [`ws_corner_flags`] + compaction: the plateau corners in index order,
//!    waterz's initial queue.
//! 3. A level-synchronous breadth-first search over mutual edges whose
//!    frontier keeps waterz's queue order ([`ws_bfs_propose`],
//!    [`ws_bfs_claim`], scan, [`ws_bfs_emit`]): a voxel is queued by its
//!    earliest parent, and children of one parent follow direction order,
//!    so every voxel's position equals its position in waterz's FIFO queue.
//! 4. [`ws_plateau_direction`]: each queued voxel keeps the direction
//!    waterz's queue would give it (`plateau_direction`).
//! 5. The basins are the weakly connected components of the remaining
//!    edges ([`uf_hook`], [`uf_compress`]: union-find that always links the
//!    larger root to the smaller, so each root is its component's smallest
//!    voxel), numbered by that smallest voxel, as waterz's scan numbers them
//!    ([`ws_root_flags`], scan, [`ws_labels`]).

use crate::device::*;
use gpu_waterz_abi::watershed::{is_mutual, neighbour, plateau_direction, steepest_mask, DIRECTION_BITS};
use gpu_waterz_abi::watershed::WatershedParams;
use gpu_waterz_abi::Dims3;

/// A voxel that was never queued.
pub const UNQUEUED: u32 = u32::MAX;

#[inline(always)]
fn coords(i: u64, dims: Dims3) -> (u64, u64, u64) {
    let yx = dims.y * dims.x;
    (i / yx, (i % yx) / dims.x, i % dims.x)
}

/// Edge masks from float32 affinities.
///
/// # Safety
/// `affs` holds `3 * n` f32s (`(3, z, y, x)`, C order) with
/// `n = dims.z * dims.y * dims.x`; `bits` holds `n` u8s.
///
/// # Parameters
/// - `affs`, `dims`: the affinity graph; `params`: waterz's thresholds;
///   `bits`: each voxel's mask.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_mask_f32(affs: *const f32, dims: Dims3, params: WatershedParams, bits: *mut u8) {
    let n = dims.z * dims.y * dims.x;
    grid_stride(n, |i| {
        let (z, y, x) = coords(i, dims);
        // SAFETY: indices below `3 * n`.
        let faces = gpu_waterz_abi::watershed::face_affinities_with(dims, z, y, x, params.aff_threshold_low, |c, j| unsafe {
            *affs.add((c * n + j) as usize)
        });
        let mask = steepest_mask(faces, params.aff_threshold_low, params.aff_threshold_high);
        // SAFETY: `i < n`.
        unsafe { *bits.add(i as usize) = mask };
    });
}

/// Edge masks from uint8 affinities (`k / 255`).
///
/// # Safety
/// As [`ws_mask_f32`], with `3 * n` u8s.
///
/// # Parameters
/// As [`ws_mask_f32`].
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_mask_u8(affs: *const u8, dims: Dims3, params: WatershedParams, bits: *mut u8) {
    let n = dims.z * dims.y * dims.x;
    grid_stride(n, |i| {
        let (z, y, x) = coords(i, dims);
        // SAFETY: indices below `3 * n`.
        let faces = gpu_waterz_abi::watershed::face_affinities_with(dims, z, y, x, params.aff_threshold_low, |c, j| unsafe {
            *affs.add((c * n + j) as usize) as f32 / 255.0
        });
        let mask = steepest_mask(faces, params.aff_threshold_low, params.aff_threshold_high);
        // SAFETY: `i < n`.
        unsafe { *bits.add(i as usize) = mask };
    });
}

/// Flags the plateau corners: voxels with a marked face that the neighbour
/// does not mark back.
///
/// # Safety
/// `bits` and `flags` hold `n` entries for `dims`.
///
/// # Parameters
/// - `bits`, `dims`: edge masks; `flags`: 1 for corners, else 0.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_corner_flags(bits: *const u8, dims: Dims3, flags: *mut u32) {
    let n = dims.z * dims.y * dims.x;
    grid_stride(n, |i| {
        // SAFETY: `i < n`; a marked direction's neighbour is inside.
        unsafe {
            let b = *bits.add(i as usize);
            let mut corner = 0u32;
            for d in 0..6 {
                if b & DIRECTION_BITS[d] != 0 && !is_mutual(*bits.add(neighbour(i, d, dims) as usize), d) {
                    corner = 1;
                }
            }
            *flags.add(i as usize) = corner;
        }
    });
}

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
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_bfs_init(frontier: *const u32, f: u64, order: *mut u32) {
    // SAFETY: `k < f`, and frontier entries index `order`.
    grid_stride(f, |k| unsafe { *order.add(*frontier.add(k as usize) as usize) = k as u32 });
}

/// Each unqueued mutual neighbour of a frontier voxel records the earliest
/// frontier position that reaches it (`best`, u32 min).
///
/// # Safety
/// `frontier` holds `f` voxels; `bits`, `order`, `best` hold one entry per
/// voxel of `dims`; `best` starts at `u32::MAX`.
///
/// # Parameters
/// - `frontier`, `f`; `bits`, `dims`; `order`: queue positions so far;
///   `best`: earliest parent position per voxel.
///
/// # Thread mapping
/// Grid-stride loop over the frontier, six directions each.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_bfs_propose(
    frontier: *const u32,
    f: u64,
    bits: *const u8,
    dims: Dims3,
    order: *const u32,
    best: *mut u32,
) {
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
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_bfs_claim(
    frontier: *const u32,
    f: u64,
    bits: *const u8,
    dims: Dims3,
    order: *const u32,
    best: *const u32,
    flags: *mut u32,
) {
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

/// Appends the claimed voxels to the next frontier in (parent, direction)
/// order and gives them their queue positions.
///
/// # Safety
/// As [`ws_bfs_claim`]; `offsets` is the exclusive scan of `flags`;
/// `next` holds as many u32s as flags are set.
///
/// # Parameters
/// - `frontier`, `f`, `bits`, `dims`, `flags`, `offsets`;
///   `base`: queue position of the next frontier's first voxel;
///   `next`: the next frontier; `order`: queue positions.
///
/// # Thread mapping
/// Grid-stride loop over the frontier, six directions each.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_bfs_emit(
    frontier: *const u32,
    f: u64,
    dims: Dims3,
    flags: *const u32,
    offsets: *const u64,
    base: u64,
    next: *mut u32,
    order: *mut u32,
) {
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

/// The edges that remain after plateau division: a queued voxel keeps the
/// one direction waterz's queue gives it; others keep their mask.
///
/// # Safety
/// `bits`, `order`, `out` hold one entry per voxel of `dims`.
///
/// # Parameters
/// - `bits`: original masks; `order`: queue positions (`UNQUEUED`);
///   `out`: the remaining edges.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_plateau_direction(bits: *const u8, dims: Dims3, order: *const u32, out: *mut u8) {
    let n = dims.z * dims.y * dims.x;
    grid_stride(n, |i| {
        // SAFETY: indices in bounds; marked neighbours are inside.
        unsafe {
            let b = *bits.add(i as usize);
            let o = *order.add(i as usize);
            let result = if o == UNQUEUED {
                b
            } else {
                let mut nb = [0u8; 6];
                let mut no = [UNQUEUED; 6];
                for d in 0..6 {
                    if b & DIRECTION_BITS[d] != 0 {
                        let u = neighbour(i, d, dims) as usize;
                        nb[d] = *bits.add(u);
                        no[d] = *order.add(u);
                    }
                }
                plateau_direction(b, nb, no, o)
            };
            *out.add(i as usize) = result;
        }
    });
}

/// `parent[i] = i`.
///
/// # Safety
/// `parent` holds `n` u32s.
///
/// # Parameters
/// - `parent`, `n`.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_init(parent: *mut u32, n: u64) {
    // SAFETY: `i < n`.
    grid_stride(n, |i| unsafe { *parent.add(i as usize) = i as u32 });
}

#[inline(always)]
unsafe fn find(parent: *mut u32, mut x: u32) -> u32 {
    loop {
        // SAFETY: the caller passes a valid parent array; x is a voxel.
        let p = unsafe { load_volatile_u32(parent.add(x as usize)) };
        if p == x {
            return x;
        }
        x = p;
    }
}

/// Joins each voxel with the neighbours its remaining edges point to;
/// roots always link to the smaller root.
///
/// # Safety
/// `edges` and `parent` hold one entry per voxel of `dims`.
///
/// # Parameters
/// - `edges`: remaining edge masks; `dims`; `parent`: the union-find forest.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration; lock-free with CAS.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_hook(edges: *const u8, dims: Dims3, parent: *mut u32) {
    let n = dims.z * dims.y * dims.x;
    grid_stride(n, |i| {
        // SAFETY: indices in bounds.
        unsafe {
            let b = *edges.add(i as usize);
            for d in 0..6 {
                if b & DIRECTION_BITS[d] == 0 {
                    continue;
                }
                let mut a = i as u32;
                let mut c = neighbour(i, d, dims) as u32;
                loop {
                    let ra = find(parent, a);
                    let rc = find(parent, c);
                    if ra == rc {
                        break;
                    }
                    let (small, large) = if ra < rc { (ra, rc) } else { (rc, ra) };
                    let old = atomic_cas_u32(parent.add(large as usize), large, small);
                    if old == large {
                        break;
                    }
                    a = small;
                    c = old;
                }
            }
        }
    });
}

/// Points every voxel straight at its root.
///
/// # Safety
/// `parent` holds `n` u32s forming a forest.
///
/// # Parameters
/// - `parent`, `n`.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_compress(parent: *mut u32, n: u64) {
    grid_stride(n, |i| {
        // SAFETY: indices in bounds.
        unsafe {
            let r = find(parent, i as u32);
            *parent.add(i as usize) = r;
        }
    });
}

/// Flags the roots of non-background components.
///
/// # Safety
/// `edges`, `parent`, `flags` hold `n` entries.
///
/// # Parameters
/// - `edges`: remaining masks (0 = background); `parent`: compressed forest; `flags`.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_root_flags(edges: *const u8, parent: *const u32, n: u64, flags: *mut u32) {
    grid_stride(n, |i| {
        // SAFETY: `i < n`.
        unsafe {
            *flags.add(i as usize) = (*edges.add(i as usize) != 0 && *parent.add(i as usize) == i as u32) as u32;
        }
    });
}

/// Final labels: background 0, else 1 + the rank of the component's root.
///
/// # Safety
/// `edges`, `parent`, `ranks` (exclusive scan of the root flags), `labels`
/// hold `n` entries.
///
/// # Parameters
/// - inputs as above; `labels`: output.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_labels(edges: *const u8, parent: *const u32, ranks: *const u64, n: u64, labels: *mut u32) {
    grid_stride(n, |i| {
        // SAFETY: indices in bounds.
        unsafe {
            let l = if *edges.add(i as usize) == 0 {
                0
            } else {
                *ranks.add(*parent.add(i as usize) as usize) as u32 + 1
            };
            *labels.add(i as usize) = l;
        }
    });
}
