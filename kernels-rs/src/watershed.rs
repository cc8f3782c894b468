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
//!    edges, as a union-find forest whose unions always link the larger
//!    root to the smaller, so each root is its component's smallest voxel:
//!    [`uf_tile_local`] joins each tile of `8 × 8 × 32` voxels in shared
//!    memory, [`uf_tile_faces`] joins the tiles along their faces (global
//!    lock-free unions). They are numbered by that smallest voxel, as
//!    waterz's scan numbers them ([`ws_fragment_count`], scan,
//!    [`ws_fragment_number`], [`ws_labels`]).

use crate::device::*;
use crate::primitives::{tile_compact, tile_sum};
use gpu_waterz_abi::watershed::WatershedParams;
use gpu_waterz_abi::watershed::{
    is_mutual, joined, neighbour, plateau_direction, steepest_mask, uf_tile_offset, uf_tile_origin, DIRECTION_BITS,
    UF_THREADS, UF_TILE, UF_TILE_X, UF_TILE_Y, UF_TILE_Z,
};
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

/// Whether voxel `i` is a plateau corner (see [`ws_corner_count`]).
///
/// # Safety
/// `bits` holds one mask per voxel of `dims`; `i` indexes one.
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

/// Counts, per scan tile, the plateau corners that touch a plateau: voxels with a marked
/// face that the neighbour does not mark back, and one that it does. Only
/// such corners start waterz's queue in a way that matters: a corner with
/// no mutual edge pushes nobody, and no plateau voxel compares positions
/// with it, so leaving it out keeps every plateau voxel's relative position.
///
/// # Safety
/// `bits` holds one mask per voxel of `dims`; `tile_sums` one u64 per
/// scan tile; launched like `scan_tile_sums`.
///
/// # Parameters
/// - `bits`, `dims`: edge masks; `tile_sums`: each tile's corner count.
///
/// # Thread mapping
/// Block `b` owns scan tile `b` (`SCAN_TILE` voxels), thread `t` its
/// voxels `t * SCAN_ITEMS ..`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_corner_count(bits: *const u8, dims: Dims3, tile_sums: *mut u64) {
    let n = dims.z * dims.y * dims.x;
    // SAFETY: launched as documented; `i < n`.
    unsafe { tile_sum(n, |i| is_corner(bits, dims, i) as u64, tile_sums) }
}

/// Writes the plateau corners' indices in index order (waterz's initial
/// queue), after [`ws_corner_count`] and an exclusive scan of its counts.
///
/// # Safety
/// As [`ws_corner_count`]; `tile_offsets` is the scan of its counts and
/// `out` holds one u32 per corner.
///
/// # Parameters
/// - `bits`, `dims`: edge masks; `tile_offsets`; `out`: the corners.
///
/// # Thread mapping
/// As [`ws_corner_count`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_corner_compact(
    bits: *const u8,
    dims: Dims3,
    tile_offsets: *const u64,
    out: *mut u32,
) {
    let n = dims.z * dims.y * dims.x;
    // SAFETY: launched as documented; positions stay below the corner count.
    unsafe { tile_compact(n, |i| is_corner(bits, dims, i), tile_offsets, |i, pos| *out.add(pos as usize) = i as u32) }
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
            let mut nb = [0u8; 6];
            let mut plateau = false;
            for d in 0..6 {
                if b & DIRECTION_BITS[d] != 0 {
                    nb[d] = *bits.add(neighbour(i, d, dims) as usize);
                    plateau |= is_mutual(nb[d], d);
                }
            }
            // Queue positions only matter on plateaus: elsewhere every
            // marked face descends and the last one is kept.
            let result = if !plateau {
                plateau_direction(b, nb, [UNQUEUED; 6], UNQUEUED)
            } else {
                let o = *order.add(i as usize);
                if o == UNQUEUED {
                    b
                } else {
                    let mut no = [UNQUEUED; 6];
                    for d in 0..6 {
                        if b & DIRECTION_BITS[d] != 0 {
                            no[d] = *order.add(neighbour(i, d, dims) as usize);
                        }
                    }
                    plateau_direction(b, nb, no, o)
                }
            };
            *out.add(i as usize) = result;
        }
    });
}

