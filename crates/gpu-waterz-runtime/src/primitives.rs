//! Device-wide primitives: scan, compaction, radix sort, reduce-by-key.
//! Each function checks what its kernels assume, then launches them.

use crate::launch::{check_len, tiled_config, LaunchConfig};
use crate::{DeviceBuffer, Gpu, Result};
use gpu_waterz_abi::primitives::*;

/// Digits per radix pass, as a count of u64 entries.
const DIGITS: u64 = RADIX as u64;

/// The launch of one scan block per [`SCAN_TILE`] items.
fn scan_config(n: u64) -> Result<LaunchConfig> {
    tiled_config(n, SCAN_TILE, SCAN_THREADS, SCAN_SHARED_BYTES)
}

/// A new buffer holding `0, 1, ..., n - 1` (`n < 2^32`).
pub fn iota_u32(gpu: &Gpu, n: u64) -> Result<DeviceBuffer<u32>> {
    if n > u32::MAX as u64 {
        return Err(crate::RuntimeError::InvalidLaunch {
            kernel: "iota_u32",
            reason: format!("{n} indices do not fit u32"),
        });
    }
    let mut out = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        let args = IotaU32Args { out: out.as_mut_ptr(), n };
        // SAFETY: `out` holds at least `n` u32s.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(out)
}

/// `rows` rows of `row_len` values of `input` gathered into a new buffer:
/// row `r`'s value `c` is `input[offset + r * row_stride + c *
/// column_stride]` (a face of a C-order array, say). Fails where an index
/// lies past `input` or the output would be empty or hold 2^40 values or
/// more.
pub fn gather_rows_f32(
    gpu: &Gpu,
    input: &DeviceBuffer<f32>,
    offset: u64,
    [rows, row_stride]: [u64; 2],
    [row_len, column_stride]: [u64; 2],
) -> Result<DeviceBuffer<f32>> {
    const KERNEL: &str = "gather_rows_f32";
    gpu.check_device(input, "the values")?;
    let refuse = |reason: String| crate::RuntimeError::InvalidLaunch { kernel: KERNEL, reason };
    let n = rows.checked_mul(row_len).filter(|&n| n > 0 && n < 1 << 40);
    let Some(n) = n else { return Err(refuse(format!("{rows} rows of {row_len}: 1 to 2^40 - 1 values"))) };
    let last = (rows - 1)
        .checked_mul(row_stride)
        .and_then(|a| (row_len - 1).checked_mul(column_stride).and_then(|b| a.checked_add(b)))
        .and_then(|a| a.checked_add(offset));
    let Some(end) = last.and_then(|last| last.checked_add(1)) else {
        return Err(refuse("the indices overflow".into()));
    };
    check_len(KERNEL, "input", input, end)?;
    let mut out = gpu.uninit::<f32>(n as usize)?;
    let args = GatherRowsF32Args {
        input: input.as_ptr(),
        offset,
        rows,
        row_stride,
        row_len,
        column_stride,
        out: out.as_mut_ptr(),
    };
    // SAFETY: every index read is below `end`, inside `input` (checked
    // above); `out` holds the `n` values written.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(out)
}

/// Checks that pairs `start..start + n` of `high` and `low` lie in both
/// buffers, on this device (what the pair kernels read).
fn check_pairs(
    gpu: &Gpu,
    kernel: &'static str,
    high: &DeviceBuffer<u32>,
    low: &DeviceBuffer<u32>,
    start: u64,
    n: u64,
) -> Result<()> {
    gpu.check_device(high, "the upper halves")?;
    gpu.check_device(low, "the lower halves")?;
    let end = start.checked_add(n).ok_or_else(|| crate::RuntimeError::InvalidLaunch {
        kernel,
        reason: format!("pairs {start}..{start} + {n} overflow"),
    })?;
    check_len(kernel, "high", high, end)?;
    check_len(kernel, "low", low, end)
}

