//! The region graph on the GPU: boundary faces, aggregated per tile of
//! voxels into `(key = EdgeKey(u, v), count and fixed-point sum)` entries;
//! a radix sort and a reduce-by-key (integer sums) give one edge per
//! fragment pair, sorted, with exact contact statistics.

use crate::device::*;
use gpu_waterz_abi::graph::{
    pack_count_sum, packed_count, packed_sum, rg_entry_piece, rg_entry_pieces, rg_table_slot, AffinityKind, EdgeKey,
    RgTileEntriesArgs, RG_TABLE_SLOTS,
};
use gpu_waterz_abi::primitives::ReduceRunsArgs;
use gpu_waterz_abi::stats::affinity_to_fixed;

/// The key of a face that is not a boundary between two fragments (no
/// edge key is 0: `u < v`).
const NO_FACE: u64 = 0;

/// The key bits of face `d` of voxel `i` at `p`, whose label is `l1`
/// ([`NO_FACE`] if it is not a boundary face between two non-zero labels).
#[inline(always)]
unsafe fn face_key(labels: *const u32, l1: u32, strides: [u64; 3], i: u64, p: [u64; 3], d: usize) -> u64 {
    if p[d] == 0 || l1 == 0 {
        return NO_FACE;
    }
    // SAFETY: the caller passes a voxel index and its coordinates, so the
    // voxel before it along axis `d` exists.
    let l2 = unsafe { *labels.add((i - strides[d]) as usize) };
    if l1 == l2 || l2 == 0 {
        return NO_FACE;
    }
    let (u, v) = if l1 < l2 { (l1, l2) } else { (l2, l1) };
    EdgeKey::new(u as u64, v as u64).bits()
}

/// The table slot of `key` in a block's fragment-pair table (`table`,
/// [`RG_TABLE_SLOTS`] keys, [`NO_FACE`] when empty), claiming an empty slot
/// for it if it has none; `None` when the table is full.
///
/// # Safety
/// `table` points to the block's shared table.
#[inline(always)]
unsafe fn table_slot(table: *mut u64, key: u64) -> Option<usize> {
    let mask = RG_TABLE_SLOTS as usize - 1;
    let mut slot = rg_table_slot(key) as usize;
    for _ in 0..RG_TABLE_SLOTS {
        // SAFETY: `slot` is masked to the table.
        let current = unsafe { core::ptr::read_volatile(table.add(slot)) };
        if current == key {
            return Some(slot);
        }
        if current == NO_FACE {
            // SAFETY: as above.
            let old = unsafe { shared_atomic_cas_u64(table.add(slot), NO_FACE, key) };
            if old == NO_FACE || old == key {
                return Some(slot);
            }
        }
        slot = (slot + 1) & mask;
    }
    None
}

/// Sums `value` over each run of consecutive lanes holding the same `key`:
/// returns, for the run's first lane, the run's length and sum, and
/// whether this lane is the first of its run (the others' results are
/// partial). Faces along a row mostly separate the same two fragments, so
/// one lane per run then updates the block's table instead of every lane
/// contending for one slot. Integer sums: the same totals in any order.
///
/// # Safety
/// All 32 lanes of the warp call it together; `lane` is the caller's lane.
#[inline(always)]
unsafe fn warp_run_sums(key: u64, value: u64, lane: u32) -> (u32, u64, bool) {
    let shuffle_u64 = |x: u64, src: u32| {
        // SAFETY: every lane calls this helper together (the caller's
        // contract), so every lane shuffles.
        unsafe { (shuffle_u32(x as u32, src) as u64) | ((shuffle_u32((x >> 32) as u32, src) as u64) << 32) }
    };
    let previous = shuffle_u64(key, lane.saturating_sub(1));
    // SAFETY: as above.
    let continuing = unsafe { ballot(lane != 0 && key != NO_FACE && previous == key) };
    if continuing == 0 {
        // Every run is one lane (the same answer for the whole warp).
        return (1, value, true);
    }
    let first = continuing & (1 << lane) == 0;
    // The run ends at the next lane that starts one (or at 32).
    let later = if lane == 31 { 0 } else { !continuing & (u32::MAX << (lane + 1)) };
    let end = if later == 0 { 32 } else { later.trailing_zeros() };
    // After the step of offset `o`, `sum` holds the values of lanes
    // `lane .. min(lane + 2 o, end)`.
    let step = |sum: u64, offset: u32| {
        let other = shuffle_u64(sum, (lane + offset).min(31));
        if lane + offset < end {
            sum + other
        } else {
            sum
        }
    };
    let sum = step(step(step(step(step(value, 1), 2), 4), 8), 16);
    (end - lane, sum, first)
}

