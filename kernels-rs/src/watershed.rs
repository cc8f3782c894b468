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
//!    edges ([`uf_init_min`], [`uf_jump`], [`uf_hook_min`]: a union-find forest that always links the
//!    larger root to the smaller, so each root is its component's smallest
//!    voxel), numbered by that smallest voxel, as waterz's scan numbers them
//!    ([`ws_root_flags`], scan, [`ws_labels`]).

use crate::device::*;
use gpu_waterz_abi::watershed::WatershedParams;
use gpu_waterz_abi::watershed::{is_mutual, neighbour, plateau_direction, steepest_mask, DIRECTION_BITS, OPPOSITE};
use gpu_waterz_abi::Dims3;

/// A voxel that was never queued.
pub const UNQUEUED: u32 = u32::MAX;

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
        let faces =
            gpu_waterz_abi::watershed::face_affinities_with(dims, z, y, x, params.aff_threshold_low, |c, j| unsafe {
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
        let faces =
            gpu_waterz_abi::watershed::face_affinities_with(dims, z, y, x, params.aff_threshold_low, |c, j| unsafe {
                *affs.add((c * n + j) as usize) as f32 / 255.0
            });
        let mask = steepest_mask(faces, params.aff_threshold_low, params.aff_threshold_high);
        // SAFETY: `i < n`.
        unsafe { *bits.add(i as usize) = mask };
    });
}

/// Flags the plateau corners that touch a plateau: voxels with a marked
/// face that the neighbour does not mark back, and one that it does. Only
/// such corners start waterz's queue in a way that matters: a corner with
/// no mutual edge pushes nobody, and no plateau voxel compares positions
/// with it, so leaving it out keeps every plateau voxel's relative position.
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
            *flags.add(i as usize) = (descends && plateau) as u32;
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
/// one direction waterz's queue gives it; so does a corner with no mutual
/// edge (which waterz queues too; every neighbour qualifies); a plateau
/// voxel the queue never reached (a closed plateau) keeps its mask.
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
            let mut nb = [0u8; 6];
            let mut no = [UNQUEUED; 6];
            let mut plateau = false;
            for d in 0..6 {
                if b & DIRECTION_BITS[d] != 0 {
                    let u = neighbour(i, d, dims) as usize;
                    nb[d] = *bits.add(u);
                    no[d] = *order.add(u);
                    plateau |= is_mutual(nb[d], d);
                }
            }
            let result = if o == UNQUEUED && plateau { b } else { plateau_direction(b, nb, no, o) };
            *out.add(i as usize) = result;
        }
    });
}

/// Starts the union-find forest: each voxel points at the smallest of
/// itself and the neighbours it shares a remaining edge with, in either
/// direction (a valid link: every pointer goes to a smaller voxel of the
/// same component).
///
/// # Safety
/// `edges` and `parent` hold one entry per voxel of `dims`.
///
/// # Parameters
/// - `edges`: remaining edge masks; `dims`; `parent`: output.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_init_min(edges: *const u8, dims: Dims3, parent: *mut u32) {
    let n = dims.z * dims.y * dims.x;
    grid_stride(n, |i| {
        // SAFETY: indices in bounds; marked neighbours are inside.
        unsafe {
            let b = *edges.add(i as usize);
            let (z, y, x) = coords(i, dims);
            let inside = [z > 0, y > 0, x > 0, z + 1 < dims.z, y + 1 < dims.y, x + 1 < dims.x];
            let mut p = i;
            for d in 0..6 {
                if !inside[d] {
                    continue;
                }
                let u = neighbour(i, d, dims);
                // An edge of this voxel, or one of the neighbour's pointing here.
                if b & DIRECTION_BITS[d] != 0 || *edges.add(u as usize) & DIRECTION_BITS[OPPOSITE[d]] != 0 {
                    p = p.min(u);
                }
            }
            *parent.add(i as usize) = p as u32;
        }
    });
}