/// Pairs `start..start + n` of two u32 buffers packed into u64 keys,
/// `high << 32 | low` (a new buffer of `n` keys).
pub fn pack_u32_pairs(
    gpu: &Gpu,
    high: &DeviceBuffer<u32>,
    low: &DeviceBuffer<u32>,
    start: u64,
    n: u64,
) -> Result<DeviceBuffer<u64>> {
    const K: &str = "pack_u32_pairs";
    check_pairs(gpu, K, high, low, start, n)?;
    let mut out = gpu.uninit::<u64>(n.max(1) as usize)?;
    if n > 0 {
        let args = PackU32PairsArgs { high: high.as_ptr(), low: low.as_ptr(), start, n, out: out.as_mut_ptr() };
        // SAFETY: both halves hold `start + n` u32s (checked), `out` `n` u64s.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(out)
}

/// The distinct pairs `high[start + i] << 32 | low[start + i]` (`i < n`)
/// whose high half is not 0, each with its number of occurrences, counted
/// on the device in an open-addressing hash table of `capacity` slots
/// (rounded up to a power of two); only the table comes back. Returns
/// `None` when the pairs did not fit the table (then some counts are
/// missing: ask again with more slots, at most `n` distinct pairs exist).
/// A pair equal to [`EMPTY_PAIR_KEY`] (both halves `u32::MAX`) is an error.
/// The pairs come in no particular order; the counts are exact.
pub fn count_u32_pairs(
    gpu: &Gpu,
    high: &DeviceBuffer<u32>,
    low: &DeviceBuffer<u32>,
    start: u64,
    n: u64,
    capacity: u64,
) -> Result<Option<Vec<(u64, u64)>>> {
    const K: &str = "count_u32_pairs";
    check_pairs(gpu, K, high, low, start, n)?;
    let capacity = capacity.max(2).checked_next_power_of_two().ok_or_else(|| crate::RuntimeError::InvalidLaunch {
        kernel: K,
        reason: format!("a table of {capacity} slots"),
    })?;
    let mut keys = gpu.uninit::<u64>(capacity as usize)?;
    gpu.memset_bytes(&mut keys, 0xFF)?;
    let mut counts = gpu.zeros::<u64>(capacity as usize)?;
    let mut overflow = gpu.zeros::<u32>(1)?;
    if n > 0 {
        let args = CountU32PairsArgs {
            high: high.as_ptr(),
            low: low.as_ptr(),
            start,
            n,
            keys: keys.as_mut_ptr(),
            counts: counts.as_mut_ptr(),
            capacity,
            overflow: overflow.as_mut_ptr(),
        };
        let runs = n.div_ceil(COUNT_PAIRS_RUN);
        // SAFETY: both halves hold `start + n` u32s (checked); `keys` and
        // `counts` hold `capacity` (a power of two) elements, set to
        // EMPTY_PAIR_KEY and 0; `overflow` one u32.
        unsafe { gpu.launch(gpu.grid_stride_config(runs), args) }?;
    }
    if gpu.download_element(&overflow, 0)? != 0 {
        return Ok(None);
    }
    let keys = gpu.download(&keys)?;
    let counts = gpu.download(&counts)?;
    let mut pairs = Vec::new();
    for (key, count) in keys.into_iter().zip(counts) {
        if key == EMPTY_PAIR_KEY {
            if count != 0 {
                return Err(crate::RuntimeError::InvalidLaunch {
                    kernel: K,
                    reason: "a pair of two u32::MAX halves cannot be counted".into(),
                });
            }
            continue;
        }
        pairs.push((key, count));
    }
    Ok(Some(pairs))
}

/// The low 32 bits of every value of `input` (a new buffer), and the
/// largest value: when it exceeds `u32::MAX` the low halves lost bits.
pub fn narrow_u64_to_u32(gpu: &Gpu, input: &DeviceBuffer<u64>) -> Result<(DeviceBuffer<u32>, u64)> {
    gpu.check_device(input, "the values")?;
    let n = input.len() as u64;
    let mut out = gpu.uninit::<u32>(input.len().max(1))?;
    let mut max = gpu.zeros::<u64>(1)?;
    if n > 0 {
        let args = NarrowU64ToU32Args { input: input.as_ptr(), n, out: out.as_mut_ptr(), max: max.as_mut_ptr() };
        // SAFETY: `input` holds `n` u64s, `out` at least `n` u32s, `max` one
        // zeroed u64.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok((out, gpu.download_element(&max, 0)?))
}

/// Scans the first `n` u64s of `values` in place (exclusive), in levels of
/// `SCAN_TILE`.
fn scan_u64_in_place(gpu: &Gpu, values: &mut DeviceBuffer<u64>, n: u64) -> Result<()> {
    let chunks = n.div_ceil(SCAN_TILE).max(1);
    let mut totals = gpu.uninit::<u64>(chunks as usize)?;
    check_len("scan_chunks_u64", "values", values, n)?;
    let args = ScanChunksU64Args { values: values.as_mut_ptr(), n, chunk_totals: totals.as_mut_ptr() };
    // SAFETY: `values` holds `n` u64s, `totals` one per chunk; the launch
    // has one block of SCAN_THREADS per chunk and the shared memory needed.
    unsafe { gpu.launch(scan_config(n)?, args) }?;
    if chunks > 1 {
        scan_u64_in_place(gpu, &mut totals, chunks)?;
        let args = AddTileOffsetsU64Args { values: values.as_mut_ptr(), n, addends: totals.as_ptr() };
        // SAFETY: `values` holds `n` u64s and `totals` one per chunk.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(())
}

/// The exclusive prefix sums of the first `n` u32s of `input`, as u64s,
/// and their total (downloaded, so this synchronizes).
pub fn exclusive_scan(gpu: &Gpu, input: &DeviceBuffer<u32>, n: u64) -> Result<(DeviceBuffer<u64>, u64)> {
    gpu.check_device(input, "the scan's input")?;
    check_len("scan_tiles", "input", input, n)?;
    if n == 0 {
        return Ok((gpu.zeros::<u64>(1)?, 0));
    }
    let tiles = n.div_ceil(SCAN_TILE);
    let mut tile_sums = gpu.uninit::<u64>(tiles as usize)?;
    let cfg = scan_config(n)?;
    let args = ScanTileSumsArgs { input: input.as_ptr(), n, tile_sums: tile_sums.as_mut_ptr() };
    // SAFETY: `input` holds `n` u32s, `tile_sums` one u64 per tile; one
    // block of SCAN_THREADS per tile with its shared memory.
    unsafe { gpu.launch(cfg, args) }?;
    scan_u64_in_place(gpu, &mut tile_sums, tiles)?;
    let mut output = gpu.uninit::<u64>(n as usize)?;
    let mut total = gpu.uninit::<u64>(1)?;
    let args = ScanTilesArgs {
        input: input.as_ptr(),
        n,
        tile_offsets: tile_sums.as_ptr(),
        output: output.as_mut_ptr(),
        total: total.as_mut_ptr(),
    };
    // SAFETY: as above; `output` holds `n` u64s, `total` one.
    unsafe { gpu.launch(cfg, args) }?;
    let total = gpu.download(&total)?[0];
    Ok((output, total))
}

/// The indices `i < n` with `flags[i] != 0`, in order, and
/// their number. Tiles rank their flags in shared memory; no per-element
/// offsets are materialized.
pub fn compact_indices(gpu: &Gpu, flags: &DeviceBuffer<u32>, n: u64) -> Result<(DeviceBuffer<u32>, u64)> {
    gpu.check_device(flags, "the flags")?;
    check_len("compact_tiles", "flags", flags, n)?;
    let mut out = None;
    let count = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            let args = CountSetFlagsArgs { flags: flags.as_ptr(), n, tile_sums };
            // SAFETY: `flags` holds n u32s, `tile_sums` one u64 per tile;
            // one block of SCAN_THREADS per tile with its shared memory.
            unsafe { gpu.launch(cfg, args) }
        },
        |cfg, tile_offsets, count| {
            let mut indices = gpu.uninit::<u32>(count.max(1) as usize)?;
            let args = CompactTilesArgs { flags: flags.as_ptr(), n, tile_offsets, out: indices.as_mut_ptr() };
            // SAFETY: as above; `tile_offsets` is the scan of the tiles'
            // counts of non-zero flags, which `compact_tiles` keeps, and
            // `indices` holds one u32 per such flag (at most `n`).
            unsafe { gpu.launch(cfg, args) }?;
            out = Some(indices);
            Ok(())
        },
    )?;
    Ok((out.map_or_else(|| gpu.zeros(1), Ok)?, count))
}

/// The run-length encoding of the first `n` u32s of `values` (runs of
/// equal neighbours, in order): each run's first item and its value (new
/// buffers of at least one element) and the number of runs; `n` at most
/// 2^32. One pass counts the runs per tile, a second writes them.
pub fn value_runs_u32(
    gpu: &Gpu,
    values: &DeviceBuffer<u32>,
    n: u64,
) -> Result<(DeviceBuffer<u32>, DeviceBuffer<u32>, u64)> {
    gpu.check_device(values, "the values")?;
    check_len("emit_value_runs_u32", "values", values, n)?;
    check_u32_items("emit_value_runs_u32", n)?;
    let mut out = None;
    let count = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            let args = CountValueRunsU32Args { values: values.as_ptr(), n, tile_sums };
            // SAFETY: `values` holds n u32s, `tile_sums` one u64 per tile;
            // one block of SCAN_THREADS per tile with its shared memory.
            unsafe { gpu.launch(cfg, args) }
        },
        |cfg, tile_offsets, count| {
            let mut starts = gpu.uninit::<u32>(count as usize)?;
            let mut run_values = gpu.uninit::<u32>(count as usize)?;
            let args = EmitValueRunsU32Args {
                values: values.as_ptr(),
                n,
                tile_offsets,
                starts: starts.as_mut_ptr(),
                run_values: run_values.as_mut_ptr(),
            };
            // SAFETY: as above; `tile_offsets` is the scan of the tiles' run
            // counts over the same values, and `starts` and `run_values`
            // hold one u32 per run (`count`, which `n <= 2^32` bounds).
            unsafe { gpu.launch(cfg, args) }?;
            out = Some((starts, run_values));
            Ok(())
        },
    )?;
    let (starts, run_values) = match out {
        Some(runs) => runs,
        None => (gpu.zeros(1)?, gpu.zeros(1)?),
    };
    Ok((starts, run_values, count))
}

