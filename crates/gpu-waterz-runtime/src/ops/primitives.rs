//! Device-wide primitives: scan, compaction, radix sort, reduce-by-key.

use super::{check_len, grid_stride_config, launch, tiled_config};
use crate::gpu::{DeviceBuffer, Gpu};
use crate::Result;

const SCAN_THREADS: u32 = 256;
const SCAN_TILE: u64 = 1024;
const SORT_THREADS: u32 = 256;
const SORT_TILE: u64 = 2048;
const RADIX: u64 = 256;

/// A new buffer holding `0, 1, ..., n - 1` (`n < 2^32`).
pub fn iota_u32(gpu: &Gpu, n: u64) -> Result<DeviceBuffer<u32>> {
    if n > u32::MAX as u64 {
        return Err(crate::RuntimeError::InvalidLaunch {
            kernel: "iota_u32",
            reason: format!("{n} indices do not fit u32"),
        });
    }
    let out = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        // SAFETY: `out` holds at least `n` u32s.
        launch!(gpu, "iota_u32", grid_stride_config(gpu, n)?, &out.inner, &n);
    }
    Ok(out)
}

/// Scans the first `n` u64s of `values` in place (exclusive), in levels of
/// `SCAN_TILE`.
fn scan_u64_in_place(gpu: &Gpu, values: &mut DeviceBuffer<u64>, n: u64) -> Result<()> {
    let chunks = n.div_ceil(SCAN_TILE).max(1);
    let mut totals = gpu.uninit::<u64>(chunks as usize)?;
    let cfg = tiled_config(n, SCAN_TILE, SCAN_THREADS, SCAN_THREADS * 8)?;
    // SAFETY: `values` holds `n` u64s, `totals` one per chunk; the launch
    // has one block of SCAN_THREADS per chunk and the shared memory needed.
    launch!(gpu, "scan_chunks_u64", cfg, &values.inner, &n, &totals.inner);
    if chunks > 1 {
        scan_u64_in_place(gpu, &mut totals, chunks)?;
        // SAFETY: `values` holds `n` u64s and `totals` one per chunk.
        launch!(gpu, "add_tile_offsets_u64", grid_stride_config(gpu, n)?, &values.inner, &n, &totals.inner);
    }
    Ok(())
}

/// The exclusive prefix sums of the first `n` u32s of `input`, as u64s,
/// and their total (downloaded, so this synchronizes).
pub fn exclusive_scan(gpu: &Gpu, input: &DeviceBuffer<u32>, n: u64) -> Result<(DeviceBuffer<u64>, u64)> {
    check_len("scan_tiles", "input", input, n)?;
    if n == 0 {
        return Ok((gpu.zeros::<u64>(1)?, 0));
    }
    let tiles = n.div_ceil(SCAN_TILE);
    let mut tile_sums = gpu.uninit::<u64>(tiles as usize)?;
    let cfg = tiled_config(n, SCAN_TILE, SCAN_THREADS, SCAN_THREADS * 8)?;
    // SAFETY: `input` holds `n` u32s, `tile_sums` one u64 per tile; one
    // block of SCAN_THREADS per tile with its shared memory.
    launch!(gpu, "scan_tile_sums", cfg, &input.inner, &n, &tile_sums.inner);
    scan_u64_in_place(gpu, &mut tile_sums, tiles)?;
    let output = gpu.uninit::<u64>(n as usize)?;
    let total = gpu.uninit::<u64>(1)?;
    // SAFETY: as above; `output` holds `n` u64s, `total` one.
    launch!(gpu, "scan_tiles", cfg, &input.inner, &n, &tile_sums.inner, &output.inner, &total.inner);
    let total = gpu.download(&total)?[0];
    Ok((output, total))
}

/// The indices `i < n` with `flags[i] != 0` (flags 0 or 1), in order, and
/// their number. Tiles rank their flags in shared memory; no per-element
/// offsets are materialized.
pub fn compact_indices(gpu: &Gpu, flags: &DeviceBuffer<u32>, n: u64) -> Result<(DeviceBuffer<u32>, u64)> {
    check_len("compact_tiles", "flags", flags, n)?;
    let mut out = None;
    let count = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            // SAFETY: `flags` holds n u32s, `tile_sums` one u64 per tile;
            // one block of SCAN_THREADS per tile with its shared memory.
            launch!(gpu, "scan_tile_sums", *cfg, &flags.inner, &n, &tile_sums.inner);
            Ok(())
        },
        |cfg, tile_offsets, count| {
            let indices = gpu.uninit::<u32>(count.max(1) as usize)?;
            // SAFETY: as above; `tile_offsets` is the scan of the tiles'
            // counts and `indices` holds one u32 per set flag.
            launch!(gpu, "compact_tiles", *cfg, &flags.inner, &n, &tile_offsets.inner, &indices.inner);
            out = Some(indices);
            Ok(())
        },
    )?;
    Ok((out.map_or_else(|| gpu.zeros(1), Ok)?, count))
}

