//! The GPU paths:
//! - grey-scale and binary morphology ([`grey_filter`], [`binary_filter`])
//!   on batches of arrays of spatial rank 1 to 8, equal to the CPU path
//!   (`kernels-rs/src/morphology.rs`; launches in the private
//!   `gpu::launch` module);
//! - the distance transform: one pass per axis of a volume of up to three
//!   axes (`kernels-rs/src/distance.rs`; launches in the private `launch`
//!   module), exact with unit sampling as [`crate::distance`] is.

use crate::distance::{check_sampling, no_background, Metric};
#[allow(unsafe_code)]
mod launch;

use crate::{check_input, invalid, Footprint, Mode, Result};
use gpu_waterz_abi::morphology::{
    BitsGeometry, BoxGeometry, MorphGeometry, TileGeometry, WarpGeometry, BITS_MAX_Z, BITS_REACH_X, BITS_THREADS,
    BITS_WORDS, BOX_X, BOX_Y, MORPH_MAX_RANK, TILE_MAX_Z, TILE_SHARED_BYTES, TILE_X, TILE_Y, WARP_ROWS_WIDE,
    WARP_THREADS, WARP_X, X_RUNS_DOWN, X_RUNS_UP,
};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu};
use launch::{self as morph, DeviceBits, DeviceFootprint, DeviceTile};
use ndarray::{ArrayD, ArrayViewD};

/// The shortest rows (last-axis extent) for which [`Strategy::Auto`] runs
/// flat boxes of rank 3 beyond the warp kernels' windows as staged passes:
/// at 512 they measured 1.1–1.9× faster than the box and wide warp
/// kernels, at 64 (batches of 64³) slower than the wide warp kernels,
/// whose rows then take few outputs per unit (`docs/BENCHMARKS.md`).
pub const STAGED_ROWS: usize = 256;

/// How [`grey_filter`] reads the structuring element. Every strategy gives
/// the same values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// `Warp` for flat boxes of rank 1 to 3 whose window fits the warp
    /// kernels of windows up to 3; one staged pass per axis (`Separable`)
    /// for other flat boxes whose windows fit the staging area, of rank 1
    /// or 2, or of rank 3 with rows of at least [`STAGED_ROWS`]; for other
    /// flat boxes of rank 3 the wide warp kernels where they take them;
    /// `Box` for other flat boxes and pluses of rank 1 to 3 whose
    /// window fits the box kernels; else one pass per axis for boxes of more than 27 elements;
    /// else tiles for rank 1 to 3 when the halo fits the shared memory;
    /// else the gather (the default). `docs/BENCHMARKS.md` has the
    /// measurements behind the order.
    #[default]
    Auto,
    /// Every element read from global memory at every position.
    Gather,
    /// One pass per axis whose window is longer than one, or shifted
    /// (boxes only; other elements take the gather): each warp stages its
    /// lines' values in shared memory when the window fits (6 KB per warp),
    /// else each position reads its window from global memory.
    Separable,
    /// Tiles with their halo in shared memory (rank 1 to 3 when it fits;
    /// else the gather).
    Tile,
    /// Flat boxes of rank 1 to 3 streamed plane by plane along z, the
    /// minimum taken along x, y, then z in shared memory, and flat pluses
    /// (scipy's cross, any arms) the same way (when the window fits the
    /// kernels, [`takes_box_kernel`]; else as `Auto`).
    Box,
    /// Flat boxes (and, in float32, flat pluses such as scipy's cross) of
    /// rank 1 to 3 of windows up to 3 along every axis held in registers: each warp streams its columns' planes,
    /// the minimum along x taken by warp shuffles, along y and z in
    /// registers (no shared memory; when the window fits,
    /// [`takes_warp_kernel`]; else as `Box`). Windows of 3 along y and x
    /// and 3 or 1 along z (scipy's `size=3` and its cross, in 3-D and 2-D)
    /// take kernels that hold them as constants. In float32 and uint8, flat
    /// boxes with a window of 4 to 7 along some axis (and at most 7 along
    /// every axis, such as scipy's `size=7`) take the wide warp kernels,
    /// which take the minimum along y first and shuffle only the output
    /// rows.
    Warp,
}

/// The element types of [`grey_filter`], [`grey_filters_host`] and
/// [`grey_operator_host`] (sealed: their launches are a trait of the
/// private `launch` module): float32, float64 and uint8, each filtered in
/// its own type. uint8 takes flat elements (sizes, footprints and
/// structures of zeros) and, in [`Mode::Constant`], a `cval` that is a
/// whole number from 0 to 255, so that every result is one of its values
/// (others are an error: scipy would cast out-of-range doubles, which C
/// leaves undefined).
pub trait GreyValue: launch::GreyKernels + NumpyArithmetic + 'static {}
impl GreyValue for f32 {}
impl GreyValue for f64 {}
impl GreyValue for u8 {}

/// Whether `T` holds every result of a filter over `footprint` with `mode`
/// and `cval`: always for the floats; for uint8 (whose kernels pick input
/// values and `cval`, [`GreyValue`]) with a flat element and, in constant
/// mode, a byte `cval`.
fn check_values<T: GreyValue>(footprint: &Footprint, mode: Mode, cval: f64) -> Result<()> {
    if T::BYTES {
        if !footprint.is_flat() {
            return Err(invalid(
                "uint8 arrays take flat elements on the GPU (a size, a footprint or a structure of \
                 zeros), not weights",
            ));
        }
        if mode == Mode::Constant && !(cval.fract() == 0.0 && (0.0..=255.0).contains(&cval)) {
            return Err(invalid(format!("uint8 arrays take a cval that is a whole number from 0 to 255, not {cval}")));
        }
    }
    Ok(())
}

/// `items` arrays of spatial `shape`, one after another in C order: a
/// batch `(B, C, spatial…)` is `B · C` items of the spatial shape.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// The number of arrays.
    pub items: usize,
    /// The shape of each, rank 1 to 8.
    pub shape: &'a [usize],
}

impl Batch<'_> {
    /// The number of values.
    pub fn len(&self) -> usize {
        self.items * self.shape.iter().product::<usize>()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The kernels' geometry of `batch` for `footprint`.
fn geometry(batch: Batch<'_>, footprint: &Footprint) -> Result<MorphGeometry> {
    let shape = batch.shape;
    check_input(shape)?;
    let rank = shape.len();
    if footprint.rank() != rank {
        return Err(invalid(format!("the structuring element has rank {}, the arrays {rank}", footprint.rank())));
    }
    let elements = u32::try_from(footprint.len())
        .ok()
        .filter(|&e| e > 0)
        .ok_or_else(|| invalid(format!("{} active elements", footprint.len())))?;
    let spatial = shape
        .iter()
        .try_fold(1u64, |n, &s| n.checked_mul(s as u64))
        .ok_or_else(|| invalid(format!("the shape {shape:?} is too large")))?;
    (batch.items as u64)
        .checked_mul(spatial)
        .filter(|&n| n <= isize::MAX as u64 / 8)
        .ok_or_else(|| invalid(format!("{} arrays of {shape:?} are too many", batch.items)))?;
    let mut g = MorphGeometry {
        rank: rank as u32,
        elements,
        spatial,
        items: batch.items as u64,
        extent: [1; MORPH_MAX_RANK],
        stride: [0; MORPH_MAX_RANK],
        low: [0; MORPH_MAX_RANK],
        high: [0; MORPH_MAX_RANK],
    };
    let mut stride = 1u64;
    for axis in (0..rank).rev() {
        g.extent[axis] = shape[axis] as u64;
        g.stride[axis] = stride;
        stride *= shape[axis] as u64;
    }
    for (axis, (low, high)) in footprint.extrema().into_iter().enumerate() {
        g.low[axis] = low as i64;
        g.high[axis] = high as i64;
    }
    Ok(g)
}

/// Uploads `footprint`'s tables for `geometry`.
fn upload_footprint(gpu: &Gpu, geometry: MorphGeometry, footprint: &Footprint) -> Result<DeviceFootprint> {
    let offsets: Vec<i64> = footprint.offsets().iter().flatten().map(|&o| o as i64).collect();
    // Offsets are bounded by the element's extent and strides by the
    // array's size, so the products fit (checked anyway).
    let flat_offsets = footprint
        .offsets()
        .iter()
        .map(|o| {
            o.iter().enumerate().try_fold(0i64, |sum, (axis, &v)| {
                (v as i64).checked_mul(geometry.stride[axis] as i64).and_then(|t| sum.checked_add(t))
            })
        })
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| invalid("the structuring element's offsets overflow"))?;
    let flat = footprint.is_flat();
    let weights = if flat { gpu.zeros::<f64>(1)? } else { gpu.upload(footprint.weights())? };
    Ok(DeviceFootprint {
        geometry,
        offsets: gpu.upload(&offsets)?,
        flat_offsets: gpu.upload(&flat_offsets)?,
        weights,
        flat,
    })
}