/// Runs written out, one value per item: `n` items (at most 2^32) from
/// `n_runs` runs given by their first items (`starts`: ascending from 0)
/// and values; a new buffer of at least one element. The starts are not
/// checked here (the kernel stays in bounds whatever they hold; other
/// starts give other values): callers check them where they make them.
pub fn expand_runs_u32(
    gpu: &Gpu,
    starts: &DeviceBuffer<u32>,
    run_values: &DeviceBuffer<u32>,
    n_runs: u64,
    n: u64,
) -> Result<DeviceBuffer<u32>> {
    gpu.check_device(starts, "the runs' starts")?;
    gpu.check_device(run_values, "the runs' values")?;
    check_len("expand_runs_u32", "starts", starts, n_runs)?;
    check_len("expand_runs_u32", "run_values", run_values, n_runs)?;
    check_u32_items("expand_runs_u32", n)?;
    if n > 0 && n_runs == 0 {
        return Err(crate::RuntimeError::InvalidLaunch {
            kernel: "expand_runs_u32",
            reason: format!("no runs for {n} items"),
        });
    }
    let mut out = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        let args = ExpandRunsU32Args {
            starts: starts.as_ptr(),
            run_values: run_values.as_ptr(),
            n_runs,
            n,
            out: out.as_mut_ptr(),
        };
        // SAFETY: `starts` and `run_values` hold `n_runs >= 1` u32s (the
        // runs' indices stay below it), `out` `n` u32s; the grid-stride
        // configuration's blocks are `BLOCK` threads, a multiple of 32.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(out)
}

