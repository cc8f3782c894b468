//! Device-wide primitives: exclusive scan, order-preserving compaction,
//! stable LSD radix sort of 64-bit keys with 64-bit values, and
//! reduce-by-key over sorted keys. All results are deterministic: positions
//! come from scans, sums from integer atomics.

use crate::device::*;
use gpu_waterz_abi::primitives::*;

/// Digits per radix pass, as an index type.
const RADIX: usize = gpu_waterz_abi::primitives::RADIX as usize;
/// Warps per radix-sort block, as an index type.
const SORT_WARPS: usize = gpu_waterz_abi::primitives::SORT_WARPS as usize;

kernel! {
    /// Writes `0, 1, ..., n - 1`.
    ///
    /// # Safety
    /// `out` holds `n` writable `u32`s, `n <= 2^32`.
    ///
    /// # Parameters
    /// - `out`, `n`: the buffer.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration.
    pub unsafe extern "ptx-kernel" fn iota_u32(out: *mut u32, n: u64) as IotaU32Args {
        // SAFETY: `i < n`.
        grid_stride(n, |i| unsafe { *out.add(i as usize) = i as u32 });
    }
}

kernel! {
    /// Gathers rows of values at a stride:
    /// `out[r * row_len + c] = input[offset + r * row_stride + c * column_stride]`.
    ///
    /// # Safety
    /// `input` holds every index read (the largest is `offset + (rows - 1)
    /// * row_stride + (row_len - 1) * column_stride`), `out` `rows *
    /// row_len` writable f32s.
    ///
    /// # Parameters
    /// - `input`, `offset`, `rows`, `row_stride`, `row_len`, `column_stride`:
    ///   what is read; `out`: the rows, one after the other.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one output value per iteration.
    pub unsafe extern "ptx-kernel" fn gather_rows_f32(
        input: *const f32,
        offset: u64,
        rows: u64,
        row_stride: u64,
        row_len: u64,
        column_stride: u64,
        out: *mut f32,
    ) as GatherRowsF32Args {
        grid_stride(rows * row_len, |i| {
            let (r, c) = (i / row_len, i % row_len);
            // SAFETY: the caller's bounds hold every index read and written.
            unsafe { *out.add(i as usize) = *input.add((offset + r * row_stride + c * column_stride) as usize) };
        });
    }
}

kernel! {
    /// Packs two u32 arrays into u64 keys:
    /// `out[i] = high[start + i] << 32 | low[start + i]`.
    ///
    /// # Safety
    /// `high` and `low` hold `start + n` u32s, `out` `n` writable u64s.
    ///
    /// # Parameters
    /// - `high`, `low`: the halves; `start`, `n`: the pairs; `out`: the keys.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration.
    pub unsafe extern "ptx-kernel" fn pack_u32_pairs(
        high: *const u32,
        low: *const u32,
        start: u64,
        n: u64,
        out: *mut u64,
    ) as PackU32PairsArgs {
        // SAFETY: `i < n`, and `start + i` is below the halves' length.
        grid_stride(n, |i| unsafe {
            let j = (start + i) as usize;
            *out.add(i as usize) = ((*high.add(j) as u64) << 32) | *low.add(j) as u64;
        });
    }
}