/// The tile layout of `batch` (rank 1 to 3) for `footprint` with values of
/// `value_bytes`, or `None` when the rank is larger or the halo does not
/// fit the shared memory. The halo always covers offset 0 (each position
/// reads its own value in the binary tiles).
fn tile_layout(gpu: &Gpu, batch: Batch<'_>, footprint: &Footprint, value_bytes: usize) -> Result<Option<DeviceTile>> {
    let rank = batch.shape.len();
    if !(1..=3).contains(&rank) || footprint.rank() != rank {
        return Ok(None);
    }
    let mut extent = [1u32; 3];
    for (slot, &n) in extent[3 - rank..].iter_mut().zip(batch.shape) {
        match u32::try_from(n) {
            Ok(n) => *slot = n,
            Err(_) => return Ok(None),
        }
    }
    let mut low = [0i32; 3];
    let mut high = [0i32; 3];
    for (axis, (lo, hi)) in footprint.extrema().into_iter().enumerate() {
        let a = 3 - rank + axis;
        match (i32::try_from(lo.min(0)), i32::try_from(hi.max(0))) {
            (Ok(lo), Ok(hi)) => (low[a], high[a]) = (lo, hi),
            _ => return Ok(None),
        }
    }
    let tile_z = extent[0].min(TILE_MAX_Z);
    let tile = [tile_z, TILE_Y, TILE_X];
    let mut halo = [0u32; 3];
    for (axis, slot) in halo.iter_mut().enumerate() {
        *slot = match u32::try_from(tile[axis] as i64 + high[axis] as i64 - low[axis] as i64) {
            Ok(h) => h,
            Err(_) => return Ok(None),
        };
    }
    let shared = halo.iter().map(|&h| h as u64).product::<u64>() * value_bytes as u64;
    if shared > TILE_SHARED_BYTES as u64 {
        return Ok(None);
    }
    let geometry = TileGeometry {
        items: batch.items as u64,
        extent,
        tile_z,
        low,
        high,
        halo,
        tiles: [extent[0].div_ceil(tile_z), extent[1].div_ceil(TILE_Y), extent[2].div_ceil(TILE_X)],
        elements: u32::try_from(footprint.len()).map_err(|_| invalid("too many active elements"))?,
    };
    let offsets: Vec<i32> = footprint
        .offsets()
        .iter()
        .map(|o| {
            let mut padded = [0i32; 3];
            for (axis, &v) in o.iter().enumerate() {
                padded[3 - rank + axis] = v as i32;
            }
            geometry.shared_offset(padded)
        })
        .collect();
    let flat = footprint.is_flat();
    let weights = if flat { gpu.zeros::<f64>(1)? } else { gpu.upload(footprint.weights())? };
    Ok(Some(DeviceTile { geometry, shared_offsets: gpu.upload(&offsets)?, weights, flat }))
}

/// Whether [`Strategy::Box`] runs `footprint` over `batch` with values of
/// `value_bytes` bytes in the box kernels: a flat box or plus of rank 1 to
/// 3 whose window fits them ([`Strategy::Auto`] takes them too).
pub fn takes_box_kernel(gpu: &Gpu, batch: Batch<'_>, footprint: &Footprint, value_bytes: usize) -> Result<bool> {
    Ok(box_layout(gpu, batch, footprint, value_bytes)?.is_some())
}

/// A spatial shape of rank 1 to 3 as `(z, y, x)` (leading axes of extent
/// 1), or `None` when an extent is not a u32 that `fits`.
fn padded_extent(shape: &[usize], fits: impl Fn(u32) -> bool) -> Option<[u32; 3]> {
    let mut extent = [1u32; 3];
    for (slot, &n) in extent[3 - shape.len()..].iter_mut().zip(shape) {
        *slot = u32::try_from(n).ok().filter(|&n| fits(n))?;
    }
    Some(extent)
}

/// The element's window (least and largest offsets) of rank 1 to 3 along
/// `(z, y, x)` (0 along leading axes), or `None` when an offset is not an
/// i32.
fn padded_window(footprint: &Footprint) -> Option<([i32; 3], [i32; 3])> {
    let first = 3 - footprint.rank();
    let (mut low, mut high) = ([0i32; 3], [0i32; 3]);
    for (axis, (lo, hi)) in footprint.extrema().into_iter().enumerate() {
        (low[first + axis], high[first + axis]) = (i32::try_from(lo).ok()?, i32::try_from(hi).ok()?);
    }
    Some((low, high))
}

/// Output planes per work unit along z and the units along z for an
/// extent of `planes`: 32, halved (down to 4) while the units (`per_chunk`
/// for each chunk of planes) would be fewer than `enough`.
fn chunk_planes(planes: u32, per_chunk: u64, enough: u64) -> (u32, u32) {
    let mut chunk = 32;
    while chunk > 4 && planes.div_ceil(chunk) as u64 * per_chunk < enough {
        chunk /= 2;
    }
    (chunk, planes.div_ceil(chunk))
}

/// Output planes per warp of the warp kernels and the units along z for an
/// extent of `planes` and a window of `window` planes, with `per_chunk`
/// units for each chunk of planes and `resident` warps on the device at
/// once: the longest chunk of 4 to 32 planes (all of them, when fewer)
/// whose rounds of resident warps times the planes each warp loads (its
/// outputs and the window's halo) come within 2 % of the fewest (the
/// rounds do not count the halo that longer chunks save). A round that the
/// last units fill only in part takes as long as a full one: with six rows
/// per warp, 256³ and 64 × 64³ took chunks of 22 planes (1.95 and 2.0
/// rounds of 16 warps per multiprocessor on 132, 24 planes loaded each)
/// 5–7 % faster than 16 (2.6 rounds, 18 planes), in the order this cost
/// gives for every chunk measured (`docs/BENCHMARKS.md`).
fn warp_chunk_planes(planes: u32, window: u32, per_chunk: u64, resident: u64) -> (u32, u32) {
    let (resident, halo) = (resident.max(1), window.max(1) as u64 - 1);
    let cost = |chunk: u32| {
        let units = planes.div_ceil(chunk) as u64 * per_chunk;
        units.div_ceil(resident) * (chunk.min(planes) as u64 + halo)
    };
    let (least, most) = (4.min(planes.max(1)), 32.min(planes.max(1)));
    let fewest = (least..=most).map(cost).min().unwrap_or(0);
    let chunk = (least..=most).rev().find(|&chunk| cost(chunk) * 50 <= fewest * 51).unwrap_or(least);
    (chunk, planes.div_ceil(chunk))
}

/// Whether [`Strategy::Warp`] runs `footprint` over `batch` with values of
/// `T` in the warp kernels: a flat box (or, in float32, a flat plus) of
/// rank 1 to 3 whose window fits them ([`Strategy::Auto`] takes them
/// first, but for the wide kernels).
pub fn takes_warp_kernel<T: GreyValue>(gpu: &Gpu, batch: Batch<'_>, footprint: &Footprint) -> Result<bool> {
    Ok(warp_layout::<T>(gpu, batch, footprint, true)?.is_some())
}

/// Whether the element is a flat box (`(false, _)`) or a flat plus
/// (`(true, centre)`, the centre along `(z, y, x)`), or `None` for any
/// other element or a centre past i32.
fn box_or_plus(footprint: &Footprint) -> Option<(bool, [i32; 3])> {
    let mut centre = [0i32; 3];
    if footprint.is_box() {
        return Some((false, centre));
    }
    let first = 3 - footprint.rank();
    for (axis, &v) in footprint.plus_centre()?.iter().enumerate() {
        centre[first + axis] = i32::try_from(v).ok()?;
    }
    Some((true, centre))
}

/// The warp kernels' geometry of `batch` (rank 1 to 3) for `footprint`
/// with `T`'s output rows per warp (its fixed-window kernels' rows where
/// the geometry is `fixed()`), or `None` when the element is not a
/// flat box (or, where `T`'s kernels take them, a flat plus), the rank is
/// larger, the window does not fit the kernels (the wide kernels' windows
/// only with `take_wide`) or a
/// plane is too large for their 32-bit offsets. Output planes per warp:
/// [`warp_chunk_planes`], for as many warps as the kernel's occupancy
/// puts on the device at once.
fn warp_layout<T: GreyValue>(
    gpu: &Gpu,
    batch: Batch<'_>,
    footprint: &Footprint,
    take_wide: bool,
) -> Result<Option<WarpGeometry>> {
    let rank = batch.shape.len();
    if !(1..=3).contains(&rank) || footprint.rank() != rank {
        return Ok(None);
    }
    let Some((plus, centre)) = box_or_plus(footprint) else {
        return Ok(None);
    };
    if plus && !T::WARP_PLUS {
        return Ok(None);
    }
    let Some(extent) = padded_extent(batch.shape, |n| n as u64 + 2 * WARP_X as u64 <= u32::MAX as u64) else {
        return Ok(None);
    };
    let Some((low, high)) = padded_window(footprint) else {
        return Ok(None);
    };
    let mut geometry = WarpGeometry {
        items: batch.items as u64,
        extent,
        chunk_z: 32,
        low,
        high,
        tiles: [0, 0, 0],
        rows: 0,
        plus: plus as u32,
        centre,
        past: T::WARP_PAST as u32,
    };
    // Boxes with a window longer than WARP_WINDOW (up to
    // WARP_WIDE_WINDOW) take the wide kernels where the type has them; the
    // fixed-window kernels take their own rows per warp.
    let wide_kernel = if take_wide && geometry.wide() { T::wide_kernel() } else { None };
    geometry.rows = match wide_kernel {
        Some(_) => WARP_ROWS_WIDE,
        None => T::warp_rows(geometry.fixed(), plus),
    };
    if (extent[1] as u64 + geometry.rows as u64) * (extent[2] as u64 + WARP_X as u64) >= u32::MAX as u64 {
        return Ok(None);
    }
    geometry.tiles[1] = extent[1].div_ceil(geometry.rows);
    geometry.tiles[2] = extent[2].div_ceil(geometry.outputs_x());
    if !(geometry.windows_fit() || wide_kernel.is_some())
        || geometry.tiles[1] as u64 * geometry.tiles[2] as u64 * extent[0] as u64 > u32::MAX as u64
    {
        return Ok(None);
    }
    let per_chunk = geometry.items * geometry.tiles[1] as u64 * geometry.tiles[2] as u64;
    let kernel = wide_kernel.unwrap_or_else(|| T::warp_kernel(geometry.fixed(), plus));
    let resident = gpu.multiprocessor_count() as u64
        * gpu.blocks_per_multiprocessor(kernel, WARP_THREADS, 0)? as u64
        * (WARP_THREADS / 32) as u64;
    (geometry.chunk_z, geometry.tiles[0]) = warp_chunk_planes(extent[0], geometry.window(0), per_chunk, resident);
    Ok(Some(geometry))
}

