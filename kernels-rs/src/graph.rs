//! The region graph on the GPU: boundary faces, aggregated per warp into
//! `(key = EdgeKey(u, v), count and fixed-point sum)` entries; a radix sort
//! and a reduce-by-key (integer sums) give one edge per fragment pair,
//! sorted, with exact contact statistics.

use crate::device::*;
use gpu_waterz_abi::graph::{
    pack_count_sum, packed_count, packed_sum, AffinityKind, EdgeKey, RgCountEntriesArgs, RgEmitEntriesArgs,
};
use gpu_waterz_abi::primitives::ReduceRunsArgs;
use gpu_waterz_abi::stats::affinity_to_fixed;
use gpu_waterz_abi::Dims3;

#[inline(always)]
fn axis_positions(i: u64, dims: Dims3) -> [u64; 3] {
    let (z, y, x) = crate::watershed::coords(i, dims);
    [z, y, x]
}

/// The key of a face that is not a boundary between two fragments (no
/// edge key is 0: `u < v`).
const NO_FACE: u64 = 0;

/// The key bits of face `d` of voxel `i` ([`NO_FACE`] if it is not a
/// boundary face between two non-zero labels).
#[inline(always)]
unsafe fn face_key(labels: *const u32, dims: Dims3, i: u64, p: [u64; 3], d: usize) -> u64 {
    if p[d] == 0 {
        return NO_FACE;
    }
    let strides = dims.strides();
    // SAFETY: the caller passes a voxel index and its coordinates.
    let (l1, l2) = unsafe { (*labels.add(i as usize), *labels.add((i - strides[d]) as usize)) };
    if l1 == l2 || l1 == 0 || l2 == 0 {
        return NO_FACE;
    }
    let (u, v) = if l1 < l2 { (l1, l2) } else { (l2, l1) };
    EdgeKey::new(u as u64, v as u64).bits()
}

kernel! {
    /// Counts the warp-aggregated face entries: per warp of 32 consecutive
    /// voxels and per axis, one entry for each distinct fragment pair.
    ///
    /// # Safety
    /// `labels` holds one u32 per voxel of `dims`; `counter` one zeroed u64.
    /// Launched with a block size that is a multiple of 32.
    ///
    /// # Parameters
    /// - `labels`, `dims`; `counter`: receives the number of entries.
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop: lane `l` of a warp takes voxel
    /// `base + l`; lanes with equal keys find each other with `match.any`.
    pub unsafe extern "ptx-kernel" fn rg_count_entries(
        labels: *const u32,
        dims: gpu_waterz_abi::Dims3,
        counter: *mut u64,
    ) as RgCountEntriesArgs {
        let n = dims.z * dims.y * dims.x;
        let mut leaders = 0u64;
        warp_uniform_stride(n, |i, valid| {
            let p = if valid { axis_positions(i, dims) } else { [0; 3] };
            for d in 0..3 {
                // SAFETY: valid lanes pass in-bounds voxels.
                let key = if valid { unsafe { face_key(labels, dims, i, p, d) } } else { NO_FACE };
                // SAFETY: `warp_uniform_stride` runs every lane of the warp in
                // every call, so all 32 lanes take part.
                let peers = unsafe { match_any_u64(key) };
                if key != NO_FACE && (peers & lanemask_lt()) == 0 {
                    leaders += 1;
                }
            }
        });
        if leaders > 0 {
            // SAFETY: `counter` is a valid u64.
            unsafe { atomic_add_u64(counter, leaders) };
        }
    }
}