/// The root of `x` in a forest where every pointer goes to a smaller
/// index, halving the path on the way: each visited entry is lowered to
/// its grandparent, an ancestor, with `lower` (an atomic min, so that the
/// only writes that race with other threads are atomics, and a halving
/// never undoes a concurrent union's lower pointer).
///
/// # Safety
/// `parent` indexes a forest that other threads change only by lowering
/// entries to ancestors or roots to other roots (atomic mins); `lower` is
/// an atomic min at a scope covering every thread using `parent`.
#[inline(always)]
unsafe fn find_halving(parent: *mut u32, mut x: u32, lower: &impl Fn(*mut u32, u32)) -> u32 {
    // SAFETY: the caller guarantees a forest over valid indices.
    unsafe {
        let mut p = load_volatile_u32(parent.add(x as usize));
        while p != x {
            let grand = load_volatile_u32(parent.add(p as usize));
            if grand != p {
                lower(parent.add(x as usize), grand);
            }
            x = p;
            p = grand;
        }
        x
    }
}

/// Joins the trees of `a` and `b`: the larger root is pointed at the
/// smaller with an atomic min; if another thread changed that root first,
/// the union retries from its new parent. Lock-free; afterwards `a` and `b`
/// share a root, the smallest index of the joined trees.
///
/// # Safety
/// As [`find_halving`]; `fetch_min` is an atomic min returning the old
/// value, and `lower` one without, at a scope that covers every thread
/// using `parent`.
#[inline(always)]
unsafe fn union(
    parent: *mut u32,
    mut a: u32,
    mut b: u32,
    fetch_min: impl Fn(*mut u32, u32) -> u32,
    lower: impl Fn(*mut u32, u32),
) {
    // SAFETY: the caller guarantees a forest over valid indices.
    unsafe {
        loop {
            a = find_halving(parent, a, &lower);
            b = find_halving(parent, b, &lower);
            if a == b {
                return;
            }
            let (small, large) = if a < b { (a, b) } else { (b, a) };
            let old = fetch_min(parent.add(large as usize), small);
            if old == large {
                return;
            }
            // `large` stopped being a root: join its new parent instead.
            a = old;
            b = small;
        }
    }
}

/// Components, step 1: the voxels of one tile (`UF_TILE_Z × UF_TILE_Y ×
/// UF_TILE_X`) are joined along the remaining edges inside the tile, in
/// shared memory; each voxel's parent becomes the smallest voxel of its
/// component within the tile (in tile order, which is index order).
///
/// # Safety
/// `edges` and `parent` hold one entry per voxel of `dims`; launched with
/// `UF_THREADS` threads, one block per tile of `uf_tile_grid(dims)` (C
/// order), and `UF_SHARED_BYTES` of dynamic shared memory.
///
/// # Parameters
/// - `edges`: the remaining edge masks after plateau division; `dims`;
///   `parent`: written for every voxel (a global voxel index).
///
/// # Thread mapping
/// Block `b` owns tile `b`; thread `t` owns tile voxels `t + k *
/// UF_THREADS` (a warp reads one row of 32 voxels).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_tile_local(edges: *const u8, dims: Dims3, parent: *mut u32) {
    let tile = UF_TILE as u32;
    let shared_parent = dynamic_shared::<u32>();
    // SAFETY: the launch gives `2 * UF_TILE` u32s of shared memory.
    let shared_bits = unsafe { shared_parent.add(UF_TILE as usize) };
    let (z0, y0, x0) = uf_tile_origin(block_idx_x() as u64, dims);
    let t = thread_idx_x();
    let [sz, sy, _] = dims.strides();
    let global = |local: u32| -> Option<u64> {
        let (lz, ly, lx) = uf_tile_offset(local as u64);
        let (z, y, x) = (z0 + lz, y0 + ly, x0 + lx);
        (z < dims.z && y < dims.y && x < dims.x).then(|| z * sz + y * sy + x)
    };
    // Local neighbour of `local` in direction `d`, if inside the tile.
    let local_neighbour = |local: u32, d: usize| -> Option<u32> {
        let (lz, ly, lx) = uf_tile_offset(local as u64);
        let inside = match d {
            0 => lz > 0,
            1 => ly > 0,
            2 => lx > 0,
            3 => lz + 1 < UF_TILE_Z,
            4 => ly + 1 < UF_TILE_Y,
            _ => lx + 1 < UF_TILE_X,
        };
        let step = [UF_TILE_Y * UF_TILE_X, UF_TILE_X, 1][d % 3] as u32;
        inside.then(|| if d < 3 { local - step } else { local + step })
    };
    // SAFETY: shared indices stay below UF_TILE; global indices are inside
    // the volume; every thread reaches every barrier.
    unsafe {
        let mut local = t;
        while local < tile {
            let bits = match global(local) {
                Some(g) => *edges.add(g as usize),
                None => 0,
            };
            *shared_bits.add(local as usize) = bits as u32;
            local += UF_THREADS;
        }
        sync_threads();
        // Start from the smallest joined neighbour: most trees are then
        // complete before any union.
        let mut local = t;
        while local < tile {
            let bits = *shared_bits.add(local as usize) as u8;
            let mut p = local;
            for d in 0..6 {
                if let Some(m) = local_neighbour(local, d) {
                    if joined(bits, *shared_bits.add(m as usize) as u8, d) {
                        p = p.min(m);
                    }
                }
            }
            *shared_parent.add(local as usize) = p;
            local += UF_THREADS;
        }
        sync_threads();
        let mut local = t;
        while local < tile {
            let bits = *shared_bits.add(local as usize) as u8;
            for d in 0..3 {
                if let Some(m) = local_neighbour(local, d) {
                    // An edge that a starting link already follows needs no
                    // union (links only move to ancestors, so a link that
                    // still holds was there from the start).
                    let linked = load_volatile_u32(shared_parent.add(local as usize)) == m
                        || load_volatile_u32(shared_parent.add(m as usize)) == local;
                    if !linked && joined(bits, *shared_bits.add(m as usize) as u8, d) {
                        union(
                            shared_parent,
                            local,
                            m,
                            |a, v| shared_atomic_fetch_min_u32(a, v),
                            |a, v| shared_atomic_min_u32(a, v),
                        );
                    }
                }
            }
            local += UF_THREADS;
        }
        sync_threads();
        let mut local = t;
        while local < tile {
            if let Some(g) = global(local) {
                let root = find_halving(shared_parent, local, &|a, v| shared_atomic_min_u32(a, v));
                *parent.add(g as usize) = global(root).unwrap_or(g) as u32;
            }
            local += UF_THREADS;
        }
    }
}