/// The box kernels' geometry of `batch` (rank 1 to 3) for `footprint`, or
/// `None` when the element is neither a flat box nor a flat
/// plus ([`Footprint::plus_centre`]), the rank is larger or the window does
/// not fit the kernel. Output planes per block: 32, halved (down to 4)
/// while the units would not fill the device four times.
fn box_layout(gpu: &Gpu, batch: Batch<'_>, footprint: &Footprint, value_bytes: usize) -> Result<Option<BoxGeometry>> {
    let rank = batch.shape.len();
    if !(1..=3).contains(&rank) || footprint.rank() != rank {
        return Ok(None);
    }
    let Some((plus, centre)) = box_or_plus(footprint) else {
        return Ok(None);
    };
    let Some(extent) = padded_extent(batch.shape, |n| n < u32::MAX - BOX_X) else {
        return Ok(None);
    };
    if extent[1] as u64 * extent[2] as u64 >= u32::MAX as u64 {
        return Ok(None);
    }
    // Windows the kernel cannot take are refused below.
    let Some((low, high)) = padded_window(footprint) else {
        return Ok(None);
    };
    let mut geometry = BoxGeometry {
        items: batch.items as u64,
        extent,
        chunk_z: 32,
        low,
        high,
        tiles: [0, extent[1].div_ceil(BOX_Y), extent[2].div_ceil(BOX_X)],
        plus: plus as u32,
        centre,
        reserved: 0,
    };
    if geometry.shared_bytes(value_bytes as u32).is_none() {
        return Ok(None);
    }
    let per_chunk = geometry.items * geometry.tiles[1] as u64 * geometry.tiles[2] as u64;
    (geometry.chunk_z, geometry.tiles[0]) = chunk_planes(extent[0], per_chunk, gpu.multiprocessor_count() as u64 * 16);
    Ok(Some(geometry))
}

/// The bit-row layout of `batch` (rank 1 to 3) for `footprint`, or `None`
/// when the rank is larger, an x offset reaches past ±32 or the halo does
/// not fit the shared memory.
fn bits_layout(gpu: &Gpu, batch: Batch<'_>, footprint: &Footprint) -> Result<Option<DeviceBits>> {
    let rank = batch.shape.len();
    if !(1..=3).contains(&rank) || footprint.rank() != rank {
        return Ok(None);
    }
    let mut extent = [1u32; 3];
    for (slot, &n) in extent[3 - rank..].iter_mut().zip(batch.shape) {
        match u32::try_from(n) {
            Ok(n) => *slot = n,
            Err(_) => return Ok(None),
        }
    }
    // Offsets per (z, y, x), padded with zeros in front, row by row (the
    // kernel reads each row once for its elements in a run).
    let mut padded: Vec<[i64; 3]> = footprint
        .offsets()
        .iter()
        .map(|o| {
            let mut p = [0i64; 3];
            for (axis, &v) in o.iter().enumerate() {
                p[3 - rank + axis] = v as i64;
            }
            p
        })
        .collect();
    padded.sort_unstable();
    if padded.iter().any(|p| p[2].abs() > BITS_REACH_X as i64) {
        return Ok(None);
    }
    let reach = |axis: usize| {
        let low = padded.iter().map(|p| p[axis]).min().unwrap_or(0).min(0);
        let high = padded.iter().map(|p| p[axis]).max().unwrap_or(0).max(0);
        (low, high)
    };
    let ((low_z, high_z), (low_y, high_y)) = (reach(0), reach(1));
    // Rows along z: a power of two up to 16 that the volume fills.
    let mut tile_z = 1u32;
    while tile_z * 2 <= BITS_MAX_Z && (tile_z * 2) as u64 <= extent[0] as u64 {
        tile_z *= 2;
    }
    let tile_y = BITS_THREADS / tile_z;
    let halo = [tile_z as i64 + high_z - low_z, tile_y as i64 + high_y - low_y];
    let row_bytes = 4 * (BITS_WORDS as u64 + 2);
    if (halo[0] as u64).saturating_mul(halo[1] as u64).saturating_mul(row_bytes) > TILE_SHARED_BYTES as u64 {
        return Ok(None);
    }
    let (Ok(halo_z), Ok(halo_y)) = (u32::try_from(halo[0]), u32::try_from(halo[1])) else {
        return Ok(None);
    };
    // Row offsets are taken in i32 (the halo bounds them far below).
    if [low_z, low_y, high_z, high_y].iter().any(|v| v.abs() > i32::MAX as i64 / 4) {
        return Ok(None);
    }
    let (low, high) = ([low_z as i32, low_y as i32], [high_z as i32, high_y as i32]);
    let geometry = BitsGeometry {
        items: batch.items as u64,
        extent,
        tile_z,
        tile_y,
        low,
        high,
        halo: [halo_z, halo_y],
        tiles: [extent[0].div_ceil(tile_z), extent[1].div_ceil(tile_y), extent[2].div_ceil(32 * BITS_WORDS)],
        elements: u32::try_from(footprint.len()).map_err(|_| invalid("too many active elements"))?,
    };
    if geometry.shared_words() as u64 * 4 > TILE_SHARED_BYTES as u64 {
        return Ok(None);
    }
    let element_rows: Vec<i32> = padded.iter().map(|p| (p[0] * halo_y as i64 + p[1]) as i32).collect();
    let element_x: Vec<i32> = padded.iter().map(|p| p[2] as i32).collect();
    // Steps repeated until stable may fill runs along x in one go where the
    // element holds the row's neighbours.
    let x_runs = [([0, 0, -1], X_RUNS_UP), ([0, 0, 1], X_RUNS_DOWN)]
        .into_iter()
        .filter(|(offset, _)| padded.contains(offset))
        .fold(0, |runs, (_, flag)| runs | flag);
    Ok(Some(DeviceBits {
        geometry,
        element_rows: gpu.upload(&element_rows)?,
        element_x: gpu.upload(&element_x)?,
        x_runs,
    }))
}

/// The minimum (`maximum` false: erosion) or maximum (dilation) filter of
/// `input` over `footprint` into `output`, for every array of `batch`:
/// [`crate::grey_erosion`] and [`crate::grey_dilation`] on the GPU (resolve
/// `footprint` with [`Footprint::resolve`], reflected for dilation), equal
/// to them value for value. A flat element compares in the input's type;
/// weights are applied in float64 and the result cast once (uint8: see
/// [`GreyValue`] for what it takes).
#[allow(clippy::too_many_arguments)]
pub fn grey_filter<T: GreyValue>(
    gpu: &Gpu,
    input: &DeviceBuffer<T>,
    output: &mut DeviceBuffer<T>,
    batch: Batch<'_>,
    footprint: &Footprint,
    mode: Mode,
    cval: f64,
    maximum: bool,
    strategy: Strategy,
) -> Result<()> {
    let geometry = geometry(batch, footprint)?;
    check_values::<T>(footprint, mode, cval)?;
    let n = batch.len() as u64;
    check_len("grey_filter", "input", input, n)?;
    check_len("grey_filter", "output", output, n)?;
    if n == 0 {
        return Ok(());
    }
    // Auto: staged passes where measured faster ([`auto_takes_passes`]),
    // the wide warp kernels for the other flat boxes of rank 3.
    let passes = passes_of(footprint);
    let rank = batch.shape.len();
    let auto_passes = strategy == Strategy::Auto && staged_passes_chosen::<T>(&geometry, batch, footprint, &passes);
    if matches!(strategy, Strategy::Auto | Strategy::Warp) {
        let take_wide = strategy == Strategy::Warp || (!auto_passes && rank == 3);
        if let Some(geometry) = warp_layout::<T>(gpu, batch, footprint, take_wide)? {
            return Ok(T::warped(gpu, &geometry, mode.code(), maximum, cval, input, output)?);
        }
    }
    if auto_passes {
        return run_passes(gpu, &geometry, &passes, mode, maximum, cval, input, output);
    }
    if matches!(strategy, Strategy::Auto | Strategy::Box | Strategy::Warp) {
        if let Some(geometry) = box_layout(gpu, batch, footprint, std::mem::size_of::<T>())? {
            return Ok(T::boxed(gpu, &geometry, mode.code(), maximum, cval, input, output)?);
        }
    }
    let separable = footprint.is_box()
        && !passes.is_empty()
        && match strategy {
            Strategy::Auto | Strategy::Box | Strategy::Warp => footprint.len() > 27,
            Strategy::Gather | Strategy::Tile => false,
            Strategy::Separable => true,
        };
    if !separable && matches!(strategy, Strategy::Auto | Strategy::Box | Strategy::Warp | Strategy::Tile) {
        if let Some(tile) = tile_layout(gpu, batch, footprint, std::mem::size_of::<T>())? {
            return Ok(T::tile(gpu, &tile, mode.code(), maximum, cval, input, output)?);
        }
    }
    if !separable {
        let device = upload_footprint(gpu, geometry, footprint)?;
        return Ok(T::filter(gpu, &device, mode.code(), maximum, cval, input, output)?);
    }
    run_passes(gpu, &geometry, &passes, mode, maximum, cval, input, output)
}

/// One separable pass per `(axis, window)` of `passes` (at least one), the
/// first from `input`, the last into `output`, through one scratch array
/// when there are two or more.
#[allow(clippy::too_many_arguments)]
fn run_passes<T: GreyValue>(
    gpu: &Gpu,
    geometry: &MorphGeometry,
    passes: &[(u32, (i64, i64))],
    mode: Mode,
    maximum: bool,
    cval: f64,
    input: &DeviceBuffer<T>,
    output: &mut DeviceBuffer<T>,
) -> Result<()> {
    if let [(axis, window)] = *passes {
        return Ok(T::line(gpu, geometry, axis, window, mode.code(), maximum, cval, input, output)?);
    }
    let mut scratch = gpu.uninit::<T>(input.len())?;
    alternate(passes.len(), input, output, &mut scratch, |i, from, to| {
        let (axis, window) = passes[i];
        Ok(T::line(gpu, geometry, axis, window, mode.code(), maximum, cval, from, to)?)
    })
}