kernel! {
    /// Aggregates the boundary faces of each tile into one entry per
    /// fragment pair: its [`EdgeKey`] bits and packed value (count and
    /// fixed-point sum, split by [`rg_entry_piece`] where the sum is too
    /// large), at positions taken from `counter`. Their order varies
    /// between runs; the sort by key and the integer sums that follow make
    /// the graph identical every time. A face belongs to the voxel above
    /// it along its axis, so every face is counted once, by that voxel's
    /// tile. Entries beyond `capacity` are counted but not written (the
    /// host then launches again with room for them).
    ///
    /// # Safety
    /// `labels` holds one u32 per voxel of `dims`, `affs` `3 n` values of
    /// type `kind`; `keys` and `values` hold `capacity` u64s; `counter` is
    /// one zeroed u64; `tile` is `rg_tile_shape(dims)`; the launch has
    /// `RG_TILE_THREADS` threads and `RG_TILE_SHARED_BYTES` bytes of
    /// shared memory.
    ///
    /// # Parameters
    /// - `labels`, `affs`, `kind`, `dims`: the volume; `tile`: the tile;
    /// - `capacity`, `counter`, `keys`, `values`: the entries.
    ///
    /// # Thread mapping
    /// Block-uniform grid-stride loop over tiles; a block's threads walk
    /// its tile's voxels with x fastest (a warp reads a row of 32), add up
    /// runs of lanes whose faces separate the same pair
    /// (`warp_run_sums`), and the first lane of each run claims the pair
    /// in the shared table and adds the run's count and sum;
    /// after a barrier they write the table's entries, reserved with one
    /// global atomic per tile.
    pub unsafe extern "ptx-kernel" fn rg_tile_entries(
        labels: *const u32,
        affs: *const u8,
        kind: gpu_waterz_abi::graph::AffinityKind,
        dims: gpu_waterz_abi::Dims3,
        tile: gpu_waterz_abi::Dims3,
        capacity: u64,
        counter: *mut u64,
        keys: *mut u64,
        values: *mut u64,
    ) as RgTileEntriesArgs {
        let n = dims.z * dims.y * dims.x;
        let strides = dims.strides();
        let slots = RG_TABLE_SLOTS as usize;
        let threads = block_dim_x() as usize;
        let tid = thread_idx_x() as usize;
        let lane = thread_idx_x() % 32;
        // The shared layout (RG_TILE_SHARED_BYTES): keys, sums, the two
        // reservation words, then the u32 counts.
        let table = dynamic_shared::<u64>();
        // SAFETY: all offsets lie inside the RG_TILE_SHARED_BYTES.
        let (sums, reserved, counts) = unsafe {
            let sums = table.add(slots);
            let reserved = sums.add(slots);
            (sums, reserved, reserved.add(2) as *mut u32)
        };
        let tiles = [dims.z.div_ceil(tile.z), dims.y.div_ceil(tile.y), dims.x.div_ceil(tile.x)];
        let n_tiles = tiles[0] * tiles[1] * tiles[2];
        let (shift_x, shift_y) = (tile.x.trailing_zeros(), tile.y.trailing_zeros());
        let tile_voxels = tile.z * tile.y * tile.x;
        let mut t = block_idx_x() as u64;
        while t < n_tiles {
            let mut s = tid;
            while s < slots {
                // SAFETY: `s` is below the table's slots.
                unsafe {
                    *table.add(s) = NO_FACE;
                    *sums.add(s) = 0;
                    *counts.add(s) = 0;
                }
                s += threads;
            }
            if tid == 0 {
                // SAFETY: the block's reservation word.
                unsafe { *reserved = 0 };
            }
            // SAFETY: the loop over tiles is block-uniform.
            unsafe { sync_threads() };
            let origin = [
                t / (tiles[1] * tiles[2]) * tile.z,
                t / tiles[2] % tiles[1] * tile.y,
                t % tiles[2] * tile.x,
            ];
            let mut j = tid as u64;
            // Every lane walks the same number of voxels (tiles hold a
            // multiple of 32), so whole warps reach `warp_run_sums`.
            while j < tile_voxels {
                let p = [
                    origin[0] + (j >> (shift_x + shift_y)),
                    origin[1] + ((j >> shift_x) & (tile.y - 1)),
                    origin[2] + (j & (tile.x - 1)),
                ];
                let inside = p[0] < dims.z && p[1] < dims.y && p[2] < dims.x;
                let i = if inside { dims.index(p[0], p[1], p[2]) } else { 0 };
                // SAFETY: `i` is a voxel of the volume when inside.
                let l1 = if inside { unsafe { *labels.add(i as usize) } } else { 0 };
                // One call per axis, each with a constant axis.
                let face = |d: usize| {
                    // SAFETY: `i` and `p` are a voxel and its coordinates
                    // (`l1` is 0 outside, which is no face).
                    let key = if l1 != 0 { unsafe { face_key(labels, l1, strides, i, p, d) } } else { NO_FACE };
                    let fixed = if key == NO_FACE {
                        0
                    } else {
                        affinity_to_fixed(match kind {
                            // SAFETY: `3 n` u8s.
                            AffinityKind::U8 => unsafe { *affs.add((d as u64 * n + i) as usize) as f32 / 255.0 },
                            // SAFETY: `3 n` f32s.
                            AffinityKind::F32 => unsafe { *(affs as *const f32).add((d as u64 * n + i) as usize) },
                        })
                    };
                    // SAFETY: every lane of the warp is here (see above).
                    if unsafe { ballot(key != NO_FACE) } == 0 {
                        // No face in the warp's voxels (the same answer for
                        // every lane).
                        return;
                    }
                    // SAFETY: as above.
                    let (count, sum, first) = unsafe { warp_run_sums(key, fixed, lane) };
                    if !first || key == NO_FACE {
                        return;
                    }
                    // SAFETY: the block's table.
                    match unsafe { table_slot(table, key) } {
                        // SAFETY: `slot` is below the table's slots.
                        Some(slot) => unsafe {
                            shared_atomic_add_u32(counts.add(slot), count);
                            shared_atomic_add_u64(sums.add(slot), sum);
                        },
                        None => {
                            // The table is full: the run is an entry of its own
                            // (at most 32 faces: its sum fits the packed bits).
                            // SAFETY: `counter` is a valid u64.
                            let at = unsafe { atomic_fetch_add_u64(counter, 1) };
                            if at < capacity {
                                // SAFETY: `at` is below the capacity of both buffers.
                                unsafe {
                                    *keys.add(at as usize) = key;
                                    *values.add(at as usize) = pack_count_sum(count as u64, sum);
                                }
                            }
                        }
                    }
                };
                face(0);
                face(1);
                face(2);
                j += threads as u64;
            }
            // SAFETY: block-uniform, as above.
            unsafe { sync_threads() };
            // Each thread's slots, their entries reserved in the block.
            let mut mine = 0u32;
            let mut s = tid;
            while s < slots {
                // SAFETY: `s` is below the table's slots.
                if unsafe { *table.add(s) } != NO_FACE {
                    mine += rg_entry_pieces(unsafe { *sums.add(s) }) as u32;
                }
                s += threads;
            }
            let mut at = 0u64;
            if mine > 0 {
                // SAFETY: the block's reservation word, as a u32 (at most
                // `3 RG_TILE_VOXELS` entries per tile).
                at = unsafe { shared_atomic_fetch_add_u32(reserved as *mut u32, mine) } as u64;
            }
            // SAFETY: block-uniform, as above.
            unsafe { sync_threads() };
            if tid == 0 {
                // SAFETY: the reservation words; `counter` is a valid u64.
                unsafe {
                    let total = *(reserved as *const u32) as u64;
                    *reserved.add(1) = if total > 0 { atomic_fetch_add_u64(counter, total) } else { 0 };
                }
            }
            // SAFETY: block-uniform, as above.
            unsafe { sync_threads() };
            // SAFETY: written by thread 0 before the barrier.
            at += unsafe { *reserved.add(1) };
            let mut s = tid;
            while s < slots {
                // SAFETY: `s` is below the table's slots.
                let (key, sum, count) = unsafe { (*table.add(s), *sums.add(s), *counts.add(s) as u64) };
                if key != NO_FACE {
                    for piece in 0..rg_entry_pieces(sum) {
                        if at < capacity {
                            // SAFETY: `at` is below the capacity of both buffers.
                            unsafe {
                                *keys.add(at as usize) = key;
                                *values.add(at as usize) = rg_entry_piece(count, sum, piece);
                            }
                        }
                        at += 1;
                    }
                }
                s += threads;
            }
            // SAFETY: block-uniform; the table is cleared for the next tile
            // only after every thread has read it.
            unsafe { sync_threads() };
            t += grid_dim_x() as u64;
        }
    }
}

