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
    pub unsafe extern "ptx-kernel" fn uf_tile_local(
        edges: *const u8,
        dims: gpu_waterz_abi::Dims3,
        parent: *mut u32,
    ) as UfTileLocalArgs {
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