/// One pass per axis whose window is wider than one element, or moved
/// off 0 (a shift, possible only through an origin): `(axis, (low, high))`.
fn passes_of(footprint: &Footprint) -> Vec<(u32, (i64, i64))> {
    footprint
        .extrema()
        .into_iter()
        .enumerate()
        .filter(|&(_, (low, high))| high > low || low != 0)
        .map(|(axis, (low, high))| (axis as u32, (low as i64, high as i64)))
        .collect()
}

/// Whether [`Strategy::Auto`] runs `footprint` over `batch` as one staged
/// pass per axis (when the warp kernels of windows up to 3 do not take
/// it): a flat box whose every pass fits a warp's staging area for values
/// of `T`, of rank 1 or 2, or of rank 3 with rows of at least
/// [`STAGED_ROWS`] (measured faster than the box and wide warp kernels
/// there; shorter rank-3 rows take the wide warp kernels,
/// `docs/BENCHMARKS.md`, session 46).
pub fn auto_takes_passes<T: GreyValue>(batch: Batch<'_>, footprint: &Footprint) -> Result<bool> {
    let geometry = geometry(batch, footprint)?;
    Ok(staged_passes_chosen::<T>(&geometry, batch, footprint, &passes_of(footprint)))
}

/// [`auto_takes_passes`] for the geometry and passes [`grey_filter`]
/// already derived.
fn staged_passes_chosen<T: GreyValue>(
    geometry: &MorphGeometry,
    batch: Batch<'_>,
    footprint: &Footprint,
    passes: &[(u32, (i64, i64))],
) -> bool {
    let rank = batch.shape.len();
    let long_rows = batch.shape.last().is_some_and(|&x| x >= STAGED_ROWS);
    let fits = passes.iter().all(|&(axis, (low, high))| {
        morph::line_chunk(geometry, axis, (high - low + 1) as u64, std::mem::size_of::<T>() as u32, 0).is_some()
    });
    footprint.is_box() && !passes.is_empty() && fits && (rank <= 2 || long_rows)
}

/// Runs `steps` (at least one) steps, the first from `input`, each into
/// `output` or `scratch` in turn so that the last one writes `output`.
fn alternate<T: gpu_waterz_runtime::DeviceElement>(
    steps: usize,
    input: &DeviceBuffer<T>,
    output: &mut DeviceBuffer<T>,
    scratch: &mut DeviceBuffer<T>,
    mut step: impl FnMut(usize, &DeviceBuffer<T>, &mut DeviceBuffer<T>) -> Result<()>,
) -> Result<()> {
    for i in 0..steps {
        let into_output = (steps - 1 - i).is_multiple_of(2);
        match (i, into_output) {
            (0, true) => step(i, input, output)?,
            (0, false) => step(i, input, scratch)?,
            (_, true) => step(i, scratch, output)?,
            (_, false) => step(i, output, scratch)?,
        }
    }
    Ok(())
}

/// Whether [`binary_fill_holes_components`] takes arrays of `shape` with
/// the structuring element `footprint` (as resolved for dilation):
/// scipy's default structure (the unit cross) without an origin, rank 1
/// to 3, fewer than 2^32 elements per array.
pub fn fill_holes_by_components(shape: &[usize], footprint: &Footprint) -> bool {
    (1..=3).contains(&shape.len())
        && footprint.rank() == shape.len()
        && footprint.is_unit_cross()
        && shape.iter().try_fold(1u64, |n, &e| n.checked_mul(e as u64)).is_some_and(|n| n < u32::MAX as u64)
}

/// `scipy.ndimage.binary_fill_holes` with scipy's default structure of
/// `input` (any non-zero byte is true) into `output` (0 or 1 per value)
/// for every array of `batch`, by connected components: the background's
/// face-connected components (the watershed's union-find kernels), those
/// with an element on the border marked, the others filled. Equal to the
/// dilation from the border until stable, which scipy runs, in five
/// launches per array instead of steps until nothing changes. An error
/// unless [`fill_holes_by_components`] takes the shape and element.
pub fn binary_fill_holes_components(
    gpu: &Gpu,
    input: &DeviceBuffer<u8>,
    output: &mut DeviceBuffer<u8>,
    batch: Batch<'_>,
    footprint: &Footprint,
) -> Result<()> {
    check_input(batch.shape)?;
    if !fill_holes_by_components(batch.shape, footprint) {
        return Err(invalid(
            "fill holes by components takes scipy's default structure without an origin, rank 1 to 3, fewer than \
             2^32 elements per array",
        ));
    }
    let spatial: usize = batch.shape.iter().product();
    let n = batch.len() as u64;
    check_len("binary_fill_holes", "input", input, n)?;
    check_len("binary_fill_holes", "output", output, n)?;
    if n == 0 {
        return Ok(());
    }
    let mut extent = [1u64; 3];
    for (e, &s) in extent[3 - batch.shape.len()..].iter_mut().zip(batch.shape) {
        *e = s as u64;
    }
    let dims = Dims3::new(extent[0], extent[1], extent[2]);
    let first_axis = (3 - batch.shape.len()) as u32;
    let mut scratch = morph::FillHolesScratch::new(gpu, spatial)?;
    for item in 0..batch.items {
        morph::fill_holes_components(gpu, input, output, item * spatial, dims, first_axis, &mut scratch)?;
    }
    Ok(())
}

/// How many binary steps [`binary_filter`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Iterations {
    /// This many (at least one).
    Times(u64),
    /// Until a step changes nothing (the element must hold its centre, so
    /// that steps only shrink or grow and cannot cycle).
    UntilStable,
}

/// The most steps per check of [`Iterations::UntilStable`]: steps past
/// the stable state change nothing, so the flags are read once per this
/// many once the first checks found changes.
const STEPS_PER_CHECK: usize = 8;

/// `scipy.ndimage.binary_erosion` (`dilation` false) or `binary_dilation`
/// of `input` (0 or 1 per value) into `output` for every array of `batch`:
/// `footprint` (resolved with [`Footprint::resolve`] from the structure,
/// reflected for dilation), `border` outside the arrays, the input kept
/// where `mask` is 0. Returns the number of steps run (for
/// [`Iterations::UntilStable`], possibly a few more than needed: they
/// change nothing).
#[allow(clippy::too_many_arguments)]
pub fn binary_filter(
    gpu: &Gpu,
    input: &DeviceBuffer<u8>,
    output: &mut DeviceBuffer<u8>,
    mask: Option<&DeviceBuffer<u8>>,
    batch: Batch<'_>,
    footprint: &Footprint,
    border: bool,
    dilation: bool,
    iterations: Iterations,
) -> Result<u64> {
    let geometry = geometry(batch, footprint)?;
    let n = batch.len() as u64;
    check_len("binary_filter", "input", input, n)?;
    check_len("binary_filter", "output", output, n)?;
    if let Some(mask) = mask {
        check_len("binary_filter", "mask", mask, n)?;
    }
    if !footprint.is_flat() {
        return Err(invalid("a binary structure has no weights"));
    }
    match iterations {
        Iterations::Times(0) => return Err(invalid("binary_filter runs at least one step")),
        Iterations::UntilStable if !footprint.has_centre() => {
            return Err(invalid(
                "until stable needs a structure whose centre (moved by the origin) is set: others may cycle",
            ))
        }
        _ => {}
    }
    if n == 0 {
        return Ok(0);
    }
    // Tiles for rank 1 to 3; until stable, each tile repeats the step in
    // shared memory until it is stable (the element holds its centre, so
    // the steps only grow or shrink and any order reaches the same state).
    // Rows of bits (32 positions per operation) when the element's x reach
    // is within ±32, else byte tiles, else the global gather.
    let bits = bits_layout(gpu, batch, footprint)?;
    let tile = if bits.is_none() { tile_layout(gpu, batch, footprint, 1)? } else { None };
    let device =
        if bits.is_none() && tile.is_none() { Some(upload_footprint(gpu, geometry, footprint)?) } else { None };
    let local = iterations == Iterations::UntilStable;
    let mut flags = gpu.zeros::<u32>(STEPS_PER_CHECK)?;
    // A step of `from` into `to`, or in place on `to` (no `from`).
    let step = |from: Option<&DeviceBuffer<u8>>, to: &mut DeviceBuffer<u8>, flags: &mut DeviceBuffer<u32>, slot| match (
        &bits, &tile, &device,
    ) {
        (Some(bits), _, _) => morph::binary_bits(gpu, bits, dilation, border, local, from, mask, to, flags, slot),
        (None, Some(tile), _) => morph::binary_tile(gpu, tile, dilation, border, local, from, mask, to, flags, slot),
        (None, None, Some(device)) => morph::binary_filter(gpu, device, dilation, border, from, mask, to, flags, slot),
        _ => unreachable!("one of the three layouts was made"),
    };
    match iterations {
        Iterations::Times(steps) => {
            let mut scratch = gpu.uninit::<u8>(if steps > 1 { n as usize } else { 1 })?;
            alternate(steps as usize, input, output, &mut scratch, |_, from, to| {
                Ok(step(Some(from), to, &mut flags, 0)?)
            })?;
            Ok(steps)
        }
        Iterations::UntilStable => {
            // The first step into the output, the others in place there:
            // the element holds its centre, so every step only grows (or
            // only shrinks) the set, and a block that reads values another
            // block is writing reaches the same stable set, in fewer steps
            // (a step carries changes across many tiles instead of one).
            // The flags are read after 1, 2, 4, then STEPS_PER_CHECK steps.
            step(Some(input), output, &mut flags, 0)?;
            let mut steps = 1u64;
            let (mut last, mut batch) = (0usize, 1usize);
            while gpu.download_element(&flags, last)? != 0 {
                gpu.memset_zero(&mut flags)?;
                for slot in 0..batch {
                    step(None, output, &mut flags, slot)?;
                    steps += 1;
                }
                last = batch - 1;
                batch = (batch * 2).min(STEPS_PER_CHECK);
            }
            Ok(steps)
        }
    }
}