/// Fails unless `n` items are indexed by u32 (at most 2^32).
fn check_u32_items(kernel: &'static str, n: u64) -> Result<()> {
    if n > 1 << 32 {
        return Err(crate::RuntimeError::InvalidLaunch {
            kernel,
            reason: format!("{n} items: at most 2^32 are taken"),
        });
    }
    Ok(())
}

/// An order-preserving compaction in two launches over scan tiles of
/// `n` items: `count(cfg, tile_sums)` launches a kernel that writes each
/// tile's count to `tile_sums` (one u64 per tile of [`SCAN_TILE`]); after
/// their exclusive scan, `emit(cfg, tile_offsets, total)` launches the
/// kernel that writes the kept items from each tile's offset. `emit` is
/// skipped when nothing is kept. Returns the total. The kernels are built
/// on `tile_sum` and `tile_compact` (`kernels-rs/src/primitives.rs`) and
/// launched with `cfg`; the pointers handed to the closures address live
/// buffers of one u64 per tile (plus one).
pub fn tile_compaction(
    gpu: &Gpu,
    n: u64,
    count: impl FnOnce(LaunchConfig, *mut u64) -> Result<()>,
    emit: impl FnOnce(LaunchConfig, *const u64, u64) -> Result<()>,
) -> Result<u64> {
    if n == 0 {
        return Ok(0);
    }
    let tiles = n.div_ceil(SCAN_TILE);
    // One extra zeroed entry: after the exclusive scan it holds the total.
    let mut tile_offsets = gpu.zeros::<u64>(tiles as usize + 1)?;
    let cfg = scan_config(n)?;
    count(cfg, tile_offsets.as_mut_ptr())?;
    scan_u64_in_place(gpu, &mut tile_offsets, tiles + 1)?;
    let total = gpu.download_element(&tile_offsets, tiles as usize)?;
    if total > 0 {
        emit(cfg, tile_offsets.as_ptr(), total)?;
    }
    Ok(total)
}

