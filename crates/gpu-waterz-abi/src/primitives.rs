//! Launch constants, shared-memory layouts and argument structs of the
//! device-wide primitives (scan, compaction, radix sort, reduce-by-key).

/// Threads per block of the scan and compaction kernels.
pub const SCAN_THREADS: u32 = 256;
/// Consecutive elements per thread in the scan kernels.
pub const SCAN_ITEMS: u32 = 4;
/// Elements per scan tile (one block).
pub const SCAN_TILE: u64 = (SCAN_THREADS * SCAN_ITEMS) as u64;
/// Dynamic shared memory of a scan block: one u64 per thread.
pub const SCAN_SHARED_BYTES: u32 = SCAN_THREADS * 8;

/// Threads per block of the radix-sort kernels (8 warps).
pub const SORT_THREADS: u32 = 256;
/// Warps per radix-sort block.
pub const SORT_WARPS: u32 = SORT_THREADS / 32;
/// Elements per thread per tile in the radix-sort kernels.
pub const SORT_ITEMS: u32 = 8;
/// Elements per radix-sort tile (one block).
pub const SORT_TILE: u64 = (SORT_THREADS * SORT_ITEMS) as u64;
/// Bits per radix digit.
pub const RADIX_BITS: u32 = 8;
/// Digits per radix pass (equal to [`SORT_THREADS`]: one per thread).
pub const RADIX: u32 = 1 << RADIX_BITS;
/// Dynamic shared memory of `radix_histogram`: one u32 counter per digit.
pub const RADIX_HISTOGRAM_SHARED_BYTES: u32 = RADIX * 4;
/// Dynamic shared memory of `radix_scatter`: `[SORT_WARPS][RADIX]` u32 warp
/// histograms, then `[RADIX]` u64 running offsets (8-aligned after them).
pub const RADIX_SCATTER_SHARED_BYTES: u32 = SORT_WARPS * RADIX * 4 + RADIX * 8;

const _: () = assert!(RADIX == SORT_THREADS, "radix_histogram gives each thread one digit");

/// `iota_u32`: `out[i] = i` for `i < n`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IotaU32Args {
    /// `n` writable u32s.
    pub out: *mut u32,
    /// How many to write (at most 2^32).
    pub n: u64,
}

/// `pack_u32_pairs`: `out[i] = high[start + i] << 32 | low[start + i]`
/// for `i < n`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PackU32PairsArgs {
    /// `start + n` u32s, the upper halves.
    pub high: *const u32,
    /// `start + n` u32s, the lower halves.
    pub low: *const u32,
    /// The first pair.
    pub start: u64,
    /// How many pairs.
    pub n: u64,
    /// `n` writable u64s.
    pub out: *mut u64,
}

/// Consecutive elements each thread of `count_u32_pairs` reads, adding
/// one count per run of equal pairs among them.
pub const COUNT_PAIRS_RUN: u64 = 16;

/// The key of a free slot of `count_u32_pairs`'s table: no pair packs to it
/// as long as the low halves stay below `u32::MAX`.
pub const EMPTY_PAIR_KEY: u64 = u64::MAX;

/// `count_u32_pairs`: counts the distinct pairs
/// `high[start + i] << 32 | low[start + i]` (`i < n`, pairs whose high half
/// is 0 skipped) into an open-addressing hash table of `capacity` slots.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CountU32PairsArgs {
    /// `start + n` u32s, the upper halves (0: not counted).
    pub high: *const u32,
    /// `start + n` u32s, the lower halves (below `u32::MAX`).
    pub low: *const u32,
    /// The first pair.
    pub start: u64,
    /// How many pairs.
    pub n: u64,
    /// `capacity` keys, [`EMPTY_PAIR_KEY`] where free.
    pub keys: *mut u64,
    /// `capacity` counts, 0 where free.
    pub counts: *mut u64,
    /// The table's slots, a power of two.
    pub capacity: u64,
    /// One u32: non-zero when a pair found the table full (its count is
    /// then missing, and the table must be rebuilt larger).
    pub overflow: *mut u32,
}

/// `narrow_u64_to_u32`: `out[i] = input[i] as u32` for `i < n`, and the
/// largest input value into `max`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NarrowU64ToU32Args {
    /// `n` u64s.
    pub input: *const u64,
    /// How many.
    pub n: u64,
    /// `n` writable u32s: the low halves.
    pub out: *mut u32,
    /// One u64, 0 before the launch: the largest value of `input` after it.
    pub max: *mut u64,
}