/// An order-preserving compaction in two launches over scan tiles of
/// `n` items: `count(cfg, tile_sums)` launches a kernel that writes each
/// tile's count; after their exclusive scan, `emit(cfg, tile_offsets,
/// total)` launches the kernel that writes the kept items from each
/// tile's offset. `emit` is skipped when nothing is kept. Returns the
/// total. The kernels are built on `tile_sum` and `tile_compact`
/// (`kernels-rs/src/primitives.rs`) and launched with `cfg`.
pub(crate) fn tile_compaction(
    gpu: &Gpu,
    n: u64,
    count: impl FnOnce(&cudarc::driver::LaunchConfig, &DeviceBuffer<u64>) -> Result<()>,
    emit: impl FnOnce(&cudarc::driver::LaunchConfig, &DeviceBuffer<u64>, u64) -> Result<()>,
) -> Result<u64> {
    if n == 0 {
        return Ok(0);
    }
    let tiles = n.div_ceil(SCAN_TILE);
    // One extra zeroed entry: after the exclusive scan it holds the total.
    let mut tile_offsets = gpu.zeros::<u64>(tiles as usize + 1)?;
    let cfg = tiled_config(n, SCAN_TILE, SCAN_THREADS, SCAN_THREADS * 8)?;
    count(&cfg, &tile_offsets)?;
    scan_u64_in_place(gpu, &mut tile_offsets, tiles + 1)?;
    let total = gpu.download_element(&tile_offsets, tiles as usize)?;
    if total > 0 {
        emit(&cfg, &tile_offsets, total)?;
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
    if n <= 1 || shifts.is_empty() {
        return Ok((keys, values));
    }
    let tiles = n.div_ceil(SORT_TILE);
    let hist = gpu.uninit::<u32>((RADIX * tiles) as usize)?;
    let (mut keys, mut values) = (keys, values);
    let mut keys_alt = gpu.uninit::<u64>(n as usize)?;
    let mut values_alt = gpu.uninit::<u64>(n as usize)?;
    let hist_cfg = tiled_config(n, SORT_TILE, SORT_THREADS, (RADIX * 4) as u32)?;
    let scatter_cfg = tiled_config(n, SORT_TILE, SORT_THREADS, (8 * RADIX * 4 + RADIX * 8) as u32)?;
    for &shift in shifts {
        // SAFETY: `keys` holds `n` u64s, `hist` RADIX per tile; one block of
        // SORT_THREADS (== RADIX) per tile with RADIX u32s of shared memory.
        launch!(gpu, "radix_histogram", hist_cfg, &keys.inner, &n, &shift, &hist.inner);
        let (offsets, _) = exclusive_scan(gpu, &hist, RADIX * tiles)?;
        // SAFETY: inputs and outputs hold `n` u64s; `offsets` is the scan of
        // this pass's histogram; the shared memory fits 8 warp histograms
        // and RADIX running offsets.
        launch!(
            gpu,
            "radix_scatter",
            scatter_cfg,
            &keys.inner,
            &values.inner,
            &n,
            &shift,
            &offsets.inner,
            &keys_alt.inner,
            &values_alt.inner
        );
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

/// Reduce-by-key over sorted keys whose values pack `count << 40 | sum`
/// (as `ops::graph::aggregated_faces` writes them): counts and sums are
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
    if n == 0 {
        return Ok(ReducedRuns { keys: gpu.zeros(1)?, counts: gpu.zeros(1)?, sums: gpu.zeros(1)?, n_runs: 0 });
    }
    let flags = gpu.uninit::<u32>(n as usize)?;
    // SAFETY: `keys` holds `n` u64s, `flags` `n` u32s.
    launch!(gpu, "run_heads", grid_stride_config(gpu, n)?, &keys.inner, &n, &flags.inner);
    let (offsets, n_runs) = exclusive_scan(gpu, &flags, n)?;
    let out_keys = gpu.uninit::<u64>(n_runs as usize)?;
    let counts = gpu.zeros::<u64>(n_runs as usize)?;
    let sums = gpu.zeros::<u64>(n_runs as usize)?;
    let cfg = grid_stride_config(gpu, n)?;
    let args = (&keys.inner, &values.inner, &n, &flags.inner, &offsets.inner);
    if packed {
        // SAFETY: `flags`/`offsets` describe `n_runs` runs of the `n` sorted
        // keys; the outputs hold one u64 per run, counts and sums zeroed.
        launch!(
            gpu,
            "reduce_runs_packed",
            cfg,
            args.0,
            args.1,
            args.2,
            args.3,
            args.4,
            &out_keys.inner,
            &counts.inner,
            &sums.inner
        );
        return Ok(ReducedRuns { keys: out_keys, counts, sums, n_runs });
    }
    // SAFETY: as above.
    launch!(
        gpu,
        "reduce_runs",
        grid_stride_config(gpu, n)?,
        &keys.inner,
        &values.inner,
        &n,
        &flags.inner,
        &offsets.inner,
        &out_keys.inner,
        &counts.inner,
        &sums.inner
    );
    Ok(ReducedRuns { keys: out_keys, counts, sums, n_runs })
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