/// The digit shifts a sort must visit for keys whose set bits all lie in
/// `[0, low_bits)` or `[32, 32 + high_bits)`.
pub fn digit_shifts(low_bits: u32, high_bits: u32) -> Vec<u32> {
    (0..64).step_by(8).filter(|&s| (s < low_bits.min(32)) || (s >= 32 && s < 32 + high_bits.min(32))).collect()
}

/// Sorts the first `n` (key, value) pairs by key, stably (LSD radix sort,
/// 8-bit digits), visiting only the digits at `shifts` (ascending).
pub fn radix_sort_pairs(
    gpu: &Gpu,
    keys: DeviceBuffer<u64>,
    values: DeviceBuffer<u64>,
    n: u64,
    shifts: &[u32],
) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u64>)> {
    check_len("radix_scatter", "keys", &keys, n)?;
    check_len("radix_scatter", "values", &values, n)?;
    gpu.check_device(&keys, "the keys")?;
    gpu.check_device(&values, "the values")?;
    if n <= 1 || shifts.is_empty() {
        return Ok((keys, values));
    }
    let tiles = n.div_ceil(SORT_TILE);
    let mut hist = gpu.uninit::<u32>((DIGITS * tiles) as usize)?;
    let (mut keys, mut values) = (keys, values);
    let mut keys_alt = gpu.uninit::<u64>(n as usize)?;
    let mut values_alt = gpu.uninit::<u64>(n as usize)?;
    let hist_cfg = tiled_config(n, SORT_TILE, SORT_THREADS, RADIX_HISTOGRAM_SHARED_BYTES)?;
    let scatter_cfg = tiled_config(n, SORT_TILE, SORT_THREADS, RADIX_SCATTER_SHARED_BYTES)?;
    for &shift in shifts {
        if shift >= 64 {
            return Err(crate::RuntimeError::InvalidLaunch {
                kernel: "radix_histogram",
                reason: format!("digit shift {shift} is outside a 64-bit key"),
            });
        }
        let args = RadixHistogramArgs { keys: keys.as_ptr(), n, shift, hist: hist.as_mut_ptr() };
        // SAFETY: `keys` holds `n` u64s, `hist` RADIX per tile; one block of
        // SORT_THREADS (== RADIX) per tile with RADIX u32s of shared memory.
        unsafe { gpu.launch(hist_cfg, args) }?;
        let (offsets, _) = exclusive_scan(gpu, &hist, DIGITS * tiles)?;
        let args = RadixScatterArgs {
            keys_in: keys.as_ptr(),
            values_in: values.as_ptr(),
            n,
            shift,
            offsets: offsets.as_ptr(),
            keys_out: keys_alt.as_mut_ptr(),
            values_out: values_alt.as_mut_ptr(),
        };
        // SAFETY: inputs and outputs hold `n` u64s; `offsets` is the scan of
        // this pass's histogram; the shared memory fits the warp histograms
        // and RADIX running offsets.
        unsafe { gpu.launch(scatter_cfg, args) }?;
        std::mem::swap(&mut keys, &mut keys_alt);
        std::mem::swap(&mut values, &mut values_alt);
    }
    Ok((keys, values))
}

/// Runs of equal keys reduced: one key, count and value sum per run.
#[derive(Debug)]
pub struct ReducedRuns {
    /// The key of each run.
    pub keys: DeviceBuffer<u64>,
    /// Elements per run.
    pub counts: DeviceBuffer<u64>,
    /// Sum of the values per run (wrapping u64).
    pub sums: DeviceBuffer<u64>,
    /// The number of runs.
    pub n_runs: u64,
}

/// Reduce-by-key over the first `n` sorted keys.
pub fn reduce_by_key(gpu: &Gpu, keys: &DeviceBuffer<u64>, values: &DeviceBuffer<u64>, n: u64) -> Result<ReducedRuns> {
    reduce_runs_with(gpu, keys, values, n, false)
}

