//! The distance transform's launches (`kernels-rs/src/distance.rs`): the
//! only `unsafe` code of this crate. Each function checks the lengths its
//! kernels read and write.

use crate::gpu::{LinePasses, AUTO_MEAN_RADIUS, AUTO_SEARCH_LENGTH};
use gpu_waterz_abi::distance::{
    edt_lines_per_block, edt_rows_per_warp, EdtChamferArgs, EdtEnvelopeArgs, EdtIndicesArgs, EdtLinesArgs, EdtPassArgs,
    EdtRowsArgs, EDT_LINE_THREADS, EDT_NO_FEATURE, EDT_ROW_THREADS, EDT_SEARCH_EVERY_LINE, METRIC_CHESSBOARD,
    METRIC_EUCLIDEAN, METRIC_TAXICAB,
};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, LaunchConfig, Result, RuntimeError};

/// The feature transform's two buffers of flat indices (one per element
/// each): the passes alternate between them, and the result is in `first`.
pub(crate) struct Features<'a> {
    pub(crate) first: &'a mut DeviceBuffer<u32>,
    pub(crate) second: &'a mut DeviceBuffer<u32>,
}

/// Where the last integer pass writes: the Euclidean metric's float64
/// distances (square roots of the costs) or a chamfer metric's int32
/// distances (-1 for none).
pub(crate) enum LineOutput<'a> {
    /// Float64 distances.
    Euclidean(&'a mut DeviceBuffer<f64>),
    /// int32 distances under `METRIC_TAXICAB` or `METRIC_CHESSBOARD`.
    Chamfer(&'a mut DeviceBuffer<i32>, u32),
}

impl LineOutput<'_> {
    /// The metric of the passes.
    fn metric(&self) -> u32 {
        match self {
            LineOutput::Euclidean(_) => METRIC_EUCLIDEAN,
            LineOutput::Chamfer(_, metric) => *metric,
        }
    }

    /// The number of values it holds.
    fn len(&self) -> usize {
        match self {
            LineOutput::Euclidean(b) => b.len(),
            LineOutput::Chamfer(b, _) => b.len(),
        }
    }

    /// Its memory as 32-bit words (at least one per value).
    fn as_mut_words(&mut self) -> *mut u32 {
        match self {
            LineOutput::Euclidean(b) => b.as_mut_ptr().cast::<u32>(),
            LineOutput::Chamfer(b, _) => b.as_mut_ptr().cast::<u32>(),
        }
    }
}

/// An error of a launch's arguments.
fn invalid(kernel: &'static str, reason: String) -> RuntimeError {
    RuntimeError::InvalidLaunch { kernel, reason }
}

/// Checks that the feature buffers hold `n` elements on `gpu` and that
/// flat indices fit them.
fn check_features(gpu: &Gpu, kernel: &'static str, features: &Option<Features<'_>>, n: u64) -> Result<()> {
    if let Some(f) = features {
        if n >= EDT_NO_FEATURE as u64 {
            return Err(invalid(kernel, format!("the feature transform takes fewer than 2^32 - 1 elements, not {n}")));
        }
        gpu.check_device(&*f.first, "the first features")?;
        gpu.check_device(&*f.second, "the second features")?;
        check_len(kernel, "first features", &*f.first, n)?;
        check_len(kernel, "second features", &*f.second, n)?;
    }
    Ok(())
}

/// The first pass, along x, of `items` volumes of `dims`, from `mask`
/// into `squared` (integer costs under `metric`, unit spacing) or
/// `squared_f64` (with `sampling`, the spacing along x), the row's nearest
/// background elements into `features` when given, and each volume's word
/// of `background` set if it has a background element. The caller checked
/// the lengths (one value per element, a word per volume) and devices.
#[allow(clippy::too_many_arguments)]
fn edt_rows(
    gpu: &Gpu,
    dims: Dims3,
    items: u64,
    metric: u32,
    sampling: f64,
    mask: &DeviceBuffer<u8>,
    squared: Option<&mut DeviceBuffer<u32>>,
    squared_f64: Option<&mut DeviceBuffer<f64>>,
    features: Option<&mut DeviceBuffer<u32>>,
    background: &mut DeviceBuffer<u32>,
) -> Result<()> {
    // The kernel walks a row in u32 positions, up to 512 past its end.
    if dims.x > (u32::MAX - 1024) as u64 {
        return Err(invalid("edt_rows", format!("rows of at most 2^32 - 1025 elements, not {}", dims.x)));
    }
    let rows_per_warp = edt_rows_per_warp(dims.x);
    let runs = (items * dims.z * dims.y).div_ceil(rows_per_warp as u64);
    let warps = (EDT_ROW_THREADS / 32) as u64;
    let config = LaunchConfig {
        blocks: runs.div_ceil(warps).clamp(1, gpu.multiprocessor_count() as u64 * 16) as u32,
        threads: EDT_ROW_THREADS,
        shared_bytes: 0,
    };
    let args = EdtRowsArgs {
        dims,
        items,
        metric,
        rows_per_warp,
        sampling,
        mask: mask.as_ptr(),
        squared: squared.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr()),
        squared_f64: squared_f64.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr()),
        features: features.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr()),
        background: background.as_mut_ptr(),
    };
    if args.squared.is_null() == args.squared_f64.is_null() {
        return Err(invalid("edt_rows", "exactly one of the integer and float64 outputs".into()));
    }
    // The callers checked that every buffer holds one value per element of
    // the volumes, the flags one per volume, and that flat indices fit u32
    // below EDT_NO_FEATURE (check_features).
    // SAFETY: the outputs are distinct from the mask (other types, or
    // borrowed mutably); 256 threads are whole warps.
    unsafe { gpu.launch(config, args) }
}