/// The `(z, y, x)` extent of a shape of rank 1 to 3 (leading axes of 1).
fn dims_of(shape: &[usize]) -> Result<Dims3> {
    check_input(shape)?;
    let mut d = [1u64; 3];
    if shape.len() > 3 {
        return Err(invalid(format!("the GPU distance transform takes spatial rank 1 to 3, not {}", shape.len())));
    }
    for (slot, &s) in d[3 - shape.len()..].iter_mut().zip(shape) {
        *slot = s as u64;
    }
    Ok(Dims3::new(d[0], d[1], d[2]))
}

/// How the exact integer passes of [`distance_transform_edt`] (unit
/// spacing) and [`distance_transform_cdt`] (axes of at most 12,288
/// elements) find each element's minimum along the y and z lines. Every
/// choice gives the same distances (and indices naming a nearest
/// background element).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinePasses {
    /// `Envelope` for the taxicab metric (its sweeps were the fastest way
    /// on every mask measured), else `Split` at [`AUTO_MEAN_RADIUS`]
    /// (`docs/BENCHMARKS.md`, session 43) but `Search` along lines of at
    /// most [`AUTO_SEARCH_LENGTH`].
    #[default]
    Auto,
    /// Each line by one thread in global memory, linear in its length
    /// whatever the distances: its lower envelope of parabolas (Euclidean)
    /// or a sweep each way (chamfer metrics). Slow where a line holds many
    /// background elements near one another (the envelope's scratch is
    /// read and written in no common order).
    Envelope,
    /// Each line held in shared memory and searched outward from every
    /// element until the step alone costs more than the best found: fast
    /// where the background is dense, as long as the distances where it
    /// is sparse.
    Search,
    /// Each line held in shared memory, and searched there when its
    /// elements' bounds on their search (their own cost's root for the
    /// Euclidean metric, the cost itself for the chamfer ones, the line's
    /// length for none) average at most `mean_radius`; the other lines by
    /// one thread each as `Envelope`.
    Split {
        /// The most mean bound of a line that is searched.
        mean_radius: u32,
    },
}

/// `LinePasses::Auto`'s mean radius (Euclidean and chessboard metrics):
/// the lines whose elements' bounds on their search average more are
/// each taken by one thread. Measured on an H100 (`docs/BENCHMARKS.md`,
/// session 43) from 1 to 16 on four 512³ masks: 8 kept the search's
/// speed on dense background (blobs 3.60 ms against its 3.40) and took
/// within 1.35× of the envelope's where the background is sparse (where
/// the search alone is 1.5–30× slower).
pub const AUTO_MEAN_RADIUS: u32 = 8;

/// `LinePasses::Auto` searches every line of at most this many elements
/// (Euclidean and chessboard metrics) instead of splitting: a search takes
/// at most the line's length per element, while the few lines a split
/// would defer each cost the one-thread pass a whole line's latency. On an
/// H100 (`docs/BENCHMARKS.md`, session 44) the split deferred 0.9 % of the
/// y lines of 64 volumes of 64³ blobs, and their envelope took 0.081 ms of
/// the batch's 0.672 ms.
pub const AUTO_SEARCH_LENGTH: u64 = 64;

/// The distances of each array of `batch` in `mask` (one byte per element,
/// C order, the arrays one after another; 0: background, any other byte
/// measured) into `out` (one float64 per element):
/// [`crate::distance_transform_edt`] of each array, on the GPU (spatial
/// rank 1 to 3).
pub fn distance_transform_edt(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    sampling: Option<&[f64]>,
    out: &mut DeviceBuffer<f64>,
) -> Result<()> {
    edt(gpu, mask, batch, sampling, out, None, LinePasses::Auto)
}

/// [`distance_transform_edt`] with the feature transform:
/// [`crate::distance::distance_transform_edt_with_indices`] of each array
/// on the GPU. `indices` receives, for every element, the coordinates of
/// one nearest background element of its array (per array `(rank,) +
/// shape` int32 in C order, the arrays one after another, which is `batch
/// + (rank,) + shape` for a batch); an array without background gets
/// scipy's `(-1, 0, ..., 0)`. Batches of fewer than 2^32 - 1 elements.
pub fn distance_transform_edt_with_indices(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    sampling: Option<&[f64]>,
    out: &mut DeviceBuffer<f64>,
    indices: &mut DeviceBuffer<i32>,
) -> Result<()> {
    edt(gpu, mask, batch, sampling, out, Some(indices), LinePasses::Auto)
}

/// [`distance_transform_edt`], with indices when given
/// ([`distance_transform_edt_with_indices`]), its integer passes as
/// `passes` says.
pub fn distance_transform_edt_with(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    sampling: Option<&[f64]>,
    out: &mut DeviceBuffer<f64>,
    indices: Option<&mut DeviceBuffer<i32>>,
    passes: LinePasses,
) -> Result<()> {
    edt(gpu, mask, batch, sampling, out, indices, passes)
}

/// The checks shared by the transforms: the volume of one array, the
/// number of elements, the buffers' devices and lengths (`mask` one byte
/// per element, `out_len` values, `indices` rank per element and flat
/// indices below `EDT_NO_FEATURE`).
fn check_transform(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    out_len: usize,
    indices: Option<&DeviceBuffer<i32>>,
) -> Result<(Dims3, u64)> {
    let dims = dims_of(batch.shape)?;
    let n =
        (batch.items as u64).checked_mul(dims.z * dims.y * dims.x).ok_or_else(|| invalid("the batch is too large"))?;
    gpu.check_device(mask, "the mask")?;
    check_len("edt", "mask", mask, n)?;
    if (out_len as u64) < n {
        return Err(invalid(format!("the output holds {out_len} values, not {n}")));
    }
    if let Some(indices) = indices {
        gpu.check_device(indices, "the indices")?;
        check_len("edt", "indices", indices, n * batch.shape.len() as u64)?;
        if n >= gpu_waterz_abi::distance::EDT_NO_FEATURE as u64 {
            return Err(invalid(format!(
                "the GPU feature transform takes batches of fewer than 2^32 - 1 elements, not {n}"
            )));
        }
    }
    Ok((dims, n))
}

/// The two feature buffers of the passes, when indices are asked for.
type FeaturePair = Option<(DeviceBuffer<u32>, DeviceBuffer<u32>)>;

/// The pair as the launches take it.
fn pair(f: &mut FeaturePair) -> Option<crate::launch::Features<'_>> {
    f.as_mut().map(|(first, second)| crate::launch::Features { first, second })
}

/// The transforms above.
fn edt(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    sampling: Option<&[f64]>,
    out: &mut DeviceBuffer<f64>,
    indices: Option<&mut DeviceBuffer<i32>>,
    passes: LinePasses,
) -> Result<()> {
    let shape = batch.shape;
    let sampling = check_sampling(sampling, shape.len())?;
    gpu.check_device(out, "the output")?;
    let (dims, n) = check_transform(gpu, mask, batch, out.len(), indices.as_deref())?;
    if n == 0 {
        return Ok(());
    }
    let items = batch.items as u64;
    // Spacing per (z, y, x) axis; padded axes have one element, any spacing.
    let mut spacing = [1.0f64; 3];
    spacing[3 - shape.len()..].copy_from_slice(&sampling);
    let mut background = gpu.zeros::<u32>(batch.items)?;
    let mut features: FeaturePair = match indices {
        Some(_) => Some((gpu.uninit::<u32>(n as usize)?, gpu.uninit::<u32>(n as usize)?)),
        None => None,
    };
    // Unit spacing: integer passes with each line in shared memory (exact);
    // else, or for lines too long to hold, the float64 passes.
    let mut done = false;
    if spacing == [1.0; 3] && crate::launch::lines_fit(dims) {
        let mut first = gpu.uninit::<u32>(n as usize)?;
        let mut second = gpu.uninit::<u32>(n as usize)?;
        done = crate::launch::edt_line_passes(
            gpu,
            dims,
            items,
            mask,
            crate::launch::LineOutput::Euclidean(out),
            &mut first,
            &mut second,
            passes,
            pair(&mut features),
            &mut background,
        )?;
    }
    if !done {
        let mut scratch = gpu.uninit::<f64>(n as usize)?;
        crate::launch::edt_passes(
            gpu,
            dims,
            items,
            spacing,
            mask,
            out,
            &mut scratch,
            pair(&mut features),
            &mut background,
        )?;
    }
    if let (Some(indices), Some((nearest, _))) = (indices, &features) {
        // Without background every feature is none: scipy's point.
        crate::launch::edt_indices(gpu, dims, items, shape.len(), false, nearest, indices)?;
    }
    // Arrays without background take scipy's distances for that case.
    let flags = gpu.download(&background)?;
    if flags.contains(&0) {
        let host = no_background(shape, &sampling);
        let values = host.as_slice().expect("a new array is contiguous");
        for (item, _) in flags.iter().enumerate().filter(|(_, &f)| f == 0) {
            gpu.upload_into(out, item * values.len(), values)?;
        }
    }
    Ok(())
}

/// Whether [`distance_transform_cdt`] runs arrays of spatial `shape` on the
/// GPU: rank 1 to 3 and every axis of at most 12,288 elements (each line
/// held in shared memory; `crate::distance::distance_transform_cdt` takes
/// the others).
pub fn takes_chamfer(shape: &[usize]) -> bool {
    dims_of(shape).is_ok_and(crate::launch::lines_fit)
}

/// The chamfer distance transform of each array of `batch` in `mask` (as
/// for [`distance_transform_edt`]) under `metric` (taxicab or chessboard)
/// into `out` (int32, -1 for an array without background) and, when
/// given, `indices` (as for [`distance_transform_edt_with_indices`]; an
/// array without background gives each element its own coordinates):
/// [`crate::distance::distance_transform_cdt`] of each array on the GPU,
/// exact; arrays that [`takes_chamfer`].
pub fn distance_transform_cdt(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    metric: Metric,
    out: &mut DeviceBuffer<i32>,
    indices: Option<&mut DeviceBuffer<i32>>,
) -> Result<()> {
    distance_transform_cdt_with(gpu, mask, batch, metric, out, indices, LinePasses::Auto)
}