kernel! {
    /// Writes the warp-aggregated face entries: the [`EdgeKey`] bits and the
    /// packed value `count << PACKED_SUM_BITS | fixed-point sum`
    /// ([`pack_count_sum`]), at positions taken from `counter` (their order
    /// varies between runs; the sort by key and the integer sums that follow
    /// make the graph identical every time).
    ///
    /// # Safety
    /// As [`rg_count_entries`]; `affs` holds `3 n` values of type `kind`;
    /// `keys` and `values` hold as many u64s as [`rg_count_entries`] counted
    /// for the same labels; `counter` is one zeroed u64; the launch provides
    /// `block_dim * RG_EMIT_SHARED_BYTES_PER_THREAD` bytes of shared memory.
    ///
    /// # Parameters
    /// - `labels`, `affs`, `kind`, `dims`: the volume; `counter`: the entries
    ///   reserved so far; `keys`, `values`: the entries.
    ///
    /// # Thread mapping
    /// As [`rg_count_entries`]; each lane adds its face to its leader's slot
    /// in shared memory, and one lane per warp reserves the warp's entries.
    pub unsafe extern "ptx-kernel" fn rg_emit_entries(
        labels: *const u32,
        affs: *const u8,
        kind: gpu_waterz_abi::graph::AffinityKind,
        dims: gpu_waterz_abi::Dims3,
        counter: *mut u64,
        keys: *mut u64,
        values: *mut u64,
    ) as RgEmitEntriesArgs {
        let n = dims.z * dims.y * dims.x;
        let lane = thread_idx_x() & 31;
        // SAFETY: one u64 per thread of shared memory, this warp's 32 in a row.
        let slots = unsafe { dynamic_shared::<u64>().add((thread_idx_x() - lane) as usize) };
        warp_uniform_stride(n, |i, valid| {
            let p = if valid { axis_positions(i, dims) } else { [0; 3] };
            for d in 0..3 {
                // SAFETY: valid lanes pass in-bounds voxels.
                let key = if valid { unsafe { face_key(labels, dims, i, p, d) } } else { NO_FACE };
                // SAFETY: `warp_uniform_stride` runs every lane of the warp in
                // every call, so all 32 lanes take part in each warp-wide
                // operation of this body (none is under a lane-dependent branch).
                let peers = unsafe { match_any_u64(key) };
                let leader_lane = peers.trailing_zeros();
                let is_leader = key != NO_FACE && lane == leader_lane;
                // SAFETY: each lane owns slot `lane`; the warp syncs around use.
                unsafe { core::ptr::write_volatile(slots.add(lane as usize), 0) };
                // SAFETY: all lanes, as above.
                unsafe { sync_warp() };
                if key != NO_FACE {
                    let a = match kind {
                        // SAFETY: `3 n` u8s.
                        AffinityKind::U8 => unsafe { *affs.add((d as u64 * n + i) as usize) as f32 / 255.0 },
                        // SAFETY: `3 n` f32s.
                        AffinityKind::F32 => unsafe { *(affs as *const f32).add((d as u64 * n + i) as usize) },
                    };
                    // SAFETY: the leader's slot is in this warp's shared memory.
                    unsafe { shared_atomic_add_u64(slots.add(leader_lane as usize), affinity_to_fixed(a)) };
                }
                // SAFETY: all lanes, as above.
                let leader_mask = unsafe {
                    sync_warp();
                    ballot(is_leader)
                };
                let mut base = 0u64;
                if lane == 0 && leader_mask != 0 {
                    // SAFETY: `counter` is a valid u64.
                    base = unsafe { atomic_fetch_add_u64(counter, leader_mask.count_ones() as u64) };
                }
                // SAFETY: all lanes, as above.
                let base =
                    unsafe { ((shuffle_u32((base >> 32) as u32, 0) as u64) << 32) | shuffle_u32(base as u32, 0) as u64 };
                if is_leader {
                    let slot = base + (leader_mask & lanemask_lt()).count_ones() as u64;
                    // SAFETY: `slot` is below the counted number of entries.
                    unsafe {
                        let sum = core::ptr::read_volatile(slots.add(lane as usize));
                        *keys.add(slot as usize) = key;
                        *values.add(slot as usize) = pack_count_sum(peers.count_ones() as u64, sum);
                    }
                }
                // SAFETY: all lanes, as above.
                unsafe { sync_warp() };
            }
        });
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