/// The passes of the distance transform of `mask` (one byte per element of
/// `items` volumes of `dims`, 0: background) into `out` (distances) in
/// float64, with `spacing` per `(z, y, x)` axis: x from the mask into
/// `out`, y into `scratch`, z into `out`; with `features`, the flat index
/// of a nearest background element of each element ends in
/// `features.first`. `background` (a word per volume, zeroed by the
/// caller) is set for each volume with a background element.
#[allow(clippy::too_many_arguments)]
pub(crate) fn edt_passes(
    gpu: &Gpu,
    dims: Dims3,
    items: u64,
    spacing: [f64; 3],
    mask: &DeviceBuffer<u8>,
    out: &mut DeviceBuffer<f64>,
    scratch: &mut DeviceBuffer<f64>,
    mut features: Option<Features<'_>>,
    background: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "edt_pass";
    let n = items * dims.z * dims.y * dims.x;
    gpu.check_device(mask, "the mask")?;
    gpu.check_device(out, "the output")?;
    gpu.check_device(scratch, "the scratch")?;
    gpu.check_device(background, "the flag")?;
    check_len(K, "mask", mask, n)?;
    check_len(K, "output", out, n)?;
    check_len(K, "scratch", scratch, n)?;
    check_len(K, "background", background, items)?;
    check_features(gpu, K, &features, n)?;
    let first_features = features.as_mut().map(|f| &mut *f.first);
    edt_rows(gpu, dims, items, METRIC_EUCLIDEAN, spacing[2], mask, None, Some(out), first_features, background)?;
    for axis in [1u32, 0] {
        // y: out into scratch, features first into second; z: scratch into
        // out, second into first.
        let (input, output) = match axis {
            1 => (out.as_ptr(), scratch.as_mut_ptr()),
            _ => (scratch.as_ptr(), out.as_mut_ptr()),
        };
        let (features_in, features_out) = match (&mut features, axis) {
            (Some(f), 1) => (f.first.as_ptr(), f.second.as_mut_ptr()),
            (Some(f), _) => (f.second.as_ptr(), f.first.as_mut_ptr()),
            (None, _) => (std::ptr::null(), std::ptr::null_mut()),
        };
        let args = EdtPassArgs {
            dims,
            items,
            axis,
            last: (axis == 0) as u32,
            sampling: spacing[axis as usize],
            input,
            output,
            features_in,
            features_out,
        };
        // SAFETY: out, scratch and the features hold n elements (checked);
        // each pass reads one buffer of each pair and writes the other.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(())
}

/// Whether the integer passes hold every line of volumes of `dims` in
/// shared memory (axes of at most 12,288 elements).
pub(crate) fn lines_fit(dims: Dims3) -> bool {
    [dims.z, dims.y, dims.x].iter().enumerate().all(|(a, &e)| edt_lines_per_block(e, a == 2) != 0)
}

/// The integer passes (unit spacing) of the distance transform of `mask`
/// (`items` volumes of `dims`) into `out` under its metric: x from the
/// mask into `first`, then y into `second` and z into `out`, each line in
/// shared memory, searched outward from each element (`edt_lines`), or
/// each line by one thread in global memory, linear in its length: its
/// lower envelope (`edt_envelope`, the Euclidean metric) or its two sweeps
/// (`edt_chamfer`), as `passes` says (`Auto`: the taxicab metric's
/// sweeps, else `Split` at [`AUTO_MEAN_RADIUS`]). The
/// one-thread passes keep their scratch in the buffer that the pass does
/// not touch: `out` along y (at least a word per element), `first` along
/// z. `features` and `background` as for [`edt_passes`]. Returns `false`
/// without launching when a line is too long for the shared memory (the
/// caller takes the float64 passes then, or the CPU).
#[allow(clippy::too_many_arguments)]
pub(crate) fn edt_line_passes(
    gpu: &Gpu,
    dims: Dims3,
    items: u64,
    mask: &DeviceBuffer<u8>,
    mut out: LineOutput<'_>,
    first: &mut DeviceBuffer<u32>,
    second: &mut DeviceBuffer<u32>,
    passes: LinePasses,
    mut features: Option<Features<'_>>,
    background: &mut DeviceBuffer<u32>,
) -> Result<bool> {
    const K: &str = "edt_lines";
    let n = items * dims.z * dims.y * dims.x;
    let extents = [dims.z, dims.y, dims.x];
    let metric = out.metric();
    if ![METRIC_EUCLIDEAN, METRIC_TAXICAB, METRIC_CHESSBOARD].contains(&metric) {
        return Err(invalid(K, format!("metric {metric} is none of the METRIC_* constants")));
    }
    // Squared distances stay below 3 * 12288^2 < 2^32 for lines that fit
    // (x included, though its pass holds no line).
    let per_axis: Vec<u32> = (0..3).map(|a| edt_lines_per_block(extents[a], a == 2)).collect();
    if per_axis.contains(&0) {
        return Ok(false);
    }
    // The kernel keeps one line of each group per thread.
    if per_axis.iter().any(|&per| !per.is_power_of_two() || !EDT_LINE_THREADS.is_multiple_of(per)) {
        return Err(invalid(K, format!("lines per block {per_axis:?} do not divide {EDT_LINE_THREADS} threads")));
    }
    for (what, len) in [("mask", mask.len()), ("output", out.len()), ("first", first.len()), ("second", second.len())] {
        if (len as u64) < n {
            return Err(invalid(K, format!("{what} holds {len} elements, not {n}")));
        }
    }
    gpu.check_device(mask, "the mask")?;
    match &out {
        LineOutput::Euclidean(b) => gpu.check_device(&**b, "the output")?,
        LineOutput::Chamfer(b, _) => gpu.check_device(&**b, "the output")?,
    }
    gpu.check_device(first, "the first scratch")?;
    gpu.check_device(second, "the second scratch")?;
    gpu.check_device(background, "the flag")?;
    check_len(K, "background", background, items)?;
    check_features(gpu, K, &features, n)?;
    let first_features = features.as_mut().map(|f| &mut *f.first);
    edt_rows(gpu, dims, items, metric, 1.0, mask, Some(first), None, first_features, background)?;
    // How each pass takes its lines: searched, each by one thread, or
    // split between the two by a byte per line. Lines of one element are
    // searched.
    let way = |a: usize| match passes {
        _ if extents[a] <= 1 => Way::Search,
        LinePasses::Search => Way::Search,
        LinePasses::Envelope => Way::OneThread,
        // The taxicab sweeps were the fastest way on every mask measured.
        LinePasses::Auto if metric == METRIC_TAXICAB => Way::OneThread,
        LinePasses::Auto if extents[a] <= AUTO_SEARCH_LENGTH => Way::Search,
        LinePasses::Auto => Way::Split(AUTO_MEAN_RADIUS),
        LinePasses::Split { mean_radius } if mean_radius == EDT_SEARCH_EVERY_LINE => Way::Search,
        LinePasses::Split { mean_radius } => Way::Split(mean_radius),
    };
    let split_lines =
        [0usize, 1].into_iter().filter(|&a| matches!(way(a), Way::Split(_))).map(|a| n / extents[a]).max();
    let mut deferred = match split_lines {
        Some(lines) => Some(gpu.uninit::<u8>(lines as usize)?),
        None => None,
    };
    for axis in [1u32, 0] {
        let a = axis as usize;
        let lines = n / extents[a].max(1);
        let per = per_axis[a];
        let groups = lines.div_ceil(per as u64);
        let way = way(a);
        // y: first into second; z: second into out (float64 distances,
        // or the chamfer distances as int32, whose bits the kernel writes).
        // The one-thread passes' scratch is the buffer the pass leaves
        // alone: out along y (n words at least: checked), first along z.
        let (input, output, distances, stack) = match (axis, &mut out) {
            (1, o) => (first.as_ptr(), second.as_mut_ptr(), std::ptr::null_mut(), o.as_mut_words()),
            (_, LineOutput::Euclidean(b)) => {
                (second.as_ptr(), std::ptr::null_mut(), b.as_mut_ptr(), first.as_mut_ptr())
            }
            (_, o) => (second.as_ptr(), o.as_mut_words(), std::ptr::null_mut(), first.as_mut_ptr()),
        };
        let (features_in, features_out) = match (&mut features, axis) {
            (Some(f), 1) => (f.first.as_ptr(), f.second.as_mut_ptr()),
            (Some(f), _) => (f.second.as_ptr(), f.first.as_mut_ptr()),
            (None, _) => (std::ptr::null(), std::ptr::null_mut()),
        };
        let (mean_radius, flags) = match (way, &mut deferred) {
            (Way::Split(radius), Some(d)) => (radius, d.as_mut_ptr()),
            _ => (EDT_SEARCH_EVERY_LINE, std::ptr::null_mut()),
        };
        if way != Way::OneThread {
            // The lines, then a mark per line, then two rows of sums.
            let shared_bytes = (per as u64 * (extents[a] + 3) * 4) as u32;
            if shared_bytes > 48 * 1024 {
                gpu.allow_shared_bytes(gpu_waterz_abi::kernel::Kernel::EdtLines, shared_bytes)?;
            }
            let config = LaunchConfig {
                blocks: groups.min(gpu.multiprocessor_count() as u64 * 16).max(1) as u32,
                threads: EDT_LINE_THREADS,
                shared_bytes,
            };
            let args = EdtLinesArgs {
                dims,
                items,
                axis,
                last: (axis == 0) as u32,
                lines_per_block: per,
                metric,
                input,
                output,
                distances,
                features_in,
                features_out,
                mean_radius,
                deferred: flags,
            };
            // Deferred holds a byte per line when split (allocated for the
            // most lines of a split pass); the shared memory holds the
            // group's lines, their marks and two rows of sums (per *
            // (length + 3) words, at most EDT_LINE_SHARED_BYTES + 12 * per).
            // SAFETY: every buffer holds n elements (checked), each pass
            // reads one of each pair and writes the other; see above.
            unsafe { gpu.launch(config, args) }?;
            if way == Way::Search {
                continue;
            }
        }
        if metric != METRIC_EUCLIDEAN {
            let args = EdtChamferArgs {
                dims,
                items,
                axis,
                metric,
                input,
                output,
                features_in,
                features_out,
                stack,
                deferred: flags,
            };
            // The stack (out along y, n words or more; first along z) is
            // neither read nor written otherwise by the pass; deferred,
            // unless null, holds a byte per line.
            // SAFETY: every buffer holds n elements (checked), the stack
            // too (see above); the metric is a chamfer one (checked).
            unsafe { gpu.launch(gpu.grid_stride_config(lines), args) }?;
        } else {
            let args = EdtEnvelopeArgs {
                dims,
                items,
                axis,
                last: (axis == 0) as u32,
                input,
                output,
                distances,
                features_in,
                features_out,
                stack,
                deferred: flags,
            };
            // The lines fit the shared memory, so their squared distances
            // fit u32; the stack and deferred as for the chamfer passes.
            // SAFETY: every buffer holds n elements (checked), the stack
            // too, and each pass reads one of each pair, writes the other.
            unsafe { gpu.launch(gpu.grid_stride_config(lines), args) }?;
        }
    }
    Ok(true)
}

/// How one pass of [`edt_line_passes`] takes its lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// `edt_lines` searches every line.
    Search,
    /// `edt_envelope` or `edt_chamfer` takes every line.
    OneThread,
    /// `edt_lines` searches the lines up to this mean radius and defers
    /// the others to the one-thread kernel.
    Split(u32),
}