/// `scan_tile_sums`: each tile's sum of `n` u32s.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ScanTileSumsArgs {
    /// `n` u32s.
    pub input: *const u32,
    /// How many.
    pub n: u64,
    /// One u64 per tile of [`SCAN_TILE`].
    pub tile_sums: *mut u64,
}

/// `scan_tiles`: the exclusive scan of `n` u32s given the scanned tile sums.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ScanTilesArgs {
    /// `n` u32s.
    pub input: *const u32,
    /// How many.
    pub n: u64,
    /// One u64 per tile: the exclusive scan of the tile sums.
    pub tile_offsets: *const u64,
    /// `n` u64s: the exclusive prefix sums.
    pub output: *mut u64,
    /// One u64: the sum of all values.
    pub total: *mut u64,
}

/// `scan_chunks_u64`: exclusive scan of each chunk of [`SCAN_TILE`] u64s in
/// place, with each chunk's total.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ScanChunksU64Args {
    /// `n` u64s, scanned in place per chunk.
    pub values: *mut u64,
    /// How many.
    pub n: u64,
    /// One u64 per chunk.
    pub chunk_totals: *mut u64,
}

/// `add_tile_offsets_u64`: adds each tile's addend to its [`SCAN_TILE`] values.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AddTileOffsetsU64Args {
    /// `n` u64s, updated in place.
    pub values: *mut u64,
    /// How many.
    pub n: u64,
    /// One u64 per tile.
    pub addends: *const u64,
}

/// `count_set_flags`: each tile's number of non-zero flags among `n` u32s.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CountSetFlagsArgs {
    /// `n` u32s.
    pub flags: *const u32,
    /// How many.
    pub n: u64,
    /// One u64 per tile of [`SCAN_TILE`].
    pub tile_sums: *mut u64,
}

/// `compact_tiles`: the indices of the set flags, in order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CompactTilesArgs {
    /// `n` u32s; the non-zero ones are kept.
    pub flags: *const u32,
    /// How many.
    pub n: u64,
    /// One u64 per tile: the exclusive scan of `count_set_flags`' counts.
    pub tile_offsets: *const u64,
    /// One u32 per set flag.
    pub out: *mut u32,
}

/// `radix_histogram`: digit counts of one radix pass, `hist[digit * n_tiles + tile]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RadixHistogramArgs {
    /// `n` u64 keys.
    pub keys: *const u64,
    /// How many.
    pub n: u64,
    /// The digit's lowest bit.
    pub shift: u32,
    /// `RADIX * n_tiles` u32s.
    pub hist: *mut u32,
}

/// `radix_scatter`: the stable scatter of one radix pass.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RadixScatterArgs {
    /// `n` u64 keys.
    pub keys_in: *const u64,
    /// `n` u64 values.
    pub values_in: *const u64,
    /// How many.
    pub n: u64,
    /// The digit's lowest bit.
    pub shift: u32,
    /// `RADIX * n_tiles` u64s: the exclusive scan of the histogram.
    pub offsets: *const u64,
    /// `n` u64s.
    pub keys_out: *mut u64,
    /// `n` u64s.
    pub values_out: *mut u64,
}

/// `run_heads`: `flags[i] = i == 0 || keys[i] != keys[i - 1]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RunHeadsArgs {
    /// `n` sorted u64 keys.
    pub keys: *const u64,
    /// How many.
    pub n: u64,
    /// `n` u32s.
    pub flags: *mut u32,
}

/// `count_value_runs_u32`: per-tile counts of the runs' first items
/// (`i == 0` or `values[i] != values[i - 1]`), for `emit_value_runs_u32`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CountValueRunsU32Args {
    /// `n` u32s.
    pub values: *const u32,
    /// How many.
    pub n: u64,
    /// One u64 per tile of [`SCAN_TILE`].
    pub tile_sums: *mut u64,
}

/// `emit_value_runs_u32`: the run-length encoding of `values`, each run's
/// first item and value, in order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EmitValueRunsU32Args {
    /// `n` u32s.
    pub values: *const u32,
    /// How many (at most 2^32).
    pub n: u64,
    /// One u64 per tile: the exclusive scan of `count_value_runs_u32`'s counts.
    pub tile_offsets: *const u64,
    /// One u32 per run: its first item.
    pub starts: *mut u32,
    /// One u32 per run: its value.
    pub run_values: *mut u32,
}

