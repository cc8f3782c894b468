//! The morphology launches (`kernels-rs/src/morphology.rs`). Each function
//! checks the lengths its kernel reads and writes against the geometry.

use gpu_waterz_abi::morphology::*;
use gpu_waterz_abi::{Kernel, KernelArgs};
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, LaunchConfig, Result, RuntimeError};

/// A structuring element on the device: per-axis offsets, flat offsets
/// and weights, with the geometry the kernels take.
pub struct DeviceFootprint {
    pub(crate) geometry: MorphGeometry,
    pub(crate) offsets: DeviceBuffer<i64>,
    pub(crate) flat_offsets: DeviceBuffer<i64>,
    pub(crate) weights: DeviceBuffer<f64>,
    pub(crate) flat: bool,
}

/// The launch of a morphology kernel over `geometry`.
fn config(gpu: &Gpu, geometry: &MorphGeometry) -> LaunchConfig {
    let units = geometry.spatial.div_ceil(MORPH_UNIT).saturating_mul(geometry.items);
    let blocks = units.min(gpu.multiprocessor_count() as u64 * 16).max(1) as u32;
    LaunchConfig { blocks, threads: MORPH_THREADS, shared_bytes: 0 }
}

/// The outputs per unit of a staged separable pass along `axis` with a
/// window of `window` offsets and values of `value_bytes` bytes, or
/// `None` when the window does not fit a warp's staging area (the pass
/// then reads from global memory). Along a strided axis, at most 64
/// outputs per line (the area's rows less the window's halo); along the
/// last axis a multiple of 32 up to 1024; halved (down to 8 and 32) while
/// there would be fewer than `enough` units.
pub(crate) fn line_chunk(
    geometry: &MorphGeometry,
    axis: u32,
    window: u64,
    value_bytes: u32,
    enough: u64,
) -> Option<u32> {
    let capacity = (LINE_WARP_BYTES / value_bytes) as u64;
    let rows = LineStaging::new(geometry, axis, 1).inner == 1;
    let (mut chunk, least) = if rows {
        (capacity.checked_sub(window.checked_sub(1)?)?.min(1024) / 32 * 32, 32)
    } else {
        ((capacity / 32).checked_sub(window.checked_sub(1)?)?.min(64), 8)
    };
    if chunk == 0 {
        return None;
    }
    while chunk > least && LineStaging::new(geometry, axis, chunk as u32).units() < enough {
        chunk /= 2;
    }
    LineStaging::new(geometry, axis, chunk as u32).fits(window, value_bytes).then_some(chunk as u32)
}

/// A staged pass's chunk ([`line_chunk`], the units filling the device
/// twice over) and its launch.
fn staged_line(
    gpu: &Gpu,
    geometry: &MorphGeometry,
    axis: u32,
    window: u64,
    value_bytes: u32,
) -> Option<(u32, LaunchConfig)> {
    let chunk = line_chunk(geometry, axis, window, value_bytes, gpu.multiprocessor_count() as u64 * 64)?;
    let units = LineStaging::new(geometry, axis, chunk).units();
    let blocks = units.div_ceil(LINE_WARPS as u64).min(gpu.multiprocessor_count() as u64 * 16).max(1);
    let config =
        LaunchConfig { blocks: blocks as u32, threads: LINE_WARPS * 32, shared_bytes: LINE_WARPS * LINE_WARP_BYTES };
    Some((chunk, config))
}

/// The number of values of the arrays of `geometry`.
fn values(kernel: &'static str, geometry: &MorphGeometry) -> Result<u64> {
    geometry
        .items
        .checked_mul(geometry.spatial)
        .filter(|&n| n <= isize::MAX as u64 / 8)
        .ok_or_else(|| RuntimeError::InvalidLaunch { kernel, reason: "the arrays are too large".into() })
}

/// Checks an input and an output of `n` values on this device.
fn check_pair<T: gpu_waterz_runtime::DeviceElement>(
    gpu: &Gpu,
    kernel: &'static str,
    n: u64,
    input: &DeviceBuffer<T>,
    output: &DeviceBuffer<T>,
) -> Result<()> {
    check_len(kernel, "input", input, n)?;
    check_len(kernel, "output", output, n)?;
    gpu.check_device(input, "the input")?;
    gpu.check_device(output, "the output")
}

/// Checks the element's tables against its geometry.
fn check_footprint(kernel: &'static str, footprint: &DeviceFootprint) -> Result<()> {
    let g = &footprint.geometry;
    if g.rank == 0 || g.rank as usize > MORPH_MAX_RANK || g.elements == 0 {
        return Err(RuntimeError::InvalidLaunch {
            kernel,
            reason: format!("rank {} with {} elements", g.rank, g.elements),
        });
    }
    check_len(kernel, "offsets", &footprint.offsets, g.elements as u64 * g.rank as u64)?;
    check_len(kernel, "flat offsets", &footprint.flat_offsets, g.elements as u64)?;
    if !footprint.flat {
        check_len(kernel, "weights", &footprint.weights, g.elements as u64)?;
    }
    Ok(())
}