/// Components, step 2: joins the tiles along their faces. Each block
/// visits the faces its tile shares with the tiles before it along z, y
/// and x, and joins the trees of every pair of voxels an edge crosses
/// (global memory, lock-free unions). Afterwards every component is one
/// tree rooted at its smallest voxel.
///
/// # Safety
/// `edges` and `parent` hold one entry per voxel of `dims`; `parent` is
/// the output of [`uf_tile_local`]; launched with `UF_THREADS` threads, one
/// block per tile.
///
/// # Parameters
/// - `edges`: remaining edge masks; `dims`; `parent`: the forest.
///
/// # Thread mapping
/// Block `b` owns tile `b`; thread `t` visits voxel `t` of each of the
/// tile's three low faces (the x face has `UF_TILE_Z * UF_TILE_Y` voxels).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn uf_tile_faces(edges: *const u8, dims: Dims3, parent: *mut u32) {
    let (z0, y0, x0) = uf_tile_origin(block_idx_x() as u64, dims);
    let t = thread_idx_x() as u64;
    let lane = thread_idx_x() % 32;
    let [sz, sy, _] = dims.strides();
    for d in 0..3 {
        // This thread's voxel on the tile's low face along axis `d`.
        let (z, y, x, on_face) = match d {
            0 => (z0, y0 + t / UF_TILE_X, x0 + t % UF_TILE_X, z0 > 0 && t < UF_TILE_Y * UF_TILE_X),
            1 => (z0 + t / UF_TILE_X, y0, x0 + t % UF_TILE_X, y0 > 0 && t < UF_TILE_Z * UF_TILE_X),
            _ => (z0 + t / UF_TILE_Y, y0 + t % UF_TILE_Y, x0, x0 > 0 && t < UF_TILE_Z * UF_TILE_Y),
        };
        let active = on_face && z < dims.z && y < dims.y && x < dims.x;
        let g = z * sz + y * sy + x;
        // SAFETY: an active voxel and its neighbour before it along the
        // face's axis are inside the volume; `parent` is a forest over its
        // voxels.
        let pair = if active && unsafe { joined(*edges.add(g as usize), *edges.add(neighbour(g, d, dims) as usize), d) }
        {
            // The trees' current entries: neighbouring face voxels mostly
            // join the same two trees, and only the first lane of such a
            // run needs to.
            let m = neighbour(g, d, dims);
            // SAFETY: as above.
            unsafe { (load_volatile_u32(parent.add(g as usize)), load_volatile_u32(parent.add(m as usize))) }
        } else {
            (u32::MAX, u32::MAX)
        };
        let previous = (shuffle_u32(pair.0, lane.saturating_sub(1)), shuffle_u32(pair.1, lane.saturating_sub(1)));
        if pair.0 != u32::MAX && (lane == 0 || previous != pair) {
            // SAFETY: as above.
            unsafe {
                union(
                    parent,
                    g as u32,
                    neighbour(g, d, dims) as u32,
                    |a, v| atomic_fetch_min_u32(a, v),
                    |a, v| atomic_min_u32(a, v),
                )
            };
        }
    }
}