/// `expand_runs_u32`: runs (first items ascending from 0, values) written
/// out one value per item.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExpandRunsU32Args {
    /// `n_runs` u32s, ascending, the first 0.
    pub starts: *const u32,
    /// `n_runs` u32s.
    pub run_values: *const u32,
    /// How many runs (at least 1).
    pub n_runs: u64,
    /// Items (at most 2^32).
    pub n: u64,
    /// `n` writable u32s.
    pub out: *mut u32,
}

/// The run that holds item `i` among `n_runs` (at least 1) runs whose
/// first items `start(k)` ascend from `start(0) == 0`: the last `k` with
/// `start(k) <= i` (a binary search; the kernels' and the host's).
#[inline(always)]
pub fn run_containing(n_runs: u64, i: u64, start: impl Fn(u64) -> u64) -> u64 {
    let (mut lo, mut hi) = (0u64, n_runs);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if start(mid) <= i {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `reduce_runs` and `reduce_runs_packed`: reduce-by-key over sorted keys.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ReduceRunsArgs {
    /// `n` sorted u64 keys.
    pub keys: *const u64,
    /// `n` u64 values (for `reduce_runs_packed`, `count << 40 | sum`).
    pub values: *const u64,
    /// How many.
    pub n: u64,
    /// `run_heads`'s flags.
    pub flags: *const u32,
    /// The exclusive scan of the flags.
    pub run_offsets: *const u64,
    /// One u64 per run.
    pub out_keys: *mut u64,
    /// One u64 per run, zeroed before the launch.
    pub out_counts: *mut u64,
    /// One u64 per run, zeroed before the launch.
    pub out_sums: *mut u64,
}

/// `reduce_runs_packed` takes the same parameters as `reduce_runs`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct ReduceRunsPackedArgs(pub ReduceRunsArgs);

/// `gather_rows_f32`: `out[r * row_len + c] = input[offset + r *
/// row_stride + c * column_stride]` for `r < rows`, `c < row_len`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GatherRowsF32Args {
    /// The values read.
    pub input: *const f32,
    /// The first value read.
    pub offset: u64,
    /// The rows, and the values between one row's first and the next's.
    pub rows: u64,
    /// See `rows`.
    pub row_stride: u64,
    /// The values per row, and the values between two of them.
    pub row_len: u64,
    /// See `row_len`.
    pub column_stride: u64,
    /// `rows * row_len` writable f32s.
    pub out: *mut f32,
}

impl_kernel_args!(
    IotaU32Args => IotaU32 { out, n },
    GatherRowsF32Args => GatherRowsF32 { input, offset, rows, row_stride, row_len, column_stride, out },
    PackU32PairsArgs => PackU32Pairs { high, low, start, n, out },
    CountU32PairsArgs => CountU32Pairs { high, low, start, n, keys, counts, capacity, overflow },
    NarrowU64ToU32Args => NarrowU64ToU32 { input, n, out, max },
    ScanTileSumsArgs => ScanTileSums { input, n, tile_sums },
    ScanTilesArgs => ScanTiles { input, n, tile_offsets, output, total },
    ScanChunksU64Args => ScanChunksU64 { values, n, chunk_totals },
    AddTileOffsetsU64Args => AddTileOffsetsU64 { values, n, addends },
    CountSetFlagsArgs => CountSetFlags { flags, n, tile_sums },
    CompactTilesArgs => CompactTiles { flags, n, tile_offsets, out },
    RadixHistogramArgs => RadixHistogram { keys, n, shift, hist },
    RadixScatterArgs => RadixScatter { keys_in, values_in, n, shift, offsets, keys_out, values_out },
    RunHeadsArgs => RunHeads { keys, n, flags },
    CountValueRunsU32Args => CountValueRunsU32 { values, n, tile_sums },
    EmitValueRunsU32Args => EmitValueRunsU32 { values, n, tile_offsets, starts, run_values },
    ExpandRunsU32Args => ExpandRunsU32 { starts, run_values, n_runs, n, out },
    ReduceRunsArgs => ReduceRuns { keys, values, n, flags, run_offsets, out_keys, out_counts, out_sums },
);

impl crate::kernel::KernelArgs for ReduceRunsPackedArgs {
    const KERNEL: crate::kernel::Kernel = crate::kernel::Kernel::ReduceRunsPacked;

    fn param_pointers(&mut self, out: &mut [*mut core::ffi::c_void; crate::kernel::MAX_PARAMS]) -> usize {
        self.0.param_pointers(out)
    }

    fn param_sizes(out: &mut [usize; crate::kernel::MAX_PARAMS]) -> usize {
        ReduceRunsArgs::param_sizes(out)
    }
}