/// Reduce-by-key over sorted keys whose values pack
/// `count << gpu_waterz_abi::graph::PACKED_SUM_BITS | sum`
/// (as the region graph's face aggregation writes them): counts and sums are
/// unpacked and added separately.
pub fn reduce_packed_by_key(
    gpu: &Gpu,
    keys: &DeviceBuffer<u64>,
    values: &DeviceBuffer<u64>,
    n: u64,
) -> Result<ReducedRuns> {
    reduce_runs_with(gpu, keys, values, n, true)
}

fn reduce_runs_with(
    gpu: &Gpu,
    keys: &DeviceBuffer<u64>,
    values: &DeviceBuffer<u64>,
    n: u64,
    packed: bool,
) -> Result<ReducedRuns> {
    check_len("reduce_runs", "keys", keys, n)?;
    check_len("reduce_runs", "values", values, n)?;
    gpu.check_device(keys, "the keys")?;
    gpu.check_device(values, "the values")?;
    if n == 0 {
        return Ok(ReducedRuns { keys: gpu.zeros(1)?, counts: gpu.zeros(1)?, sums: gpu.zeros(1)?, n_runs: 0 });
    }
    let mut flags = gpu.uninit::<u32>(n as usize)?;
    let args = RunHeadsArgs { keys: keys.as_ptr(), n, flags: flags.as_mut_ptr() };
    // SAFETY: `keys` holds `n` u64s, `flags` `n` u32s.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    let (offsets, n_runs) = exclusive_scan(gpu, &flags, n)?;
    let mut out_keys = gpu.uninit::<u64>(n_runs as usize)?;
    let mut counts = gpu.zeros::<u64>(n_runs as usize)?;
    let mut sums = gpu.zeros::<u64>(n_runs as usize)?;
    let cfg = gpu.grid_stride_config(n);
    let args = ReduceRunsArgs {
        keys: keys.as_ptr(),
        values: values.as_ptr(),
        n,
        flags: flags.as_ptr(),
        run_offsets: offsets.as_ptr(),
        out_keys: out_keys.as_mut_ptr(),
        out_counts: counts.as_mut_ptr(),
        out_sums: sums.as_mut_ptr(),
    };
    if packed {
        // SAFETY: `flags`/`offsets` describe `n_runs` runs of the `n` sorted
        // keys; the outputs hold one u64 per run, counts and sums zeroed.
        unsafe { gpu.launch(cfg, ReduceRunsPackedArgs(args)) }?;
    } else {
        // SAFETY: as above.
        unsafe { gpu.launch(cfg, args) }?;
    }
    Ok(ReducedRuns { keys: out_keys, counts, sums, n_runs })
}

/// The exact sum of a device buffer of `u32`s, as a `u64`.
///
/// Runs the Rust kernel `sum_u32` (shared-memory tree per block, one global
/// atomic per block) and downloads the one result.
pub fn sum_u32(gpu: &Gpu, input: &DeviceBuffer<u32>) -> Result<u64> {
    gpu.check_device(input, "the input")?;
    use gpu_waterz_abi::{SumU32Args, REDUCE_THREADS};
    let n = input.len() as u64;
    if n == 0 {
        return Ok(0);
    }
    let mut output = gpu.zeros::<u64>(1)?;
    let blocks_needed = n.div_ceil(REDUCE_THREADS as u64);
    let max_blocks = gpu.multiprocessor_count() as u64 * 8;
    let cfg = LaunchConfig {
        blocks: blocks_needed.min(max_blocks) as u32,
        threads: REDUCE_THREADS,
        shared_bytes: REDUCE_THREADS * 8,
    };
    let args = SumU32Args { input: input.as_ptr(), n, output: output.as_mut_ptr() };
    // SAFETY: `input` holds `n` u32s, `output` one zeroed u64; the block is
    // a power of two with `REDUCE_THREADS * 8` bytes of shared memory.
    unsafe { gpu.launch(cfg, args) }?;
    Ok(gpu.download(&output)?[0])
}

#[cfg(test)]
mod tests {
    #[test]
    fn digit_shifts_cover_both_halves() {
        assert_eq!(super::digit_shifts(10, 10), vec![0, 8, 32, 40]);
        assert_eq!(super::digit_shifts(32, 32), vec![0, 8, 16, 24, 32, 40, 48, 56]);
        assert_eq!(super::digit_shifts(1, 1), vec![0, 32]);
        assert_eq!(super::digit_shifts(0, 0), Vec::<u32>::new());
    }
}