/// scipy's indices (per volume `rank` planes of int32, one value per
/// element of `dims`) from the flat `features` of [`edt_passes`] or
/// [`edt_line_passes`]; elements without a feature get `(-1, 0, ..., 0)`,
/// or their own coordinates with `unreached_own`.
pub(crate) fn edt_indices(
    gpu: &Gpu,
    dims: Dims3,
    items: u64,
    rank: usize,
    unreached_own: bool,
    features: &DeviceBuffer<u32>,
    indices: &mut DeviceBuffer<i32>,
) -> Result<()> {
    const K: &str = "edt_indices";
    let n = items * dims.z * dims.y * dims.x;
    if n >= EDT_NO_FEATURE as u64 {
        return Err(invalid(K, format!("the feature transform takes fewer than 2^32 - 1 elements, not {n}")));
    }
    let leading = [dims.z, dims.y];
    if !(1..=3).contains(&rank) || leading[..3 - rank].iter().any(|&e| e != 1) {
        return Err(invalid(K, format!("rank {rank} does not fit the extents {:?}", [dims.z, dims.y, dims.x])));
    }
    gpu.check_device(features, "the features")?;
    gpu.check_device(indices, "the indices")?;
    check_len(K, "features", features, n)?;
    check_len(K, "indices", indices, n * rank as u64)?;
    let args = EdtIndicesArgs {
        dims,
        items,
        rank: rank as u32,
        unreached_own: unreached_own as u32,
        features: features.as_ptr(),
        indices: indices.as_mut_ptr(),
    };
    // SAFETY: features holds n values, each a flat index of an element of
    // the same volume or EDT_NO_FEATURE (written by the passes, which keep
    // every line within its volume); indices holds rank planes per volume;
    // the leading extents are 1 (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}