/// The launches of the grey-scale kernels of each element type (a public
/// trait of a private module: sealed to float32, float64 and uint8).
pub trait GreyKernels: gpu_waterz_runtime::DeviceElement {
    /// The grey-scale filter (global gather) of `input` into `output`.
    fn filter(
        gpu: &Gpu,
        footprint: &DeviceFootprint,
        mode: u32,
        maximum: bool,
        cval: f64,
        input: &DeviceBuffer<Self>,
        output: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
    /// One separable pass along `axis` over the offsets `window`.
    #[allow(clippy::too_many_arguments)]
    fn line(
        gpu: &Gpu,
        geometry: &MorphGeometry,
        axis: u32,
        window: (i64, i64),
        mode: u32,
        maximum: bool,
        cval: f64,
        input: &DeviceBuffer<Self>,
        output: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
    /// The tiled grey-scale filter (rank 1 to 3).
    fn tile(
        gpu: &Gpu,
        tile: &DeviceTile,
        mode: u32,
        maximum: bool,
        cval: f64,
        input: &DeviceBuffer<Self>,
        output: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
    /// The box filter (a flat box, rank 1 to 3).
    fn boxed(
        gpu: &Gpu,
        geometry: &BoxGeometry,
        mode: u32,
        maximum: bool,
        cval: f64,
        input: &DeviceBuffer<Self>,
        output: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
    /// Output rows per warp of this type's warp kernel for a box (or, with
    /// `plus`, a plus) with fixed windows (`WarpGeometry::fixed`) or not.
    fn warp_rows(fixed: bool, plus: bool) -> u32;
    /// Whether this is uint8 (whose kernels take flat elements and a byte
    /// `cval` only).
    const BYTES: bool;
    /// Whether the warp kernels take pluses of this type (float32 and
    /// uint8: in float64 the plus kernels measured faster).
    const WARP_PLUS: bool;
    /// Whether this type's warp kernels load the columns past a warp's
    /// (`WarpGeometry::past`).
    const WARP_PAST: bool;
    /// The minimum kernel of the warp filter for a box (or, with `plus`
    /// where this type's kernels take pluses, a plus) with fixed windows
    /// (`WarpGeometry::fixed`) or not: its maximum kernel is compiled with
    /// the same launch bounds, so either gives the occupancy.
    fn warp_kernel(fixed: bool, plus: bool) -> Kernel;
    /// The minimum kernel of the wide warp filter (`WarpGeometry::wide`),
    /// or `None` for a type without wide kernels (float64).
    fn wide_kernel() -> Option<Kernel>;
    /// The warp filter (a flat box, rank 1 to 3, in registers).
    fn warped(
        gpu: &Gpu,
        geometry: &WarpGeometry,
        mode: u32,
        maximum: bool,
        cval: f64,
        input: &DeviceBuffer<Self>,
        output: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
}

macro_rules! grey_launches {
    ($($t:ty: $filter:ident $filter_args:ident, $line:ident $line_args:ident, $tile:ident $tile_args:ident,
        $boxed:ident $box_args:ident, $plus:ident $plus_args:ident,
        $warp_min:ident $min_args:ident, $warp_max:ident $max_args:ident, $rows:expr, $past:expr,
        fixed $fixed_rows:expr, $fixed_min:ident $fixed_max:ident
        $(, plus $plus_min:ident $plus_max:ident, fixed $fixed_plus_rows:expr, $fixed_plus_min:ident $fixed_plus_max:ident)?
        $(, wide $wide_min:ident $wide_max:ident)?;)*) => {$(
        impl GreyKernels for $t {
            fn warp_rows(fixed: bool, plus: bool) -> u32 {
                match (fixed, plus) {
                    $( (true, true) => $fixed_plus_rows, )?
                    (true, _) => $fixed_rows,
                    (false, _) => $rows,
                }
            }
            const WARP_PAST: bool = $past;
            // uint8 is the one type of a byte.
            const BYTES: bool = std::mem::size_of::<$t>() == 1;
            const WARP_PLUS: bool = false $(|| !stringify!($plus_min).is_empty())?;

            fn warp_kernel(fixed: bool, plus: bool) -> Kernel {
                match (plus, fixed) {
                    $( (true, false) => <$plus_min as KernelArgs>::KERNEL,
                    (true, true) => <$fixed_plus_min as KernelArgs>::KERNEL, )?
                    (_, false) => <$min_args as KernelArgs>::KERNEL,
                    (_, true) => <$fixed_min as KernelArgs>::KERNEL,
                }
            }

            fn wide_kernel() -> Option<Kernel> {
                None $(.or(Some(<$wide_min as KernelArgs>::KERNEL)))?
            }

            /// The warp filter of `input` into `output` over `geometry`'s box
            /// or plus (where this type's kernels take pluses): the kernel
            /// of its element (box or plus), its filter (minimum or maximum)
            /// and its windows (fixed or not).
            fn warped(
                gpu: &Gpu,
                geometry: &WarpGeometry,
                mode: u32,
                maximum: bool,
                cval: f64,
                input: &DeviceBuffer<Self>,
                output: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                const K: &str = stringify!($warp_min);
                let wide = geometry.wide();
                if wide && Self::wide_kernel().is_none() {
                    return Err(RuntimeError::InvalidLaunch { kernel: K, reason: "wide windows in this type".into() });
                }
                let rows = if wide { WARP_ROWS_WIDE } else { Self::warp_rows(geometry.fixed(), geometry.plus != 0) };
                let config = check_warp(gpu, K, geometry, rows, $past)?;
                let n = values_of(K, geometry.items, geometry.extent)?;
                check_pair(gpu, K, n, input, output)?;
                if n == 0 {
                    return Ok(());
                }
                let (geometry, reserved, input, output) = (*geometry, 0, input.as_ptr(), output.as_mut_ptr());
                $(
                if wide {
                    // SAFETY: every item's values, distinct buffers; a wide
                    // geometry with its rows, positions below u32::MAX: checked.
                    return unsafe {
                        if maximum {
                            gpu.launch(config, $wide_max { geometry, mode, reserved, cval, input, output })
                        } else {
                            gpu.launch(config, $wide_min { geometry, mode, reserved, cval, input, output })
                        }
                    };
                }
                )?
                // The fixed kernels are launched only when `geometry.fixed()`.
                // SAFETY: every item's values, distinct buffers; rows, windows,
                // plus centre, positions below u32::MAX: checked.
                unsafe {
                    match (geometry.plus != 0, maximum, geometry.fixed()) {
                        (false, false, false) => gpu.launch(config, $min_args { geometry, mode, reserved, cval, input, output }),
                        (false, true, false) => gpu.launch(config, $max_args { geometry, mode, reserved, cval, input, output }),
                        (false, false, true) => gpu.launch(config, $fixed_min { geometry, mode, reserved, cval, input, output }),
                        (false, true, true) => gpu.launch(config, $fixed_max { geometry, mode, reserved, cval, input, output }),
                        $( (true, false, false) => gpu.launch(config, $plus_min { geometry, mode, reserved, cval, input, output }),
                        (true, true, false) => gpu.launch(config, $plus_max { geometry, mode, reserved, cval, input, output }),
                        (true, false, true) => gpu.launch(config, $fixed_plus_min { geometry, mode, reserved, cval, input, output }),
                        (true, true, true) => gpu.launch(config, $fixed_plus_max { geometry, mode, reserved, cval, input, output }), )?
                        #[allow(unreachable_patterns)]
                        _ => Err(RuntimeError::InvalidLaunch { kernel: K, reason: "a plus of this type".into() }),
                    }
                }
            }

            /// The grey-scale filter of `input` into `output` over `footprint`.
            ///
            /// The caller built `footprint` with [`DeviceFootprint`]'s rules:
            /// the geometry's extrema are those of the offsets and each flat
            /// offset is the per-axis offsets against the strides.
            fn filter(
                gpu: &Gpu,
                footprint: &DeviceFootprint,
                mode: u32,
                maximum: bool,
                cval: f64,
                input: &DeviceBuffer<Self>,
                output: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                const K: &str = stringify!($filter);
                check_footprint(K, footprint)?;
                let n = values(K, &footprint.geometry)?;
                check_pair(gpu, K, n, input, output)?;
                if n == 0 {
                    return Ok(());
                }
                let args = $filter_args {
                    geometry: footprint.geometry,
                    mode,
                    maximum: maximum as u32,
                    flat: footprint.flat as u32,
                    reserved: 0,
                    cval,
                    offsets: footprint.offsets.as_ptr(),
                    flat_offsets: footprint.flat_offsets.as_ptr(),
                    weights: if footprint.flat { std::ptr::null() } else { footprint.weights.as_ptr() },
                    input: input.as_ptr(),
                    output: output.as_mut_ptr(),
                };
                // SAFETY: input and output hold items * spatial values (checked)
                // and are distinct buffers (one borrowed shared, one mutably);
                // the tables hold what the geometry says (checked), with the
                // extrema and flat offsets the caller derived from them.
                unsafe { gpu.launch(config(gpu, &footprint.geometry), args) }
            }

            /// One separable pass along `axis` over the offsets `low..=high`.
            #[allow(clippy::too_many_arguments)]
            fn line(
                gpu: &Gpu,
                geometry: &MorphGeometry,
                axis: u32,
                (low, high): (i64, i64),
                mode: u32,
                maximum: bool,
                cval: f64,
                input: &DeviceBuffer<Self>,
                output: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                const K: &str = stringify!($line);
                let n = values(K, geometry)?;
                if axis >= geometry.rank || geometry.rank as usize > MORPH_MAX_RANK || low > high {
                    return Err(RuntimeError::InvalidLaunch {
                        kernel: K,
                        reason: format!("axis {axis} of rank {}, window {low}..={high}", geometry.rank),
                    });
                }
                check_pair(gpu, K, n, input, output)?;
                if n == 0 {
                    return Ok(());
                }
                let value_bytes = std::mem::size_of::<$t>() as u32;
                let (chunk, config) = match staged_line(gpu, geometry, axis, (high - low + 1) as u64, value_bytes) {
                    Some((chunk, config)) => (chunk, config),
                    None => (0, config(gpu, geometry)),
                };
                let args = $line_args {
                    geometry: *geometry,
                    axis,
                    mode,
                    maximum: maximum as u32,
                    chunk,
                    low,
                    high,
                    cval,
                    input: input.as_ptr(),
                    output: output.as_mut_ptr(),
                };
                // SAFETY: input and output hold items * spatial values (checked)
                // and are distinct buffers; axis < rank and low <= high; a
                // staged pass's window fits its area (`line_chunk`), with
                // the warps and shared memory the kernel takes (`staged_line`).
                unsafe { gpu.launch(config, args) }
            }

            /// The tiled grey-scale filter of `input` into `output`. The caller
            /// built `tile`'s offsets with `TileGeometry::shared_offset` from
            /// element offsets within `low..=high`.
            fn tile(
                gpu: &Gpu,
                tile: &DeviceTile,
                mode: u32,
                maximum: bool,
                cval: f64,
                input: &DeviceBuffer<Self>,
                output: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                const K: &str = stringify!($tile);
                let config = check_tile(K, tile, std::mem::size_of::<$t>() as u32)?;
                let n = tile_values(K, &tile.geometry)?;
                check_pair(gpu, K, n, input, output)?;
                if n == 0 {
                    return Ok(());
                }
                let args = $tile_args {
                    geometry: tile.geometry,
                    mode,
                    maximum: maximum as u32,
                    flat: tile.flat as u32,
                    reserved: 0,
                    cval,
                    shared_offsets: tile.shared_offsets.as_ptr(),
                    weights: if tile.flat { std::ptr::null() } else { tile.weights.as_ptr() },
                    input: input.as_ptr(),
                    output: output.as_mut_ptr(),
                };
                let config = LaunchConfig { blocks: tile_blocks(gpu, &tile.geometry), ..config };
                // SAFETY: input and output hold every item's values (checked)
                // and are distinct buffers; the layout is consistent and its
                // shared memory is what the launch gives (checked); the offsets
                // were made for it by the caller.
                unsafe { gpu.launch(config, args) }
            }

            /// The box filter of `input` into `output` over `geometry`'s window
            /// (a box, or a plus when `geometry.plus` is set).
            fn boxed(
                gpu: &Gpu,
                geometry: &BoxGeometry,
                mode: u32,
                maximum: bool,
                cval: f64,
                input: &DeviceBuffer<Self>,
                output: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                const K: &str = stringify!($boxed);
                let config = check_box(gpu, K, geometry, std::mem::size_of::<$t>() as u32)?;
                let n = values_of(K, geometry.items, geometry.extent)?;
                check_pair(gpu, K, n, input, output)?;
                if n == 0 {
                    return Ok(());
                }
                let (geometry, maximum, input, output) =
                    (*geometry, maximum as u32, input.as_ptr(), output.as_mut_ptr());
                // SAFETY: input and output hold every item's values (checked)
                // and are distinct buffers; the geometry is consistent (a
                // plus's centre in its window) and its shared memory is what
                // the launch gives (checked).
                unsafe {
                    if geometry.plus != 0 {
                        gpu.launch(config, $plus_args { geometry, mode, maximum, cval, input, output })
                    } else {
                        gpu.launch(config, $box_args { geometry, mode, maximum, cval, input, output })
                    }
                }
            }
        }
    )*};
}

grey_launches! {
    f32: grey_filter_f32 GreyFilterF32Args, grey_line_f32 GreyLineF32Args, grey_tile_f32 GreyTileF32Args,
        grey_box_f32 GreyBoxF32Args, grey_plus_f32 GreyPlusF32Args,
        grey_warp_min_f32 GreyWarpMinF32Args, grey_warp_max_f32 GreyWarpMaxF32Args, WARP_ROWS_F32, WARP_PAST_F32,
        fixed WARP_ROWS_FIXED_F32, GreyWarpFixedMinF32Args GreyWarpFixedMaxF32Args,
        plus GreyWarpPlusMinF32Args GreyWarpPlusMaxF32Args, fixed WARP_ROWS_FIXED_PLUS_F32, GreyWarpFixedPlusMinF32Args GreyWarpFixedPlusMaxF32Args,
        wide GreyWarpWideMinF32Args GreyWarpWideMaxF32Args;
    f64: grey_filter_f64 GreyFilterF64Args, grey_line_f64 GreyLineF64Args, grey_tile_f64 GreyTileF64Args,
        grey_box_f64 GreyBoxF64Args, grey_plus_f64 GreyPlusF64Args,
        grey_warp_min_f64 GreyWarpMinF64Args, grey_warp_max_f64 GreyWarpMaxF64Args, WARP_ROWS_F64, WARP_PAST_F64,
        fixed WARP_ROWS_F64, GreyWarpFixedMinF64Args GreyWarpFixedMaxF64Args;
    u8: grey_filter_u8 GreyFilterU8Args, grey_line_u8 GreyLineU8Args, grey_tile_u8 GreyTileU8Args,
        grey_box_u8 GreyBoxU8Args, grey_plus_u8 GreyPlusU8Args,
        grey_warp_min_u8 GreyWarpMinU8Args, grey_warp_max_u8 GreyWarpMaxU8Args, WARP_ROWS_F32, WARP_PAST_F32,
        fixed WARP_ROWS_FIXED_F32, GreyWarpFixedMinU8Args GreyWarpFixedMaxU8Args,
        plus GreyWarpPlusMinU8Args GreyWarpPlusMaxU8Args, fixed WARP_ROWS_FIXED_PLUS_F32, GreyWarpFixedPlusMinU8Args GreyWarpFixedPlusMaxU8Args,
        wide GreyWarpWideMinU8Args GreyWarpWideMaxU8Args;
}

/// Checks a warp geometry (windows, rows, past columns, chunk, tile
/// counts, index ranges) and returns its launch.
fn check_warp(gpu: &Gpu, kernel: &'static str, g: &WarpGeometry, rows: u32, past: bool) -> Result<LaunchConfig> {
    let bad = |reason: String| RuntimeError::InvalidLaunch { kernel, reason };
    if !g.windows_fit() && !g.wide() {
        return Err(bad(format!("window {:?}..={:?} does not fit the warp kernels", g.low, g.high)));
    }
    if g.rows != rows {
        return Err(bad(format!("{} rows per warp, the kernel takes {rows}", g.rows)));
    }
    if g.past != past as u32 {
        return Err(bad(format!("past {}, the kernel takes {}", g.past, past as u32)));
    }
    let steps = [g.chunk_z, rows, g.outputs_x()];
    for (axis, &step) in steps.iter().enumerate() {
        // The kernel forms tile * step and coordinates plus offsets in
        // 64-bit arithmetic, in-plane offsets in 32-bit: keep both far from
        // wrapping.
        if step == 0
            || g.extent[axis] as u64 + step as u64 + WARP_X as u64 > u32::MAX as u64
            || g.tiles[axis] as u64 != (g.extent[axis] as u64).div_ceil(step as u64)
        {
            return Err(bad(format!("axis {axis}: {} tiles of {step} for extent {}", g.tiles[axis], g.extent[axis])));
        }
    }
    // In-plane offsets (and the sentinel u32::MAX) in 32 bits, with a
    // warp's rows and columns past the plane's end.
    let reach = (g.extent[1] as u64 + rows as u64) * (g.extent[2] as u64 + WARP_X as u64);
    if reach >= u32::MAX as u64 {
        return Err(bad(format!("planes of {} × {} positions", g.extent[1], g.extent[2])));
    }
    if g.tiles.iter().map(|&t| t as u64).product::<u64>() > u32::MAX as u64 {
        return Err(bad(format!("{:?} tiles per item", g.tiles)));
    }
    let warps = (WARP_THREADS / 32) as u64;
    let blocks = g.units().div_ceil(warps).min(gpu.multiprocessor_count() as u64 * 64).max(1) as u32;
    Ok(LaunchConfig { blocks, threads: WARP_THREADS, shared_bytes: 0 })
}

/// Checks a box geometry (windows, chunk, tile counts, index ranges) and
/// returns its launch.
fn check_box(gpu: &Gpu, kernel: &'static str, g: &BoxGeometry, value_bytes: u32) -> Result<LaunchConfig> {
    let bad = |reason: String| RuntimeError::InvalidLaunch { kernel, reason };
    let shared = g
        .shared_bytes(value_bytes)
        .ok_or_else(|| bad(format!("window {:?}..={:?} does not fit the box kernel", g.low, g.high)))?;
    let steps = [g.chunk_z, BOX_Y, BOX_X];
    for (axis, &step) in steps.iter().enumerate() {
        // The kernel forms tile * step and coordinates plus offsets in
        // 32-bit and 64-bit arithmetic: keep both far from wrapping.
        if step == 0
            || g.extent[axis] as u64 + step as u64 > u32::MAX as u64
            || g.tiles[axis] as u64 != (g.extent[axis] as u64).div_ceil(step as u64)
        {
            return Err(bad(format!("axis {axis}: {} tiles of {step} for extent {}", g.tiles[axis], g.extent[axis])));
        }
    }
    if g.extent[1] as u64 * g.extent[2] as u64 >= u32::MAX as u64 {
        return Err(bad(format!("planes of {} × {} positions", g.extent[1], g.extent[2])));
    }
    if g.tiles.iter().map(|&t| t as u64).product::<u64>() > u32::MAX as u64 {
        return Err(bad(format!("{:?} tiles per item", g.tiles)));
    }
    let blocks = g.units().min(gpu.multiprocessor_count() as u64 * 64).max(1) as u32;
    Ok(LaunchConfig { blocks, threads: BOX_THREADS, shared_bytes: shared })
}

/// Checks the buffers of a binary step: `n` values in the input, the
/// output and the mask, `slot + 1` flags, all on this device.
#[allow(clippy::too_many_arguments)]
fn check_binary_buffers(
    gpu: &Gpu,
    kernel: &'static str,
    n: u64,
    input: Option<&DeviceBuffer<u8>>,
    mask: Option<&DeviceBuffer<u8>>,
    output: &DeviceBuffer<u8>,
    changed: &DeviceBuffer<u32>,
    slot: usize,
) -> Result<()> {
    if let Some(input) = input {
        check_len(kernel, "input", input, n)?;
        gpu.check_device(input, "the input")?;
    }
    check_len(kernel, "output", output, n)?;
    check_len(kernel, "changed", changed, slot as u64 + 1)?;
    gpu.check_device(output, "the output")?;
    gpu.check_device(changed, "the flag")?;
    if let Some(mask) = mask {
        check_len(kernel, "mask", mask, n)?;
        gpu.check_device(mask, "the mask")?;
    }
    Ok(())
}

/// One binary step of `input` into `output` over `footprint` (erosion, or
/// dilation over the element as given: the caller reflects it), `border`
/// outside, the input kept where `mask` is 0; sets `changed[slot]` to 1 when
/// an output differs from its input. Without `input` the step runs in place on `output`:
/// only for steps repeated until stable (the caller's element holds its
/// centre, so each step only grows or only shrinks the set, and blocks that
/// read values other blocks are writing reach the same stable set).
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_filter(
    gpu: &Gpu,
    footprint: &DeviceFootprint,
    dilation: bool,
    border: bool,
    input: Option<&DeviceBuffer<u8>>,
    mask: Option<&DeviceBuffer<u8>>,
    output: &mut DeviceBuffer<u8>,
    changed: &mut DeviceBuffer<u32>,
    slot: usize,
) -> Result<()> {
    const K: &str = "binary_filter";
    check_footprint(K, footprint)?;
    let n = values(K, &footprint.geometry)?;
    check_binary_buffers(gpu, K, n, input, mask, output, changed, slot)?;
    if n == 0 {
        return Ok(());
    }
    let args = BinaryFilterArgs {
        geometry: footprint.geometry,
        dilation: dilation as u32,
        border: border as u32,
        offsets: footprint.offsets.as_ptr(),
        flat_offsets: footprint.flat_offsets.as_ptr(),
        // In place (no input): the step reads the output.
        input: input.map_or(output.as_ptr(), |i| i.as_ptr()),
        mask: mask.map_or(std::ptr::null(), |m| m.as_ptr()),
        output: output.as_mut_ptr(),
        // A device address: slot < changed.len() (checked).
        changed: changed.as_mut_ptr().wrapping_add(slot),
    };
    // SAFETY: input, output and the mask hold items * spatial values and
    // the flags slot + 1 (checked); input and output are distinct buffers, or
    // one buffer for a monotone step in place (the caller's); the
    // tables hold what the geometry says (checked).
    unsafe { gpu.launch(config(gpu, &footprint.geometry), args) }
}

/// A structuring element laid out for the tile kernels: the geometry and
/// each element's offset in the shared tile.
pub struct DeviceTile {
    pub(crate) geometry: TileGeometry,
    pub(crate) shared_offsets: DeviceBuffer<i32>,
    pub(crate) weights: DeviceBuffer<f64>,
    pub(crate) flat: bool,
}

/// Checks a tile layout: the extents, the tile counts and the shared
/// memory; the offsets' count.
fn check_tile(kernel: &'static str, tile: &DeviceTile, value_bytes: u32) -> Result<LaunchConfig> {
    let g = &tile.geometry;
    let bad = |reason: String| RuntimeError::InvalidLaunch { kernel, reason };
    if g.tile_z == 0 || g.tile_z > TILE_MAX_Z || g.elements == 0 {
        return Err(bad(format!("tile_z {} with {} elements", g.tile_z, g.elements)));
    }
    let extents = [g.tile_z, TILE_Y, TILE_X];
    for (axis, &extent) in extents.iter().enumerate() {
        let reach = g.high[axis] as i64 - g.low[axis] as i64;
        if g.low[axis] > 0 || g.high[axis] < 0 || g.halo[axis] as i64 != extent as i64 + reach {
            return Err(bad(format!(
                "axis {axis}: offsets {}..={} with halo {}",
                g.low[axis], g.high[axis], g.halo[axis]
            )));
        }
        if g.tiles[axis] as u64 != (g.extent[axis] as u64).div_ceil(extent as u64) {
            return Err(bad(format!("axis {axis}: {} tiles for extent {}", g.tiles[axis], g.extent[axis])));
        }
    }
    // In u64: the kernel's u32 products must not wrap, and a tile's index
    // within an item is taken in u32.
    let shared = g.halo.iter().map(|&h| h as u64).product::<u64>() * value_bytes as u64;
    if g.tiles.iter().map(|&t| t as u64).product::<u64>() > u32::MAX as u64 {
        return Err(bad(format!("{:?} tiles per item", g.tiles)));
    }
    if shared > TILE_SHARED_BYTES as u64 {
        return Err(bad(format!("{shared} bytes of shared memory")));
    }
    check_len(kernel, "shared offsets", &tile.shared_offsets, g.elements as u64)?;
    if !tile.flat {
        check_len(kernel, "weights", &tile.weights, g.elements as u64)?;
    }
    Ok(LaunchConfig { blocks: 0, threads: TILE_THREADS, shared_bytes: shared as u32 })
}

/// The values of the items of a tile layout.
fn tile_values(kernel: &'static str, g: &TileGeometry) -> Result<u64> {
    values_of(kernel, g.items, g.extent)
}

/// The number of values of `items` arrays of `(z, y, x)` `extent`.
fn values_of(kernel: &'static str, items: u64, extent: [u32; 3]) -> Result<u64> {
    let spatial = extent.iter().map(|&e| e as u64).product::<u64>();
    items
        .checked_mul(spatial)
        .filter(|&n| n <= isize::MAX as u64 / 8)
        .ok_or_else(|| RuntimeError::InvalidLaunch { kernel, reason: "the arrays are too large".into() })
}

/// The grid of a tile kernel.
fn tile_blocks(gpu: &Gpu, g: &TileGeometry) -> u32 {
    g.units().min(gpu.multiprocessor_count() as u64 * 32).max(1) as u32
}

/// One tiled binary step (or, with `local`, steps repeated inside each
/// tile until it is stable) of `input` into `output`; sets
/// `changed[slot]` when an output differs from its input. Without `input` the step runs in place on `output`:
/// only for steps repeated until stable (the caller's element holds its
/// centre, so each step only grows or only shrinks the set, and blocks that
/// read values other blocks are writing reach the same stable set).
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_tile(
    gpu: &Gpu,
    tile: &DeviceTile,
    dilation: bool,
    border: bool,
    local: bool,
    input: Option<&DeviceBuffer<u8>>,
    mask: Option<&DeviceBuffer<u8>>,
    output: &mut DeviceBuffer<u8>,
    changed: &mut DeviceBuffer<u32>,
    slot: usize,
) -> Result<()> {
    const K: &str = "binary_tile";
    let config = check_tile(K, tile, 1)?;
    let n = tile_values(K, &tile.geometry)?;
    check_binary_buffers(gpu, K, n, input, mask, output, changed, slot)?;
    if n == 0 {
        return Ok(());
    }
    let args = BinaryTileArgs {
        geometry: tile.geometry,
        dilation: dilation as u32,
        border: border as u32,
        local: local as u32,
        reserved: 0,
        shared_offsets: tile.shared_offsets.as_ptr(),
        // In place (no input): the step reads the output.
        input: input.map_or(output.as_ptr(), |i| i.as_ptr()),
        mask: mask.map_or(std::ptr::null(), |m| m.as_ptr()),
        output: output.as_mut_ptr(),
        // A device address: slot < changed.len() (checked).
        changed: changed.as_mut_ptr().wrapping_add(slot),
    };
    let config = LaunchConfig { blocks: tile_blocks(gpu, &tile.geometry), ..config };
    // SAFETY: input, output and the mask hold every item's values and the
    // flags slot + 1 (checked); input and output are distinct buffers; the
    // layout and its shared memory are consistent (checked); `local` is
    // set by the caller only for elements holding offset 0.
    unsafe { gpu.launch(config, args) }
}

/// A structuring element laid out for `binary_bits`: the geometry and each
/// element's row offset in the halo and x offset.
pub struct DeviceBits {
    pub(crate) geometry: BitsGeometry,
    pub(crate) element_rows: DeviceBuffer<i32>,
    pub(crate) element_x: DeviceBuffer<i32>,
    /// The element's x neighbours in its own row (`X_RUNS_UP`,
    /// `X_RUNS_DOWN`): runs along x fill in one go until stable.
    pub(crate) x_runs: u32,
}

/// One binary step on rows of bits (or, with `local`, steps repeated
/// inside each tile until it is stable) of `input` into `output`; sets
/// `changed[slot]` when an output differs from its input. Without `input` the step runs in place on `output`:
/// only for steps repeated until stable (the caller's element holds its
/// centre, so each step only grows or only shrinks the set, and blocks that
/// read values other blocks are writing reach the same stable set).
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_bits(
    gpu: &Gpu,
    bits: &DeviceBits,
    dilation: bool,
    border: bool,
    local: bool,
    input: Option<&DeviceBuffer<u8>>,
    mask: Option<&DeviceBuffer<u8>>,
    output: &mut DeviceBuffer<u8>,
    changed: &mut DeviceBuffer<u32>,
    slot: usize,
) -> Result<()> {
    const K: &str = "binary_bits";
    let g = &bits.geometry;
    let bad = |reason: String| RuntimeError::InvalidLaunch { kernel: K, reason };
    if !g.tile_z.is_power_of_two() || g.tile_z > BITS_MAX_Z || g.tile_z * g.tile_y != BITS_THREADS || g.elements == 0 {
        return Err(bad(format!("tile {}×{} with {} elements", g.tile_z, g.tile_y, g.elements)));
    }
    for (axis, tile) in [g.tile_z, g.tile_y].into_iter().enumerate() {
        let reach = g.high[axis] as i64 - g.low[axis] as i64;
        if g.low[axis] > 0 || g.high[axis] < 0 || g.halo[axis] as i64 != tile as i64 + reach {
            return Err(bad(format!(
                "axis {axis}: offsets {}..={} with halo {}",
                g.low[axis], g.high[axis], g.halo[axis]
            )));
        }
    }
    let extents = [g.tile_z as u64, g.tile_y as u64, 32 * BITS_WORDS as u64];
    for (axis, &tile) in extents.iter().enumerate() {
        if g.tiles[axis] as u64 != (g.extent[axis] as u64).div_ceil(tile) {
            return Err(bad(format!("axis {axis}: {} tiles for extent {}", g.tiles[axis], g.extent[axis])));
        }
    }
    // In u64: the kernel's u32 products must not wrap, and a tile's index
    // within an item is taken in u32.
    let words = g.halo[0] as u64 * g.halo[1] as u64 * (BITS_WORDS as u64 + 2) + BITS_THREADS as u64 * BITS_WORDS as u64;
    let shared = words * 4;
    if g.tiles.iter().map(|&t| t as u64).product::<u64>() > u32::MAX as u64 {
        return Err(bad(format!("{:?} tiles per item", g.tiles)));
    }
    if shared > TILE_SHARED_BYTES as u64 {
        return Err(bad(format!("{shared} bytes of shared memory")));
    }
    check_len(K, "element rows", &bits.element_rows, g.elements as u64)?;
    check_len(K, "element x", &bits.element_x, g.elements as u64)?;
    let spatial = g.extent.iter().map(|&e| e as u64).product::<u64>();
    let n = g
        .items
        .checked_mul(spatial)
        .filter(|&n| n <= isize::MAX as u64 / 8)
        .ok_or_else(|| bad("the arrays are too large".into()))?;
    check_binary_buffers(gpu, K, n, input, mask, output, changed, slot)?;
    if n == 0 {
        return Ok(());
    }
    let args = BinaryBitsArgs {
        geometry: *g,
        dilation: dilation as u32,
        border: border as u32,
        local: local as u32,
        x_runs: if local { bits.x_runs } else { 0 },
        element_rows: bits.element_rows.as_ptr(),
        element_x: bits.element_x.as_ptr(),
        // In place (no input): the step reads the output.
        input: input.map_or(output.as_ptr(), |i| i.as_ptr()),
        mask: mask.map_or(std::ptr::null(), |m| m.as_ptr()),
        output: output.as_mut_ptr(),
        // A device address: slot < changed.len() (checked).
        changed: changed.as_mut_ptr().wrapping_add(slot),
    };
    let blocks = g.units().min(gpu.multiprocessor_count() as u64 * 32).max(1) as u32;
    let config = LaunchConfig { blocks, threads: BITS_THREADS, shared_bytes: shared as u32 };
    // The caller made the element tables within the layout's offsets and
    // ±32 along x, and sets `local` only for elements holding offset 0.
    // SAFETY: input, output, mask and flags are long enough (checked);
    // input and output are distinct, or one buffer for a monotone step in
    // place (the caller's); the layout and shared memory agree.
    unsafe { gpu.launch(config, args) }
}

/// The buffers of [`fill_holes_components`] for arrays of `n` elements:
/// edge masks, the components forest and the marks of reached roots.
pub(crate) struct FillHolesScratch {
    edges: DeviceBuffer<u8>,
    parent: DeviceBuffer<u32>,
    reached: DeviceBuffer<u8>,
}

impl FillHolesScratch {
    /// Scratch for arrays of `n` elements.
    pub(crate) fn new(gpu: &Gpu, n: usize) -> Result<Self> {
        Ok(Self { edges: gpu.uninit(n)?, parent: gpu.uninit(n)?, reached: gpu.uninit(n)? })
    }
}

/// `binary_fill_holes` by the background's components, on one array of
/// `dims` (rank 1 and 2 as leading extents of 1 before `first_axis`):
/// its faces as edge masks (`fill_holes_edges`), the components of the
/// watershed (`uf_tile_local`, `uf_tile_faces`), the components that reach
/// the border (`fill_holes_reach`) and the result (`fill_holes_output`).
/// `input` and `output` hold at least `offset + n` values, `n` the
/// elements of `dims`; the array is the `n` values from `offset` on.
/// `scratch` is reused across the arrays of a batch.
pub(crate) fn fill_holes_components(
    gpu: &Gpu,
    input: &DeviceBuffer<u8>,
    output: &mut DeviceBuffer<u8>,
    offset: usize,
    dims: gpu_waterz_abi::Dims3,
    first_axis: u32,
    scratch: &mut FillHolesScratch,
) -> Result<()> {
    use gpu_waterz_abi::watershed::{uf_tile_grid, UfTileFacesArgs, UfTileLocalArgs, UF_SHARED_BYTES, UF_THREADS};
    const NAME: &str = "fill_holes_components";
    let n = dims.z * dims.y * dims.x;
    if n >= u32::MAX as u64 || first_axis > 2 {
        return Err(RuntimeError::InvalidLaunch {
            kernel: NAME,
            reason: format!("{n} elements (fewer than 2^32 are taken), first axis {first_axis}"),
        });
    }
    check_len(NAME, "input", input, offset as u64 + n)?;
    check_len(NAME, "output", output, offset as u64 + n)?;
    let FillHolesScratch { edges, parent, reached } = scratch;
    check_len(NAME, "edges", edges, n)?;
    check_len(NAME, "parent", parent, n)?;
    check_len(NAME, "reached", reached, n)?;
    gpu.memset_zero(reached)?;
    let (array, result) = (input.as_ptr().wrapping_add(offset), output.as_mut_ptr().wrapping_add(offset));
    let grid = gpu.grid_stride_config(n);
    let [tiles_z, tiles_y, tiles_x] = uf_tile_grid(dims);
    let tiles = tiles_z * tiles_y * tiles_x;
    let tile_config = gpu_waterz_runtime::tiled_config(tiles, 1, UF_THREADS, UF_SHARED_BYTES)?;
    // The components kernels run one block of UF_THREADS per tile of
    // `uf_tile_grid(dims)` (the local one with UF_SHARED_BYTES of shared
    // memory), `uf_tile_local` writing every parent before `uf_tile_faces`
    // completes the forest that the last two kernels follow.
    // `edges`, `parent` and `reached` hold at least n entries (checked;
    // reached zeroed); n < 2^32; first_axis <= 2.
    // SAFETY: `array` and `result` address n values of `input` and
    // `output` from `offset` on (checked), distinct buffers; the scratch,
    // n and the launch shapes as said above.
    unsafe {
        gpu.launch(grid, FillHolesEdgesArgs { input: array, dims, edges: edges.as_mut_ptr() })?;
        gpu.launch(tile_config, UfTileLocalArgs { edges: edges.as_ptr(), dims, parent: parent.as_mut_ptr() })?;
        gpu.launch(
            tile_config.with_shared_bytes(0),
            UfTileFacesArgs { edges: edges.as_ptr(), dims, parent: parent.as_mut_ptr() },
        )?;
        gpu.launch(
            grid,
            FillHolesReachArgs {
                input: array,
                dims,
                first_axis,
                reserved: 0,
                parent: parent.as_ptr(),
                reached: reached.as_mut_ptr(),
            },
        )?;
        gpu.launch(
            grid,
            FillHolesOutputArgs { input: array, n, parent: parent.as_ptr(), reached: reached.as_ptr(), output: result },
        )
    }
}
