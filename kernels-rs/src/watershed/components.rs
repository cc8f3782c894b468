//! Step 4: the weakly connected components of the remaining edges, as a
//! union-find forest rooted at each component's smallest voxel: tiles in
//! shared memory, then the tiles along their faces.

use crate::device::*;
use gpu_waterz_abi::watershed::{
    joined, neighbour, uf_tile_offset, uf_tile_origin, UfTileFacesArgs, UfTileLocalArgs, UF_THREADS, UF_TILE,
    UF_TILE_X, UF_TILE_Y, UF_TILE_Z,
};

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

kernel! {
    /// Components, step 1: the voxels of one tile (`UF_TILE_Z × UF_TILE_Y ×
    /// UF_TILE_X`) are joined along the remaining edges inside the tile, in
    /// shared memory; each voxel's parent becomes the smallest voxel of its
    /// component within the tile (in tile order, which is index order).
    ///
    /// # Safety
    /// `edges` and `parent` hold one entry per voxel of `dims` (fewer than
    /// 2^32); launched with `UF_THREADS` threads, one block per tile of
    /// `uf_tile_grid(dims)` (C order), and `UF_SHARED_BYTES` of dynamic
    /// shared memory.
    ///
    /// # Parameters
    /// - `edges`: the remaining edge masks after plateau division; `dims`;
    ///   `parent`: written for every voxel (a global voxel index).
    ///
    /// # Thread mapping
    /// Block `b` owns tile `b`; thread `t` owns the column of tile voxels
    /// `t + k * UF_THREADS`, `k < UF_TILE_Z` (a warp reads one row of 32
    /// voxels), so its `y` and `x` in the tile are fixed and its index
    /// arithmetic is done once.
    pub unsafe extern "ptx-kernel" fn uf_tile_local(
        edges: *const u8,
        dims: gpu_waterz_abi::Dims3,
        parent: *mut u32,
    ) as UfTileLocalArgs {
        const { assert!(UF_THREADS as u64 == UF_TILE_Y * UF_TILE_X && UF_TILE_X == 32) };
        let shared_parent = dynamic_shared::<u32>();
        // SAFETY: the launch gives `2 * UF_TILE` u32s of shared memory.
        let shared_bits = unsafe { shared_parent.add(UF_TILE as usize) };
        let (z0, y0, x0) = uf_tile_origin(block_idx_x() as u64, dims);
        let t = thread_idx_x();
        let (ly, lx) = (t / UF_TILE_X as u32, t % UF_TILE_X as u32);
        // Voxel indices fit u32 (fewer than 2^32 voxels).
        let (sy, sz) = (dims.x as u32, (dims.y * dims.x) as u32);
        let origin = (z0 * dims.y * dims.x + y0 * dims.x + x0) as u32;
        // The tile's layers inside the volume, and whether this thread's
        // column is inside it along y and x.
        let depth = (dims.z - z0).min(UF_TILE_Z) as u32;
        let column = y0 + (ly as u64) < dims.y && x0 + (lx as u64) < dims.x;
        // The global index of tile voxel `local` (inside the volume).
        let global = |local: u32| {
            let (lz, ly, lx) = uf_tile_offset(local);
            origin + lz * sz + ly * sy + lx
        };
        // The lower neighbours (along z, y, x: in increasing index order
        // of the neighbour, decreasing offset) and whether this thread's
        // voxels have them inside the tile (along z: every layer but the
        // first).
        let offsets = [UF_THREADS, UF_TILE_X as u32, 1];
        let has_lower = |k: u32, d: usize| match d {
            0 => k > 0,
            1 => ly > 0,
            _ => lx > 0,
        };
        // SAFETY: shared indices stay below UF_TILE (a lower neighbour
        // inside the tile is at least its offset above 0); global indices
        // are of voxels inside the volume; every thread reaches every
        // barrier.
        unsafe {
            for k in 0..UF_TILE_Z as u32 {
                let local = t + k * UF_THREADS;
                let bits = if column && k < depth { *edges.add(global(local) as usize) } else { 0 };
                *shared_bits.add(local as usize) = bits as u32;
            }
            sync_threads();
            // Each voxel starts linked to its smallest joined neighbour,
            // the first joined lower one (upper neighbours are larger):
            // most trees are then complete before any union. Every other
            // joined lower neighbour is a union, below.
            // Two bits per layer: the direction of the starting link (3: none).
            let mut first_joined = 0u32;
            for k in 0..UF_TILE_Z as u32 {
                let local = t + k * UF_THREADS;
                let bits = *shared_bits.add(local as usize) as u8;
                let mut p = local;
                let mut first = 3;
                for d in 0..3 {
                    if has_lower(k, d) {
                        let m = local - offsets[d];
                        if first == 3 && joined(bits, *shared_bits.add(m as usize) as u8, d) {
                            p = m;
                            first = d;
                        }
                    }
                }
                first_joined |= (first as u32) << (2 * k);
                *shared_parent.add(local as usize) = p;
            }
            sync_threads();
            for k in 0..UF_TILE_Z as u32 {
                let local = t + k * UF_THREADS;
                let bits = *shared_bits.add(local as usize) as u8;
                let first = (first_joined >> (2 * k) & 3) as usize;
                // Edges after the first joined one (links only move to
                // ancestors, so the starting link keeps its two ends in one
                // tree and needs no union).
                for d in 0..3 {
                    if d > first && has_lower(k, d) {
                        let m = local - offsets[d];
                        if joined(bits, *shared_bits.add(m as usize) as u8, d) {
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
            }
            sync_threads();
            // Pointer jumping: every link moves to its grandparent (an
            // ancestor, whatever other threads write meanwhile) until every
            // voxel links to its root.
            loop {
                let mut changed = false;
                for k in 0..UF_TILE_Z as u32 {
                    let local = t + k * UF_THREADS;
                    let p = load_volatile_u32(shared_parent.add(local as usize));
                    let grand = load_volatile_u32(shared_parent.add(p as usize));
                    if grand != p {
                        // Other threads read this link meanwhile.
                        core::ptr::write_volatile(shared_parent.add(local as usize), grand);
                        changed = true;
                    }
                }
                if !sync_threads_or(changed) {
                    break;
                }
            }
            if column {
                for k in 0..depth {
                    let local = t + k * UF_THREADS;
                    let root = *shared_parent.add(local as usize);
                    *parent.add(global(local) as usize) = global(root);
                }
            }
        }
    }
}

kernel! {
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
    pub unsafe extern "ptx-kernel" fn uf_tile_faces(
        edges: *const u8,
        dims: gpu_waterz_abi::Dims3,
        parent: *mut u32,
    ) as UfTileFacesArgs {
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
            // SAFETY: every lane of the block's warps runs each of the three
            // axes' iterations (no lane leaves early), so all 32 lanes shuffle.
            let previous =
                unsafe { (shuffle_u32(pair.0, lane.saturating_sub(1)), shuffle_u32(pair.1, lane.saturating_sub(1))) };
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
}