/// The root of `x` in a complete forest (no thread changes it any more),
/// without writes.
///
/// # Safety
/// `parent` indexes a forest over valid indices.
#[inline(always)]
unsafe fn find_root(parent: *const u32, mut x: u32) -> u32 {
    // SAFETY: the caller guarantees a forest over valid indices.
    unsafe {
        loop {
            let p = *parent.add(x as usize);
            if p == x {
                return x;
            }
            x = p;
        }
    }
}

/// Components, step 3: counts, per scan tile, the roots of
/// non-background components (fragments), for [`ws_fragment_number`].
///
/// # Safety
/// `edges` and `parent` hold `n` entries, `parent` a complete forest
/// ([`uf_tile_faces`] has run); `tile_sums` one u64 per scan tile;
/// launched like `scan_tile_sums`.
///
/// # Parameters
/// - `edges`: remaining masks (0 = background); `parent`; `n`;
///   `tile_sums`: each tile's fragment count.
///
/// # Thread mapping
/// Block `b` owns scan tile `b`, thread `t` its voxels `t * SCAN_ITEMS ..`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_fragment_count(edges: *const u8, parent: *const u32, n: u64, tile_sums: *mut u64) {
    // SAFETY: launched as documented; `i < n`.
    unsafe { tile_sum(n, |i| (*parent.add(i as usize) == i as u32 && *edges.add(i as usize) != 0) as u64, tile_sums) }
}

/// Numbers the fragments: root `i` of the `k`-th non-background component
/// in index order gets label `k + 1` (waterz's numbering by scan order),
/// after an exclusive scan of [`ws_fragment_count`]'s counts.
///
/// # Safety
/// As [`ws_fragment_count`]; `tile_offsets` is the scan of its counts;
/// `labels` holds `n` u32s.
///
/// # Parameters
/// - `edges`, `parent`, `n`; `tile_offsets`; `labels`: the roots' labels.
///
/// # Thread mapping
/// As [`ws_fragment_count`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_fragment_number(
    edges: *const u8,
    parent: *const u32,
    n: u64,
    tile_offsets: *const u64,
    labels: *mut u32,
) {
    // SAFETY: launched as documented; `i < n`.
    unsafe {
        tile_compact(
            n,
            |i| *parent.add(i as usize) == i as u32 && *edges.add(i as usize) != 0,
            tile_offsets,
            |i, pos| *labels.add(i as usize) = pos as u32 + 1,
        )
    }
}

/// Final labels: background 0, else the label of the component's root
/// (written by [`ws_fragment_number`]).
///
/// # Safety
/// `edges`, `parent`, `labels` hold `n` entries; `parent` is a complete
/// forest; roots' labels are set.
///
/// # Parameters
/// - `edges`: remaining masks (0 = background); `parent`: the forest;
///   `labels`: completed in place.
///
/// # Thread mapping
/// Grid-stride loop.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ws_labels(edges: *const u8, parent: *const u32, n: u64, labels: *mut u32) {
    grid_stride(n, |i| {
        // SAFETY: indices in bounds; roots' labels were written by an
        // earlier launch, and nothing changes `parent` any more.
        unsafe {
            if *edges.add(i as usize) == 0 {
                *labels.add(i as usize) = 0;
            } else {
                let root = find_root(parent, i as u32);
                if root != i as u32 {
                    *labels.add(i as usize) = *labels.add(root as usize);
                }
            }
        }
    });
}