kernel! {
    /// Reduce-by-key of packed entries: like `reduce_runs`, but each value
    /// holds `count << PACKED_SUM_BITS | sum`, unpacked into the two outputs.
    ///
    /// # Safety
    /// As `reduce_runs`.
    ///
    /// # Parameters
    /// As `reduce_runs`.
    ///
    /// # Thread mapping
    /// Grid-stride loop; integer atomics make the sums independent of order.
    pub unsafe extern "ptx-kernel" fn reduce_runs_packed(
        keys: *const u64,
        values: *const u64,
        n: u64,
        flags: *const u32,
        run_offsets: *const u64,
        out_keys: *mut u64,
        out_counts: *mut u64,
        out_sums: *mut u64,
    ) as ReduceRunsArgs {
        grid_stride(n, |i| {
            // SAFETY: `i < n`; the run index is below the number of runs.
            unsafe {
                let head = *flags.add(i as usize);
                let run = *run_offsets.add(i as usize) + head as u64 - 1;
                if head != 0 {
                    *out_keys.add(run as usize) = *keys.add(i as usize);
                }
                let v = *values.add(i as usize);
                atomic_add_u64(out_counts.add(run as usize), packed_count(v));
                atomic_add_u64(out_sums.add(run as usize), packed_sum(v));
            }
        });
    }
}