/// [`distance_transform_cdt`] with its passes as `passes` says.
pub fn distance_transform_cdt_with(
    gpu: &Gpu,
    mask: &DeviceBuffer<u8>,
    batch: Batch<'_>,
    metric: Metric,
    out: &mut DeviceBuffer<i32>,
    indices: Option<&mut DeviceBuffer<i32>>,
    passes: LinePasses,
) -> Result<()> {
    use gpu_waterz_abi::distance::{METRIC_CHESSBOARD, METRIC_TAXICAB};
    let code = match metric {
        Metric::Taxicab => METRIC_TAXICAB,
        Metric::Chessboard => METRIC_CHESSBOARD,
        Metric::Euclidean => return Err(invalid("the chamfer transform takes the taxicab or chessboard metric")),
    };
    gpu.check_device(out, "the output")?;
    let (dims, n) = check_transform(gpu, mask, batch, out.len(), indices.as_deref())?;
    if !crate::launch::lines_fit(dims) {
        return Err(invalid(format!(
            "the GPU chamfer transform takes axes of at most 12,288 elements, not {:?}",
            batch.shape
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let items = batch.items as u64;
    let mut background = gpu.zeros::<u32>(batch.items)?;
    let mut features: FeaturePair = match indices {
        Some(_) => Some((gpu.uninit::<u32>(n as usize)?, gpu.uninit::<u32>(n as usize)?)),
        None => None,
    };
    let mut first = gpu.uninit::<u32>(n as usize)?;
    let mut second = gpu.uninit::<u32>(n as usize)?;
    let done = crate::launch::edt_line_passes(
        gpu,
        dims,
        items,
        mask,
        crate::launch::LineOutput::Chamfer(out, code),
        &mut first,
        &mut second,
        passes,
        pair(&mut features),
        &mut background,
    )?;
    if !done {
        return Err(invalid("the GPU chamfer transform's lines do not fit the shared memory"));
    }
    if let (Some(indices), Some((nearest, _))) = (indices, &features) {
        crate::launch::edt_indices(gpu, dims, items, batch.shape.len(), true, nearest, indices)?;
    }
    Ok(())
}

/// The batch of a host array whose first `batch_dims` axes index arrays of
/// the spatial shape of the rest, with that shape.
fn host_batch(shape: &[usize], batch_dims: usize) -> Result<(usize, Vec<usize>)> {
    if batch_dims >= shape.len() {
        return Err(invalid(format!(
            "batch_dims={batch_dims} leaves no spatial axis of an array of rank {}",
            shape.len()
        )));
    }
    let spatial = shape[batch_dims..].to_vec();
    dims_of(&spatial)?;
    Ok((shape[..batch_dims].iter().product(), spatial))
}

/// The shape of the indices of a host array of `shape` with `batch_dims`:
/// `batch + (rank,) + spatial`.
fn index_shape(shape: &[usize], batch_dims: usize) -> Vec<usize> {
    let mut full = shape[..batch_dims].to_vec();
    full.push(shape.len() - batch_dims);
    full.extend_from_slice(&shape[batch_dims..]);
    full
}

/// [`distance_transform_edt`] of a host array (`batch_dims` leading axes
/// of arrays of spatial rank 1 to 3); distances back on the host.
pub fn distance_transform_edt_host(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    batch_dims: usize,
    sampling: Option<&[f64]>,
) -> Result<ArrayD<f64>> {
    Ok(edt_host(gpu, input, batch_dims, sampling, false)?.0)
}

/// [`distance_transform_edt_with_indices`] for a host array (as
/// [`distance_transform_edt_host`]); distances and indices (`batch +
/// (rank,) + spatial`) back on the host.
pub fn distance_transform_edt_with_indices_host(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    batch_dims: usize,
    sampling: Option<&[f64]>,
) -> Result<(ArrayD<f64>, ArrayD<i32>)> {
    let (distances, indices) = edt_host(gpu, input, batch_dims, sampling, true)?;
    Ok((distances, indices.expect("asked for")))
}

/// The host transforms above.
fn edt_host(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    batch_dims: usize,
    sampling: Option<&[f64]>,
    with_indices: bool,
) -> Result<(ArrayD<f64>, Option<ArrayD<i32>>)> {
    let (_, spatial) = host_batch(input.shape(), batch_dims)?;
    check_sampling(sampling, spatial.len())?;
    transform_host(gpu, input, batch_dims, with_indices, |mask, batch, out, indices| {
        edt(gpu, mask, batch, sampling, out, indices, LinePasses::Auto)
    })
}

/// [`distance_transform_cdt`] of a host array (`batch_dims` leading axes
/// of arrays that [`takes_chamfer`]): int32 distances and, when asked for,
/// indices (`batch + (rank,) + spatial`), back on the host.
pub fn distance_transform_cdt_host(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    batch_dims: usize,
    metric: Metric,
    with_indices: bool,
) -> Result<(ArrayD<i32>, Option<ArrayD<i32>>)> {
    transform_host(gpu, input, batch_dims, with_indices, |mask, batch, out, indices| {
        distance_transform_cdt(gpu, mask, batch, metric, out, indices)
    })
}

/// A distance transform `run` of a host array (`batch_dims` leading axes
/// of arrays of spatial rank 1 to 3): the mask uploaded, the distances
/// (and, `with_indices`, the indices, `batch + (rank,) + spatial`)
/// downloaded.
fn transform_host<T: gpu_waterz_runtime::DeviceElement + Default>(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    batch_dims: usize,
    with_indices: bool,
    run: impl FnOnce(&DeviceBuffer<u8>, Batch<'_>, &mut DeviceBuffer<T>, Option<&mut DeviceBuffer<i32>>) -> Result<()>,
) -> Result<(ArrayD<T>, Option<ArrayD<i32>>)> {
    let shape = input.shape().to_vec();
    let (items, spatial) = host_batch(&shape, batch_dims)?;
    let index_shape = index_shape(&shape, batch_dims);
    if input.is_empty() {
        let indices = with_indices.then(|| ArrayD::zeros(index_shape));
        return Ok((ArrayD::from_elem(input.raw_dim(), T::default()), indices));
    }
    let batch = Batch { items, shape: &spatial };
    let standard = input.as_standard_layout();
    let bytes = mask_bytes(&standard);
    let mask = gpu.upload(bytes)?;
    let mut out = gpu.uninit::<T>(bytes.len())?;
    let mut indices = if with_indices { Some(gpu.uninit::<i32>(bytes.len() * spatial.len())?) } else { None };
    run(&mask, batch, &mut out, indices.as_mut())?;
    let indices = match indices {
        Some(i) => Some(ArrayD::from_shape_vec(index_shape, gpu.download(&i)?).expect("rank values per element")),
        None => None,
    };
    let values = gpu.download(&out)?;
    Ok((ArrayD::from_shape_vec(shape, values).expect("one distance per element"), indices))
}

/// The grey-scale filters of `scipy.ndimage` that [`grey_filters_host`]
/// runs (the other operators are differences of them, taken in the
/// input's type by [`GreyOperator::combine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreyFilter {
    /// [`crate::grey_erosion`].
    Erosion,
    /// [`crate::grey_dilation`].
    Dilation,
    /// [`crate::grey_opening`].
    Opening,
    /// [`crate::grey_closing`].
    Closing,
}

/// `filters` of a host array on the GPU, uploaded once: `input`'s first
/// `batch_dims` axes index arrays of the spatial shape of the rest (as
/// [`Batch`]). Each result equals the CPU function's value for value, in
/// `T` (a flat element picks input values, which `T` holds; a
/// structure's weights are added in float64 and the sum cast once, as
/// [`grey_filter`]; uint8 takes what [`GreyValue`] says).
pub fn grey_filters_host<T: GreyValue>(
    gpu: &Gpu,
    input: ArrayViewD<'_, T>,
    batch_dims: usize,
    args: &crate::Grey<'_>,
    filters: &[GreyFilter],
    strategy: Strategy,
) -> Result<Vec<ArrayD<T>>> {
    let shape = input.shape().to_vec();
    if batch_dims >= shape.len() {
        return Err(invalid(format!("batch_dims {batch_dims} leaves no spatial axis of the shape {shape:?}")));
    }
    let spatial = &shape[batch_dims..];
    check_input(spatial)?;
    let erosion = Footprint::resolve(spatial.len(), &args.element, &args.origin, false)?;
    let dilation = Footprint::resolve(spatial.len(), &args.element, &args.origin, true)?;
    check_values::<T>(&erosion, args.mode, args.cval)?;
    if input.is_empty() {
        return Ok(filters.iter().map(|_| input.to_owned()).collect());
    }
    let batch = Batch { items: shape[..batch_dims].iter().product(), shape: spatial };
    let contiguous = input.as_standard_layout();
    let values = contiguous.as_slice().expect("standard layout");
    let device = gpu.upload(values)?;
    let filter = |from: &DeviceBuffer<T>, maximum: bool| -> Result<DeviceBuffer<T>> {
        let mut out = gpu.uninit::<T>(values.len())?;
        let footprint = if maximum { &dilation } else { &erosion };
        grey_filter(gpu, from, &mut out, batch, footprint, args.mode, args.cval, maximum, strategy)?;
        Ok(out)
    };
    filters
        .iter()
        .map(|f| {
            let result = match f {
                GreyFilter::Erosion => filter(&device, false)?,
                GreyFilter::Dilation => filter(&device, true)?,
                GreyFilter::Opening => filter(&filter(&device, false)?, true)?,
                GreyFilter::Closing => filter(&filter(&device, true)?, false)?,
            };
            let host = gpu.download(&result)?;
            Ok(ArrayD::from_shape_vec(shape.clone(), host).expect("one value per element"))
        })
        .collect()
}

/// The grey-scale operators of `scipy.ndimage` as the filters of
/// [`grey_filters_host`] they take and the arithmetic, in the input's
/// type, that makes their result of the filters' results
/// ([`GreyOperator::combine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreyOperator {
    /// [`crate::grey_erosion`].
    Erosion,
    /// [`crate::grey_dilation`].
    Dilation,
    /// [`crate::grey_opening`].
    Opening,
    /// [`crate::grey_closing`].
    Closing,
    /// [`crate::morphological_gradient`]: the dilation minus the erosion.
    Gradient,
    /// [`crate::morphological_laplace`]: the dilation plus the erosion,
    /// minus the input twice.
    Laplace,
    /// [`crate::white_tophat`]: the input minus the opening.
    WhiteTophat,
    /// [`crate::black_tophat`]: the closing minus the input.
    BlackTophat,
}

impl std::str::FromStr for GreyOperator {
    type Err = crate::MorphologyError;

    /// scipy's names without the `grey_` and `morphological_` prefixes:
    /// `erosion`, `dilation`, `opening`, `closing`, `gradient`, `laplace`,
    /// `white_tophat`, `black_tophat`.
    fn from_str(name: &str) -> Result<Self> {
        Ok(match name {
            "erosion" => Self::Erosion,
            "dilation" => Self::Dilation,
            "opening" => Self::Opening,
            "closing" => Self::Closing,
            "gradient" => Self::Gradient,
            "laplace" => Self::Laplace,
            "white_tophat" => Self::WhiteTophat,
            "black_tophat" => Self::BlackTophat,
            other => {
                return Err(invalid(format!(
                    "operation must be erosion, dilation, opening, closing, gradient, laplace, white_tophat or \
                     black_tophat, not {other:?}"
                )))
            }
        })
    }
}

/// Addition and subtraction as numpy takes them in one type: rounded to
/// the nearest for floating point, wrapping for unsigned integers.
pub trait NumpyArithmetic: Copy + Send + Sync {
    /// `self + other`.
    fn add(self, other: Self) -> Self;
    /// `self - other`.
    fn sub(self, other: Self) -> Self;
}

macro_rules! float_arithmetic {
    ($($t:ty),*) => {$(
        impl NumpyArithmetic for $t {
            fn add(self, other: Self) -> Self {
                self + other
            }
            fn sub(self, other: Self) -> Self {
                self - other
            }
        }
    )*};
}

macro_rules! wrapping_arithmetic {
    ($($t:ty),*) => {$(
        impl NumpyArithmetic for $t {
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn sub(self, other: Self) -> Self {
                self.wrapping_sub(other)
            }
        }
    )*};
}

float_arithmetic!(f32, f64);
wrapping_arithmetic!(u8, u16, u32, u64);

impl GreyOperator {
    /// The filters whose results [`GreyOperator::combine`] takes, in its
    /// order.
    pub fn filters(self) -> &'static [GreyFilter] {
        match self {
            Self::Erosion => &[GreyFilter::Erosion],
            Self::Dilation => &[GreyFilter::Dilation],
            Self::Opening | Self::WhiteTophat => &[GreyFilter::Opening],
            Self::Closing | Self::BlackTophat => &[GreyFilter::Closing],
            Self::Gradient | Self::Laplace => &[GreyFilter::Dilation, GreyFilter::Erosion],
        }
    }

    /// The operator's result from the results of [`GreyOperator::filters`]
    /// (`filtered`, in that order) and the input, in the input's type and
    /// in scipy's order of operations, on every core; the first filter's
    /// array is reused for the result.
    ///
    /// # Errors
    /// When `filtered` does not hold one array of the input's shape per
    /// filter.
    pub fn combine<T: NumpyArithmetic>(self, filtered: Vec<ArrayD<T>>, input: ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
        if filtered.len() != self.filters().len() || filtered.iter().any(|a| a.shape() != input.shape()) {
            return Err(invalid(format!(
                "{self:?} takes {} filtered arrays of the input's shape {:?}",
                self.filters().len(),
                input.shape()
            )));
        }
        let mut filtered = filtered.into_iter();
        let mut result = filtered.next().expect("one filter at least");
        let zip = ndarray::Zip::from(&mut result).and(&input);
        match self {
            Self::Erosion | Self::Dilation | Self::Opening | Self::Closing => {}
            Self::WhiteTophat => zip.par_for_each(|r, &v| *r = v.sub(*r)),
            Self::BlackTophat => zip.par_for_each(|r, &v| *r = r.sub(v)),
            Self::Gradient => {
                let eroded = filtered.next().expect("two filters");
                zip.and(&eroded).par_for_each(|r, _, &e| *r = r.sub(e));
            }
            Self::Laplace => {
                let eroded = filtered.next().expect("two filters");
                zip.and(&eroded).par_for_each(|r, &v, &e| *r = r.add(e).sub(v).sub(v));
            }
        }
        Ok(result)
    }
}

/// `operator` of a host array on the GPU: its filters from one upload
/// ([`grey_filters_host`]), combined on the host in `T`
/// ([`GreyOperator::combine`]), equal to scipy's result in `T`.
pub fn grey_operator_host<T: GreyValue>(
    gpu: &Gpu,
    input: ArrayViewD<'_, T>,
    batch_dims: usize,
    args: &crate::Grey<'_>,
    operator: GreyOperator,
    strategy: Strategy,
) -> Result<ArrayD<T>> {
    let filtered = grey_filters_host(gpu, input.view(), batch_dims, args, operator.filters(), strategy)?;
    operator.combine(filtered, input)
}

/// The binary operators of `scipy.ndimage`, for [`binary_operator_host`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOperator {
    /// [`crate::binary_erosion`].
    Erosion,
    /// [`crate::binary_dilation`].
    Dilation,
    /// [`crate::binary_opening`].
    Opening,
    /// [`crate::binary_closing`].
    Closing,
    /// [`crate::binary_fill_holes`] (only the structure and origin of the
    /// arguments count).
    FillHoles,
}

/// `operator` on a boolean host array on the GPU ([`binary_filter`]),
/// equal to the CPU functions of [`crate::Binary`].
pub fn binary_operator_host(
    gpu: &Gpu,
    input: ArrayViewD<'_, bool>,
    args: &crate::Binary<'_>,
    operator: BinaryOperator,
) -> Result<ArrayD<bool>> {
    let shape = input.shape().to_vec();
    let standard = input.as_standard_layout();
    let view = ArrayViewD::from_shape(shape.clone(), mask_bytes(&standard)).expect("one byte per element");
    let result = binary_operator_bytes(gpu, view, args, operator)?;
    Ok(mask_of(shape, result.as_slice().expect("a new array is contiguous")))
}

/// [`binary_operator_host`] on the kernels' own bytes: `input` holds 0
/// (false) or 1 (true), and so does the result (no conversion on the
/// host but the copies to and from the GPU).
pub fn binary_operator_bytes(
    gpu: &Gpu,
    input: ArrayViewD<'_, u8>,
    args: &crate::Binary<'_>,
    operator: BinaryOperator,
) -> Result<ArrayD<u8>> {
    let shape = input.shape().to_vec();
    let contiguous = input.as_standard_layout();
    let bytes = contiguous.as_slice().expect("standard layout");
    if operator == BinaryOperator::FillHoles {
        let element = args.footprint(&shape, true)?;
        if fill_holes_by_components(&shape, &element) && !input.is_empty() {
            let device = gpu.upload(bytes)?;
            let mut out = gpu.uninit::<u8>(bytes.len())?;
            binary_fill_holes_components(gpu, &device, &mut out, Batch { items: 1, shape: &shape }, &element)?;
            return Ok(ArrayD::from_shape_vec(shape, gpu.download(&out)?).expect("one byte per element"));
        }
        // The background reached from the border through `structure`,
        // grown from nothing inside the background; the rest is filled.
        let mask = input.mapv(|v| v == 0);
        let seed = ArrayD::<u8>::zeros(input.raw_dim());
        let fill = crate::Binary {
            structure: args.structure.view(),
            iterations: -1,
            mask: Some(mask.view()),
            border_value: true,
            origin: args.origin.clone(),
        };
        let reached = binary_operator_bytes(gpu, seed.view(), &fill, BinaryOperator::Dilation)?;
        return Ok(reached.mapv(|v| u8::from(v == 0)));
    }
    let erosion = args.footprint(&shape, false)?;
    let dilation = args.footprint(&shape, true)?;
    if input.is_empty() {
        return Ok(input.to_owned());
    }
    let batch = Batch { items: 1, shape: &shape };
    let iterations =
        if args.iterations < 1 { Iterations::UntilStable } else { Iterations::Times(args.iterations as u64) };
    let device = gpu.upload(bytes)?;
    let mask = match &args.mask {
        Some(m) => Some(gpu.upload(mask_bytes(&m.as_standard_layout()))?),
        None => None,
    };
    let run = |from: &DeviceBuffer<u8>, dilate: bool| -> Result<DeviceBuffer<u8>> {
        let mut out = gpu.uninit::<u8>(bytes.len())?;
        let footprint = if dilate { &dilation } else { &erosion };
        binary_filter(gpu, from, &mut out, mask.as_ref(), batch, footprint, args.border_value, dilate, iterations)?;
        Ok(out)
    };
    let result = match operator {
        BinaryOperator::Erosion => run(&device, false)?,
        BinaryOperator::Dilation => run(&device, true)?,
        BinaryOperator::Opening => run(&run(&device, false)?, true)?,
        BinaryOperator::Closing => run(&run(&device, true)?, false)?,
        BinaryOperator::FillHoles => unreachable!("handled above"),
    };
    Ok(ArrayD::from_shape_vec(shape, gpu.download(&result)?).expect("one byte per element"))
}

/// A boolean host array in standard order (`as_standard_layout`: borrowed
/// where it is already) as the kernels' bytes: a `bool` is one byte, 0 or
/// 1, so no copy is made.
fn mask_bytes<'a>(standard: &'a ndarray::CowArray<'_, bool, ndarray::IxDyn>) -> &'a [u8] {
    bytemuck::cast_slice(standard.as_slice().expect("standard layout"))
}

/// The boolean array of `shape` from the kernels' bytes (standard order).
fn mask_of(shape: Vec<usize>, values: &[u8]) -> ArrayD<bool> {
    use rayon::prelude::*;
    let values: Vec<bool> = values.par_iter().map(|&v| v != 0).collect();
    ArrayD::from_shape_vec(shape, values).expect("one value per element")
}

#[cfg(test)]
mod tests {
    use super::{auto_takes_passes, warp_chunk_planes, Batch, GreyFilter, GreyOperator, STAGED_ROWS};
    use crate::{Element, Footprint, Grey, Mode};
    use ndarray::{ArrayD, IxDyn};

    /// Every operator's combination of the CPU filters equals the CPU
    /// operator (float64, scipy's order of operations).
    #[test]
    fn combined_filters_equal_the_cpu_operators() {
        let input = ArrayD::from_shape_fn(IxDyn(&[5, 7, 6]), |i| {
            let v = (i[0] * 131 + i[1] * 71 + i[2] * 37) % 23;
            v as f64 * 0.37 - 3.1
        });
        for mode in [Mode::Reflect, Mode::Constant, Mode::Wrap] {
            let args = Grey { element: Element::Size(vec![3, 2, 3]), mode, cval: 0.3, origin: vec![0, 0, 1] };
            let filter = |f: &GreyFilter| match f {
                GreyFilter::Erosion => crate::grey_erosion(input.view(), &args).unwrap(),
                GreyFilter::Dilation => crate::grey_dilation(input.view(), &args).unwrap(),
                GreyFilter::Opening => crate::grey_opening(input.view(), &args).unwrap(),
                GreyFilter::Closing => crate::grey_closing(input.view(), &args).unwrap(),
            };
            type Cpu = fn(ndarray::ArrayViewD<'_, f64>, &Grey<'_>) -> crate::Result<ArrayD<f64>>;
            let operators: [(&str, Cpu); 8] = [
                ("erosion", crate::grey_erosion),
                ("dilation", crate::grey_dilation),
                ("opening", crate::grey_opening),
                ("closing", crate::grey_closing),
                ("gradient", crate::morphological_gradient),
                ("laplace", crate::morphological_laplace),
                ("white_tophat", crate::white_tophat),
                ("black_tophat", crate::black_tophat),
            ];
            for (name, cpu) in operators {
                let operator: GreyOperator = name.parse().unwrap();
                let filtered = operator.filters().iter().map(filter).collect();
                let combined = operator.combine(filtered, input.view()).unwrap();
                assert_eq!(combined, cpu(input.view(), &args).unwrap(), "{name}, {mode:?}");
            }
        }
        assert!("tophat".parse::<GreyOperator>().is_err());
    }

    /// Auto's staged passes: flat boxes of rank 1–2, and of rank 3 with
    /// rows of at least `STAGED_ROWS`, whose windows fit the staging area;
    /// not weighted elements, footprints with holes, identities, or
    /// shorter rank-3 rows (the wide warp kernels' there).
    #[test]
    fn auto_takes_staged_passes_where_measured_faster() {
        let takes = |shape: &[usize], element: Element<'_>, wide: bool| {
            let footprint = Footprint::resolve(shape.len(), &element, &vec![0; shape.len()], false).unwrap();
            let batch = Batch { items: 2, shape };
            if wide {
                auto_takes_passes::<f64>(batch, &footprint).unwrap()
            } else {
                auto_takes_passes::<f32>(batch, &footprint).unwrap()
            }
        };
        let size = |s: &[usize]| Element::Size(s.to_vec());
        assert!(takes(&[512, 512, 512], size(&[7, 7, 7]), false));
        assert!(takes(&[40, 30, STAGED_ROWS], size(&[1, 7, 7]), false));
        assert!(!takes(&[64, 64, STAGED_ROWS - 1], size(&[7, 7, 7]), false), "short rows: wide warp kernels");
        assert!(takes(&[4096, 4096], size(&[7, 7]), false));
        assert!(takes(&[9, 5], size(&[15, 1]), false), "rank 2, any extent");
        assert!(takes(&[100], size(&[33]), false));
        assert!(!takes(&[5, 5], size(&[1, 1]), false), "no pass: the identity");
        assert!(takes(&[300, 300], size(&[48, 3]), false), "48 rows of float32 hold a window of 48");
        assert!(!takes(&[300, 300], size(&[49, 3]), false), "but not 49");
        assert!(takes(&[300, 300], size(&[24, 3]), true), "24 rows of float64 hold 24");
        assert!(!takes(&[300, 300], size(&[25, 3]), true), "but not 25");
        let holes = ndarray::ArrayD::from_shape_fn(IxDyn(&[3, 3]), |i| i[0] != 1 || i[1] != 1);
        assert!(!takes(&[64, 64], Element::Footprint(holes.view()), false), "a footprint with a hole");
        let weights = ndarray::ArrayD::from_elem(IxDyn(&[5, 5]), 0.5);
        let weighted = Element::Structure { structure: weights.view(), footprint: None };
        assert!(!takes(&[64, 64], weighted, false), "weights");
    }

    /// A boolean array's bytes are 0 or 1 in standard order, also for a
    /// view that is not in it.
    #[test]
    fn boolean_arrays_are_the_kernels_bytes() {
        let a = ArrayD::from_shape_fn(IxDyn(&[3, 4]), |i| (i[0] + 2 * i[1]) % 3 == 0);
        let t = a.view().reversed_axes();
        let standard = t.as_standard_layout();
        let want: Vec<u8> = t.iter().map(|&v| u8::from(v)).collect();
        assert_eq!(super::mask_bytes(&standard), &want[..]);
        let view = a.view();
        let standard = view.as_standard_layout();
        assert_eq!(super::mask_bytes(&standard), &a.iter().map(|&v| u8::from(v)).collect::<Vec<_>>()[..]);
    }

    /// Unsigned differences wrap around as numpy's do; a wrong number or
    /// shape of filtered arrays is an error.
    #[test]
    fn combined_filters_wrap_and_check_their_arrays() {
        let input = ndarray::arr1(&[1u8, 200, 7]).into_dyn();
        let closed = ndarray::arr1(&[0u8, 250, 7]).into_dyn();
        let black = GreyOperator::BlackTophat.combine(vec![closed.clone()], input.view()).unwrap();
        assert_eq!(black.as_slice().unwrap(), &[255, 50, 0]);
        let laplace =
            GreyOperator::Laplace.combine(vec![closed.clone(), ndarray::arr1(&[3u8, 9, 0]).into_dyn()], input.view());
        // (0 + 3 - 1 - 1, 250 + 9 - 200 - 200, 7 + 0 - 7 - 7) modulo 256.
        assert_eq!(laplace.unwrap().as_slice().unwrap(), &[1, 115, 249]);
        assert!(GreyOperator::Gradient.combine(vec![closed.clone()], input.view()).is_err());
        let short = ndarray::arr1(&[0u8, 1]).into_dyn();
        assert!(GreyOperator::WhiteTophat.combine(vec![short], input.view()).is_err());
    }

    /// The warps an H100 or H200 holds at once in the fixed-window float32
    /// warp kernels: 132 multiprocessors, four blocks of four warps each.
    const RESIDENT: u64 = 132 * 16;

    #[test]
    fn warp_chunks_fill_whole_rounds() {
        // 256³ with six rows per warp: 43 row tiles times 8 column tiles
        // per chunk; 22 planes make 12 chunks, 4128 units, 1.95 rounds.
        assert_eq!(warp_chunk_planes(256, 3, 43 * 8, RESIDENT), (22, 12));
        // 64 × 64³: 64 items of 11 × 2 tiles; 3 chunks per item, 2.0 rounds.
        assert_eq!(warp_chunk_planes(64, 3, 64 * 11 * 2, RESIDENT), (22, 3));
        // With eight rows, 32 × 8 tiles per chunk of 256³ and 64 × 8 × 2 of
        // 64 × 64³: 32 planes, 2048 units, one round.
        assert_eq!(warp_chunk_planes(256, 3, 32 * 8, RESIDENT), (32, 8));
        assert_eq!(warp_chunk_planes(64, 3, 64 * 8 * 2, RESIDENT), (32, 2));
        // 512³: ten rounds and more; the longest chunks load the least halo.
        assert_eq!(warp_chunk_planes(512, 3, 86 * 16, RESIDENT), (32, 16));
        // A chunk never reaches past the planes, and 2-D arrays have one.
        assert_eq!(warp_chunk_planes(1, 1, 10, RESIDENT), (1, 1));
        assert_eq!(warp_chunk_planes(3, 3, 10, RESIDENT), (3, 1));
        // Few units: every chunk fits one round, so the shortest wins (the
        // most warps at work).
        assert_eq!(warp_chunk_planes(100, 3, 4, RESIDENT), (4, 25));
    }

    #[test]
    fn warp_chunks_cost_no_more_than_powers_of_two() {
        // The chosen chunk's rounds times planes loaded never exceed those
        // of any chunk the earlier rule (powers of two) could pick (the 2 %
        // allowance toward longer chunks never passes over one of them).
        let cost = |planes: u32, chunk: u32, per_chunk: u64| {
            (planes.div_ceil(chunk) as u64 * per_chunk).div_ceil(RESIDENT) * (chunk.min(planes) as u64 + 2)
        };
        for planes in [5, 17, 33, 64, 100, 128, 256, 300, 1000] {
            for per_chunk in [1, 7, 64, 344, 1408, 5000, 100_000] {
                let (chunk, tiles) = warp_chunk_planes(planes, 3, per_chunk, RESIDENT);
                assert!((4..=32).contains(&chunk) || chunk == planes, "{planes} {per_chunk}: {chunk}");
                assert_eq!(tiles, planes.div_ceil(chunk));
                for other in [4, 8, 16, 32] {
                    assert!(
                        cost(planes, chunk, per_chunk) <= cost(planes, other, per_chunk),
                        "{planes} {per_chunk}: {chunk} vs {other}"
                    );
                }
            }
        }
    }
}