/// The first slot to probe for `key` in a table of `mask + 1` slots.
#[inline(always)]
fn pair_slot(key: u64, mask: u64) -> u64 {
    ((key ^ (key >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) & mask
}

/// Adds `count` to `key`'s slot of the table (claiming a free slot by
/// compare-and-swap), probing linearly; flags `overflow` when every slot
/// holds another key.
///
/// # Safety
/// `keys` and `counts` hold `mask + 1` elements; `overflow` one u32.
#[inline(always)]
unsafe fn add_pair(keys: *mut u64, counts: *mut u64, mask: u64, overflow: *mut u32, key: u64, count: u64) {
    let mut slot = pair_slot(key, mask);
    let mut probes = 0u64;
    while probes <= mask {
        // SAFETY: `slot <= mask`; a claimed key never changes, so a stale
        // read can only show a free slot, which the swap then settles.
        unsafe {
            let seen = core::ptr::read_volatile(keys.add(slot as usize));
            let mine = seen == key
                || (seen == EMPTY_PAIR_KEY && {
                    let previous = atomic_cas_u64(keys.add(slot as usize), EMPTY_PAIR_KEY, key);
                    previous == EMPTY_PAIR_KEY || previous == key
                });
            if mine {
                atomic_add_u64(counts.add(slot as usize), count);
                return;
            }
        }
        slot = (slot + 1) & mask;
        probes += 1;
    }
    // SAFETY: `overflow` is one u32.
    unsafe { atomic_add_u32(overflow, 1) };
}

kernel! {
    /// Counts the pairs `high[start + i] << 32 | low[start + i]` for
    /// `i < n` whose high half is not 0, in an open-addressing hash table:
    /// the integer counts of a contingency table without sorting.
    ///
    /// # Safety
    /// `high` and `low` hold `start + n` u32s, every low half below
    /// `u32::MAX`; `keys` and `counts` hold `capacity` elements (a power of
    /// two), initialised to `EMPTY_PAIR_KEY` and 0; `overflow` one u32.
    ///
    /// # Parameters
    /// - `high`, `low`, `start`, `n`: the pairs;
    /// - `keys`, `counts`, `capacity`: the table;
    /// - `overflow`: set non-zero when the table was full (counts missing).
    ///
    /// # Thread mapping
    /// Grid-stride loop over runs of `COUNT_PAIRS_RUN` consecutive pairs;
    /// a thread adds one count per run of equal pairs in its run (labels
    /// are piecewise constant along x, so most runs need one atomic).
    pub unsafe extern "ptx-kernel" fn count_u32_pairs(
        high: *const u32,
        low: *const u32,
        start: u64,
        n: u64,
        keys: *mut u64,
        counts: *mut u64,
        capacity: u64,
        overflow: *mut u32,
    ) as CountU32PairsArgs {
        let mask = capacity - 1;
        grid_stride(n.div_ceil(COUNT_PAIRS_RUN), |run| {
            let first = run * COUNT_PAIRS_RUN;
            let last = if first + COUNT_PAIRS_RUN < n { first + COUNT_PAIRS_RUN } else { n };
            let mut current = EMPTY_PAIR_KEY;
            let mut count = 0u64;
            let mut i = first;
            while i < last {
                let j = (start + i) as usize;
                // SAFETY: `j < start + n`, within both halves.
                let (h, l) = unsafe { (*high.add(j), *low.add(j)) };
                if h != 0 {
                    let key = ((h as u64) << 32) | l as u64;
                    if key != current {
                        if count > 0 {
                            // SAFETY: the table's extent is the caller's.
                            unsafe { add_pair(keys, counts, mask, overflow, current, count) };
                        }
                        current = key;
                        count = 0;
                    }
                    count += 1;
                }
                i += 1;
            }
            if count > 0 {
                // SAFETY: as above.
                unsafe { add_pair(keys, counts, mask, overflow, current, count) };
            }
        });
    }
}

kernel! {
    /// Keeps the low 32 bits of each u64 and finds the largest value (so
    /// that the caller knows whether anything was cut).
    ///
    /// # Safety
    /// `input` holds `n` u64s, `out` `n` writable u32s, `max` one u64 that
    /// is 0 before the launch.
    ///
    /// # Parameters
    /// - `input`, `n`: the values; `out`: their low halves; `max`: their
    ///   maximum.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration; one atomic maximum per
    /// thread at the end.
    pub unsafe extern "ptx-kernel" fn narrow_u64_to_u32(
        input: *const u64,
        n: u64,
        out: *mut u32,
        max: *mut u64,
    ) as NarrowU64ToU32Args {
        let mut largest = 0u64;
        // SAFETY: `i < n`.
        grid_stride(n, |i| unsafe {
            let v = *input.add(i as usize);
            *out.add(i as usize) = v as u32;
            if v > largest {
                largest = v;
            }
        });
        if largest > 0 {
            // SAFETY: `max` is one u64.
            unsafe { atomic_max_u64(max, largest) };
        }
    }
}

/// Block-wide exclusive scan of one `u64` per thread in shared memory
/// (`SCAN_THREADS` entries); returns this thread's exclusive prefix and
/// the block total.
///
/// # Safety
/// Called by all `SCAN_THREADS` threads of the block; `shared` has
/// `SCAN_THREADS` u64s.
#[inline(always)]
unsafe fn block_exclusive_scan(shared: *mut u64, value: u64) -> (u64, u64) {
    let tid = thread_idx_x() as usize;
    // SAFETY: `tid < SCAN_THREADS`; barriers are reached by all threads.
    unsafe {
        *shared.add(tid) = value;
        sync_threads();
        // Hillis-Steele inclusive scan.
        let mut offset = 1usize;
        while offset < SCAN_THREADS as usize {
            let add = if tid >= offset { *shared.add(tid - offset) } else { 0 };
            sync_threads();
            *shared.add(tid) += add;
            sync_threads();
            offset *= 2;
        }
        let inclusive = *shared.add(tid);
        let total = *shared.add(SCAN_THREADS as usize - 1);
        sync_threads();
        (inclusive - value, total)
    }
}

kernel! {
    /// Per-tile sums of `n` `u32`s, for [`scan_tiles`].
    ///
    /// # Safety
    /// `input` holds `n` u32s; `tile_sums` holds one u64 per tile
    /// (`ceil(n / SCAN_TILE)`); launched with `SCAN_THREADS` threads, one block
    /// per tile, and `SCAN_THREADS * 8` bytes of shared memory.
    ///
    /// # Parameters
    /// - `input`, `n`: the values; `tile_sums`: receives each tile's sum.
    ///
    /// # Thread mapping
    /// Block `b` owns tile `b`; thread `t` sums elements `t * SCAN_ITEMS ..`
    /// of it, then the block reduces in shared memory.
    pub unsafe extern "ptx-kernel" fn scan_tile_sums(
        input: *const u32,
        n: u64,
        tile_sums: *mut u64,
    ) as ScanTileSumsArgs {
        // SAFETY: launched as documented; `i < n`.
        unsafe { tile_sum(n, |i| *input.add(i as usize) as u64, tile_sums) }
    }
}

/// The body of a per-tile sum: block `b` adds `value(i)` over its tile
/// (`SCAN_TILE` consecutive indices below `n`) and writes the total to
/// `tile_sums[b]`. Kernels that count a predicate computed on the fly
/// (instead of reading stored flags) share it.
///
/// # Safety
/// All `SCAN_THREADS` threads of a block call it, with `SCAN_THREADS * 8`
/// bytes of dynamic shared memory; `tile_sums` holds one u64 per block.
#[inline(always)]
pub unsafe fn tile_sum(n: u64, mut value: impl FnMut(u64) -> u64, tile_sums: *mut u64) {
    let base = block_idx_x() as u64 * SCAN_TILE + thread_idx_x() as u64 * SCAN_ITEMS as u64;
    let mut sum = 0u64;
    for k in 0..SCAN_ITEMS as u64 {
        if base + k < n {
            sum += value(base + k);
        }
    }
    // SAFETY: the caller launched the block as documented.
    let (_, total) = unsafe { block_exclusive_scan(dynamic_shared::<u64>(), sum) };
    if thread_idx_x() == 0 {
        // SAFETY: one entry per block.
        unsafe { *tile_sums.add(block_idx_x() as usize) = total };
    }
}

/// The body of an order-preserving compaction: block `b` ranks the indices
/// of its tile for which `keep(i)` holds and calls `emit(i, position)` with
/// `position` counted from `tile_offsets[b]` (the exclusive scan of
/// [`tile_sum`] over the same predicate).
///
/// # Safety
/// As [`tile_sum`]; `keep` must give the values that were summed.
#[inline(always)]
pub unsafe fn tile_compact(
    n: u64,
    mut keep: impl FnMut(u64) -> bool,
    tile_offsets: *const u64,
    mut emit: impl FnMut(u64, u64),
) {
    let base = block_idx_x() as u64 * SCAN_TILE + thread_idx_x() as u64 * SCAN_ITEMS as u64;
    let mut set = [false; SCAN_ITEMS as usize];
    let mut count = 0u64;
    for k in 0..SCAN_ITEMS as u64 {
        if base + k < n && keep(base + k) {
            set[k as usize] = true;
            count += 1;
        }
    }
    // SAFETY: the caller launched the block as documented.
    let (prefix, _) = unsafe { block_exclusive_scan(dynamic_shared::<u64>(), count) };
    // SAFETY: one offset per block.
    let mut pos = unsafe { *tile_offsets.add(block_idx_x() as usize) } + prefix;
    for k in 0..SCAN_ITEMS as u64 {
        if set[k as usize] {
            emit(base + k, pos);
            pos += 1;
        }
    }
}

kernel! {
    /// Exclusive scan of `n` `u32`s into `u64`s, given each tile's offset (the
    /// exclusive scan of [`scan_tile_sums`]); also writes the grand total.
    ///
    /// # Safety
    /// `input` holds `n` u32s, `output` `n` u64s, `tile_offsets` one u64 per
    /// tile, `total` one u64; launched like [`scan_tile_sums`].
    ///
    /// # Parameters
    /// - `input`, `n`: values; `tile_offsets`: scanned tile sums;
    ///   `output`: exclusive prefix sums; `total`: sum of all values.
    ///
    /// # Thread mapping
    /// As [`scan_tile_sums`]; the last block writes `total`.
    pub unsafe extern "ptx-kernel" fn scan_tiles(
        input: *const u32,
        n: u64,
        tile_offsets: *const u64,
        output: *mut u64,
        total: *mut u64,
    ) as ScanTilesArgs {
        let base = block_idx_x() as u64 * SCAN_TILE + thread_idx_x() as u64 * SCAN_ITEMS as u64;
        let mut values = [0u64; SCAN_ITEMS as usize];
        let mut sum = 0u64;
        for k in 0..SCAN_ITEMS as u64 {
            if base + k < n {
                // SAFETY: in bounds.
                values[k as usize] = unsafe { *input.add((base + k) as usize) } as u64;
                sum += values[k as usize];
            }
        }
        // SAFETY: launched as documented.
        let (prefix, block_total) = unsafe { block_exclusive_scan(dynamic_shared::<u64>(), sum) };
        // SAFETY: one offset per block.
        let mut running = unsafe { *tile_offsets.add(block_idx_x() as usize) } + prefix;
        for k in 0..SCAN_ITEMS as u64 {
            if base + k < n {
                // SAFETY: in bounds.
                unsafe { *output.add((base + k) as usize) = running };
                running += values[k as usize];
            }
        }
        if thread_idx_x() == 0 && block_idx_x() == grid_dim_x() - 1 {
            // SAFETY: `total` is one u64; `tile_offsets` has this block's entry.
            unsafe { *total = *tile_offsets.add(block_idx_x() as usize) + block_total };
        }
    }
}

kernel! {
    /// Exclusive scan of each chunk of `SCAN_TILE` `u64`s in place, writing
    /// each chunk's total (the levels above the first of a device-wide scan).
    ///
    /// # Safety
    /// `values` holds `n` u64s, `chunk_totals` one u64 per chunk; launched with
    /// `SCAN_THREADS` threads, one block per chunk, and `SCAN_THREADS * 8` bytes
    /// of shared memory.
    ///
    /// # Parameters
    /// - `values`, `n`: scanned in place per chunk; `chunk_totals`: output.
    ///
    /// # Thread mapping
    /// Block `b` owns chunk `b`; thread `t` owns its elements `t * SCAN_ITEMS ..`.
    pub unsafe extern "ptx-kernel" fn scan_chunks_u64(
        values: *mut u64,
        n: u64,
        chunk_totals: *mut u64,
    ) as ScanChunksU64Args {
        let base = block_idx_x() as u64 * SCAN_TILE + thread_idx_x() as u64 * SCAN_ITEMS as u64;
        let mut local = [0u64; SCAN_ITEMS as usize];
        let mut sum = 0u64;
        for k in 0..SCAN_ITEMS as u64 {
            if base + k < n {
                // SAFETY: in bounds.
                local[k as usize] = unsafe { *values.add((base + k) as usize) };
                sum += local[k as usize];
            }
        }
        // SAFETY: launched as documented.
        let (mut running, total) = unsafe { block_exclusive_scan(dynamic_shared::<u64>(), sum) };
        for k in 0..SCAN_ITEMS as u64 {
            if base + k < n {
                // SAFETY: in bounds.
                unsafe { *values.add((base + k) as usize) = running };
                running += local[k as usize];
            }
        }
        if thread_idx_x() == 0 {
            // SAFETY: one total per block.
            unsafe { *chunk_totals.add(block_idx_x() as usize) = total };
        }
    }
}

kernel! {
    /// Adds `addends[tile]` to every `u64` of each tile of `SCAN_TILE` (the
    /// second level of a multi-level scan of tile sums).
    ///
    /// # Safety
    /// `values` holds `n` u64s, `addends` one per tile of `SCAN_TILE`.
    ///
    /// # Parameters
    /// - `values`, `n`: updated in place; `addends`: per-tile offsets.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration.
    pub unsafe extern "ptx-kernel" fn add_tile_offsets_u64(
        values: *mut u64,
        n: u64,
        addends: *const u64,
    ) as AddTileOffsetsU64Args {
        // SAFETY: `i < n`; `i / SCAN_TILE` indexes a tile.
        grid_stride(n, |i| unsafe { *values.add(i as usize) += *addends.add((i / SCAN_TILE) as usize) });
    }
}

kernel! {
    /// Per-tile counts of the non-zero flags among `n` `u32`s, for
    /// [`compact_tiles`] (whatever the values, each non-zero flag counts
    /// once, as [`compact_tiles`] keeps it once).
    ///
    /// # Safety
    /// As [`scan_tile_sums`], with `flags` for `input`.
    ///
    /// # Parameters
    /// - `flags`, `n`: the flags; `tile_sums`: receives each tile's count.
    ///
    /// # Thread mapping
    /// As [`scan_tile_sums`].
    pub unsafe extern "ptx-kernel" fn count_set_flags(
        flags: *const u32,
        n: u64,
        tile_sums: *mut u64,
    ) as CountSetFlagsArgs {
        // SAFETY: launched as documented; `i < n`.
        unsafe { tile_sum(n, |i| (*flags.add(i as usize) != 0) as u64, tile_sums) }
    }
}

kernel! {
    /// Order-preserving compaction without per-element offsets: each tile
    /// ranks its set (non-zero) flags in shared memory and writes their
    /// indices after the tile's offset (the exclusive scan of
    /// [`count_set_flags`] over the same flags).
    ///
    /// # Safety
    /// `flags` holds `n` u32s; `tile_offsets` one u64 per tile, the scan of
    /// [`count_set_flags`] over them; `out` one u32 per set flag; launched
    /// like [`scan_tile_sums`].
    ///
    /// # Parameters
    /// - `flags`, `n`; `tile_offsets`; `out`: the indices of the set flags.
    ///
    /// # Thread mapping
    /// Block `b` owns tile `b`; thread `t` owns elements `t * SCAN_ITEMS ..`.
    pub unsafe extern "ptx-kernel" fn compact_tiles(
        flags: *const u32,
        n: u64,
        tile_offsets: *const u64,
        out: *mut u32,
    ) as CompactTilesArgs {
        // SAFETY: launched as documented; `i < n`; positions stay below the
        // number of set flags.
        unsafe {
            tile_compact(n, |i| *flags.add(i as usize) != 0, tile_offsets, |i, pos| *out.add(pos as usize) = i as u32)
        }
    }
}

kernel! {
    /// Digit histogram of one radix pass: `hist[digit * n_tiles + tile]`.
    ///
    /// # Safety
    /// `keys` holds `n` u64s; `hist` `RADIX * n_tiles` u32s; launched with
    /// `SORT_THREADS` threads, one block per tile of `SORT_TILE`, and
    /// `RADIX * 4` bytes of shared memory.
    ///
    /// # Parameters
    /// - `keys`, `n`: the keys; `shift`: the digit's lowest bit; `hist`: output.
    ///
    /// # Thread mapping
    /// Block `b` counts tile `b` in shared memory with shared atomics.
    pub unsafe extern "ptx-kernel" fn radix_histogram(
        keys: *const u64,
        n: u64,
        shift: u32,
        hist: *mut u32,
    ) as RadixHistogramArgs {
        let counts = dynamic_shared::<u32>();
        let tid = thread_idx_x() as usize;
        // SAFETY: `RADIX == SORT_THREADS`, one entry per thread; barriers uniform.
        unsafe {
            *counts.add(tid) = 0;
            sync_threads();
            let base = block_idx_x() as u64 * SORT_TILE;
            for k in 0..SORT_ITEMS as u64 {
                let i = base + k * SORT_THREADS as u64 + tid as u64;
                if i < n {
                    let digit = ((*keys.add(i as usize) >> shift) as usize) & (RADIX - 1);
                    shared_atomic_add_u32(counts.add(digit), 1);
                }
            }
            sync_threads();
            *hist.add(tid * grid_dim_x() as usize + block_idx_x() as usize) = *counts.add(tid);
        }
    }
}

kernel! {
    /// Stable scatter of one radix pass.
    ///
    /// # Safety
    /// `keys_in`/`values_in` hold `n` u64s, `keys_out`/`values_out` `n` u64s;
    /// `offsets` is the exclusive scan of [`radix_histogram`]'s output (u64);
    /// launched like it, with `(SORT_WARPS * RADIX) * 4 + RADIX * 8` bytes of
    /// shared memory.
    ///
    /// # Parameters
    /// - `keys_in`, `values_in`, `n`: input; `shift`: the digit's lowest bit;
    ///   `offsets`: global start of each (digit, tile); outputs.
    ///
    /// # Thread mapping
    /// Block `b` owns tile `b` and processes it in `SORT_ITEMS` rounds of
    /// `SORT_THREADS` consecutive elements. In a round, lanes with equal digits
    /// find each other with `match.any`; a lane's rank is its peers below it
    /// plus the counts of earlier warps and earlier rounds for its digit.
    pub unsafe extern "ptx-kernel" fn radix_scatter(
        keys_in: *const u64,
        values_in: *const u64,
        n: u64,
        shift: u32,
        offsets: *const u64,
        keys_out: *mut u64,
        values_out: *mut u64,
    ) as RadixScatterArgs {
        let shared = dynamic_shared::<u32>();
        let warp_hist = shared; // [SORT_WARPS][RADIX]
                                // SAFETY: the running offsets follow the warp histograms; 8-aligned.
        let running = unsafe { shared.add(SORT_WARPS * RADIX) } as *mut u64; // [RADIX]
        let tid = thread_idx_x() as usize;
        let warp = tid / 32;
        let n_tiles = grid_dim_x() as usize;
        let tile = block_idx_x() as usize;
        // SAFETY: all indices below are within the documented shared layout
        // and the input/output lengths; every barrier is reached by all threads
        // and every warp-wide match by all 32 lanes (the loop is uniform).
        unsafe {
            *running.add(tid) = *offsets.add(tid * n_tiles + tile);
            let base = tile as u64 * SORT_TILE;
            for round in 0..SORT_ITEMS as u64 {
                for w in 0..SORT_WARPS {
                    *warp_hist.add(w * RADIX + tid) = 0;
                }
                sync_threads();
                let i = base + round * SORT_THREADS as u64 + tid as u64;
                let valid = i < n;
                let (key, value) = if valid { (*keys_in.add(i as usize), *values_in.add(i as usize)) } else { (0, 0) };
                let digit = ((key >> shift) as usize) & (RADIX - 1);
                // Invalid lanes match only each other (digit RADIX).
                let peers = match_any_u32(if valid { digit as u32 } else { RADIX as u32 });
                let rank_in_warp = (peers & lanemask_lt()).count_ones();
                let leader = (peers & lanemask_lt()) == 0;
                if valid && leader {
                    *warp_hist.add(warp * RADIX + digit) = peers.count_ones();
                }
                sync_threads();
                // Thread `tid` scans digit `tid` across the warps.
                let mut round_total = 0u32;
                for w in 0..SORT_WARPS {
                    let c = *warp_hist.add(w * RADIX + tid);
                    *warp_hist.add(w * RADIX + tid) = round_total;
                    round_total += c;
                }
                sync_threads();
                if valid {
                    let dest = *running.add(digit) + *warp_hist.add(warp * RADIX + digit) as u64 + rank_in_warp as u64;
                    *keys_out.add(dest as usize) = key;
                    *values_out.add(dest as usize) = value;
                }
                sync_threads();
                *running.add(tid) += round_total as u64;
                sync_threads();
            }
        }
    }
}

kernel! {
    /// Head flags of runs of equal sorted keys: `flags[i] = i == 0 || keys[i] != keys[i - 1]`.
    ///
    /// # Safety
    /// `keys` holds `n` u64s, `flags` `n` u32s.
    ///
    /// # Parameters
    /// - `keys`, `n`: sorted keys; `flags`: output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration.
    pub unsafe extern "ptx-kernel" fn run_heads(keys: *const u64, n: u64, flags: *mut u32) as RunHeadsArgs {
        grid_stride(n, |i| {
            // SAFETY: `i < n` and `i - 1 < n`.
            unsafe {
                let head = i == 0 || *keys.add(i as usize) != *keys.add(i as usize - 1);
                *flags.add(i as usize) = head as u32;
            }
        });
    }
}

/// Whether item `i` starts a run of equal values (`i == 0` or it differs
/// from the item before).
///
/// # Safety
/// `values` holds more than `i` u32s.
#[inline(always)]
unsafe fn starts_value_run(values: *const u32, i: u64) -> bool {
    // SAFETY: `i` and `i - 1` (when `i > 0`) are below the length.
    i == 0 || unsafe { *values.add(i as usize) != *values.add(i as usize - 1) }
}

kernel! {
    /// Per-tile counts of the runs of equal values that start in each tile,
    /// for [`emit_value_runs_u32`].
    ///
    /// # Safety
    /// As [`scan_tile_sums`], with `values` for `input`.
    ///
    /// # Parameters
    /// - `values`, `n`: the items; `tile_sums`: receives each tile's count.
    ///
    /// # Thread mapping
    /// As [`scan_tile_sums`].
    pub unsafe extern "ptx-kernel" fn count_value_runs_u32(
        values: *const u32,
        n: u64,
        tile_sums: *mut u64,
    ) as CountValueRunsU32Args {
        // SAFETY: launched as documented; `i < n`.
        unsafe { tile_sum(n, |i| starts_value_run(values, i) as u64, tile_sums) }
    }
}

kernel! {
    /// The run-length encoding of `values`: each run's first item and its
    /// value, after the tile's offset (the exclusive scan of
    /// [`count_value_runs_u32`] over the same values), in order.
    ///
    /// # Safety
    /// `values` holds `n` u32s (`n <= 2^32`); `tile_offsets` one u64 per
    /// tile, the scan of [`count_value_runs_u32`] over them; `starts` and
    /// `run_values` one u32 per run; launched like [`scan_tile_sums`].
    ///
    /// # Parameters
    /// - `values`, `n`; `tile_offsets`; `starts`, `run_values`: the runs.
    ///
    /// # Thread mapping
    /// Block `b` owns tile `b`; thread `t` owns elements `t * SCAN_ITEMS ..`.
    pub unsafe extern "ptx-kernel" fn emit_value_runs_u32(
        values: *const u32,
        n: u64,
        tile_offsets: *const u64,
        starts: *mut u32,
        run_values: *mut u32,
    ) as EmitValueRunsU32Args {
        // SAFETY: launched as documented; `i < n`; positions stay below the
        // number of runs.
        unsafe {
            tile_compact(n, |i| starts_value_run(values, i), tile_offsets, |i, pos| {
                *starts.add(pos as usize) = i as u32;
                *run_values.add(pos as usize) = *values.add(i as usize);
            })
        }
    }
}

/// Items per warp's tile in `expand_runs_u32`: 32 rows of 32.
const EXPAND_TILE: u64 = 1024;

kernel! {
    /// Runs written out: item `i` gets the value of the run that holds it
    /// (the last run whose start is at most `i`, as `run_containing` finds
    /// it).
    ///
    /// # Safety
    /// `starts` and `run_values` hold `n_runs >= 1` u32s, `out` `n`
    /// writable u32s (`n <= 2^32`); the block size is a multiple of 32.
    /// Whatever `starts` holds, the run indices stay below `n_runs`;
    /// ascending starts from 0 give the runs' values.
    ///
    /// # Parameters
    /// - `starts`, `run_values`, `n_runs`: the runs; `n`: the items; `out`.
    ///
    /// # Thread mapping
    /// Each warp takes tiles of `EXPAND_TILE` items in turn (a grid-stride
    /// loop over tiles). The tile's first run is searched once, by every
    /// lane alike (the same starts read across the warp); then each row of
    /// 32 items is written side by side, each lane stepping forward from
    /// the run of the row before's last item to its own (runs are about ten
    /// items on cell-like data: a step or two), instead of a binary search
    /// of some twenty dependent reads per item.
    pub unsafe extern "ptx-kernel" fn expand_runs_u32(
        starts: *const u32,
        run_values: *const u32,
        n_runs: u64,
        n: u64,
        out: *mut u32,
    ) as ExpandRunsU32Args {
        let lane = (thread_idx_x() & 31) as u64;
        let warps = grid_threads() / 32;
        let tiles = n.div_ceil(EXPAND_TILE);
        let mut tile = global_index() / 32;
        // Warp-uniform loops: every lane of a warp takes the same tiles and
        // rows, so the shuffle below has all 32 lanes.
        while tile < tiles {
            let first = tile * EXPAND_TILE;
            let end = (first + EXPAND_TILE).min(n);
            // SAFETY: the search's indices lie below `n_runs`.
            let mut k = run_containing(n_runs, first, |k| unsafe { *starts.add(k as usize) } as u64);
            let mut row = first;
            while row < end {
                let i = row + lane;
                if i < end {
                    // SAFETY: `k + 1 < n_runs` before each read, and `k`
                    // stays below `n_runs`; `i < n`.
                    unsafe {
                        while k + 1 < n_runs && *starts.add(k as usize + 1) as u64 <= i {
                            k += 1;
                        }
                        *out.add(i as usize) = *run_values.add(k as usize);
                    }
                }
                // The next row goes on from the run of this row's last item
                // (lane 31's; on a tile's last, partial row no row follows).
                // SAFETY: all 32 lanes reach this call together.
                k = unsafe { shuffle_u32(k as u32, 31) } as u64;
                row += 32;
            }
            tile += warps;
        }
    }
}

kernel! {
    /// Reduce-by-key over sorted keys: run `r` (numbered by the exclusive scan
    /// of the head flags) gets its key, its length and the sum of its values.
    ///
    /// # Safety
    /// `keys`, `values`: `n` u64s; `flags`: [`run_heads`]'s output; `run_offsets`:
    /// its exclusive scan; `out_keys`, `out_counts`, `out_sums`: one u64 per
    /// run, the last two zeroed before the launch.
    ///
    /// # Parameters
    /// - inputs as above; outputs per run.
    ///
    /// # Thread mapping
    /// Grid-stride loop; integer atomics make the sums independent of order.
    pub unsafe extern "ptx-kernel" fn reduce_runs(
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
                atomic_add_u64(out_counts.add(run as usize), 1);
                atomic_add_u64(out_sums.add(run as usize), *values.add(i as usize));
            }
        });
    }
}