/// One hooking pass over the remaining edges (FastSV-style): where an
/// edge's two voxels have different parents, the larger parent is pointed
/// at the smaller one with an atomic min, and `*changed` is set. Repeated
/// with [`uf_jump`] flattening in between until a pass changes nothing,
/// every component is one tree rooted at its smallest voxel. A min may
/// replace a link made in the same pass; the next pass, which looks at
/// every edge again, restores what that separated.
///
/// # Safety
/// `edges` and `parent` hold one entry per voxel of `dims`; `changed` is
/// one u32.
///
/// # Parameters
/// - `edges`: remaining edge masks; `dims`; `parent`: the forest;
///   `changed`: set to 1 when a pointer was lowered.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration; plain loads, one `red.min`
/// per edge whose trees differ.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_hook_min(edges: *const u8, dims: Dims3, parent: *mut u32, changed: *mut u32) {
    let n = dims.z * dims.y * dims.x;
    let mut moved = false;
    grid_stride(n, |i| {
        // SAFETY: indices in bounds; marked neighbours are inside; parents
        // index voxels.
        unsafe {
            let b = *edges.add(i as usize);
            if b == 0 {
                return;
            }
            let pi = *parent.add(i as usize);
            for d in 0..6 {
                if b & DIRECTION_BITS[d] != 0 {
                    let pu = *parent.add(neighbour(i, d, dims) as usize);
                    if pu != pi {
                        let (small, large) = if pi < pu { (pi, pu) } else { (pu, pi) };
                        atomic_min_u32(parent.add(large as usize), small);
                        moved = true;
                    }
                }
            }
        }
    });
    if moved {
        // SAFETY: `changed` is a valid u32.
        unsafe { core::ptr::write_volatile(changed, 1) };
    }
}

/// Hops per voxel in one [`uf_jump`] pass.
pub const JUMP_HOPS: u32 = 4;

/// One pointer-jumping pass: `parent[i] = parent^k(parent[i])` for up to
/// [`JUMP_HOPS`] hops; sets
/// `*changed` when any pointer moved. Repeated until nothing changes, every
/// voxel points at its root. Pointers only move to ancestors, so passes
/// may overlap their reads and writes safely.
///
/// # Safety
/// `parent` holds `n` u32s forming a forest; `changed` is one u32.
///
/// # Parameters
/// - `parent`, `n`; `changed`: set to 1 if a pointer moved.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_jump(parent: *mut u32, n: u64, changed: *mut u32) {
    let mut moved = false;
    grid_stride(n, |i| {
        // SAFETY: indices in bounds; parents index voxels. A stale read only
        // delays convergence: every value read is an ancestor.
        unsafe {
            // Up to JUMP_HOPS hops per pass: early hops hit nearby voxels
            // (cached), so a pass costs little more than one hop and the
            // number of passes drops.
            let start = *parent.add(i as usize);
            let mut p = start;
            for _ in 0..JUMP_HOPS {
                let grand = *parent.add(p as usize);
                if grand == p {
                    break;
                }
                p = grand;
            }
            if p != start {
                *parent.add(i as usize) = p;
                moved = true;
            }
        }
    });
    if moved {
        // SAFETY: `changed` is a valid u32.
        unsafe { core::ptr::write_volatile(changed, 1) };
    }
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

/// Gives root `roots[k]` the label `k + 1`.
///
/// # Safety
/// `roots` holds `n_roots` voxel indices below the length of `labels`.
///
/// # Parameters
/// - `roots`, `n_roots`: the component roots in index order; `labels`.
///
/// # Thread mapping
/// Grid-stride loop over the roots.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_root_labels(roots: *const u32, n_roots: u64, labels: *mut u32) {
    // SAFETY: `k < n_roots`; roots index voxels.
    grid_stride(n_roots, |k| unsafe { *labels.add(*roots.add(k as usize) as usize) = k as u32 + 1 });
}

/// Final labels: background 0, else the label of the component's root
/// (written by [`ws_root_labels`]).
///
/// # Safety
/// `edges`, `parent`, `labels` hold `n` entries; roots' labels are set.
///
/// # Parameters
/// - `edges`: remaining masks (0 = background); `parent`: compressed
///   forest; `labels`: completed in place.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_labels(edges: *const u8, parent: *const u32, n: u64, labels: *mut u32) {
    grid_stride(n, |i| {
        // SAFETY: indices in bounds; roots' labels were written by an
        // earlier launch.
        unsafe {
            let p = *parent.add(i as usize);
            if *edges.add(i as usize) == 0 {
                *labels.add(i as usize) = 0;
            } else if p != i as u32 {
                *labels.add(i as usize) = *labels.add(p as usize);
            }
        }
    });
}
