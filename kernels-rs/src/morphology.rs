//! Grey-scale and binary morphology: minimum and maximum filters over a
//! structuring element resolved on the host (`gpu_waterz_abi::morphology`
//! has the geometry, the boundary modes and the argument structs).

use crate::device::*;
use gpu_waterz_abi::morphology::*;

/// Calls `f(item, position)` for every position of every item that this
/// thread owns. A block takes work units of `MORPH_UNIT` consecutive
/// positions of one item in a grid-stride loop; thread `t` takes
/// positions `t`, `t + MORPH_THREADS`, … of the unit, so a warp's
/// positions are consecutive.
#[inline(always)]
fn for_each_position(geometry: &MorphGeometry, mut f: impl FnMut(u64, u64)) {
    let units_per_item = geometry.spatial.div_ceil(MORPH_UNIT);
    let units = units_per_item * geometry.items;
    let mut unit = block_idx_x() as u64;
    while unit < units {
        let item = unit / units_per_item;
        let first = (unit % units_per_item) * MORPH_UNIT + thread_idx_x() as u64;
        let mut k = 0;
        while k < MORPH_PER_THREAD as u64 {
            let p = first + k * MORPH_THREADS as u64;
            if p < geometry.spatial {
                f(item, p);
            }
            k += 1;
        }
        unit += grid_dim_x() as u64;
    }
}

/// The value types of the grey-scale filters.
trait Grey: ViaF64 + PartialOrd {
    const LARGEST: Self;
    const SMALLEST: Self;
}

impl Grey for f32 {
    const LARGEST: Self = f32::INFINITY;
    const SMALLEST: Self = f32::NEG_INFINITY;
}

impl Grey for f64 {
    const LARGEST: Self = f64::INFINITY;
    const SMALLEST: Self = f64::NEG_INFINITY;
}

/// Bytes: the flat filters pick input values (or a byte `cval`), which a
/// byte holds; the host gives them no weights.
impl Grey for u8 {
    const LARGEST: Self = u8::MAX;
    const SMALLEST: Self = 0;
}

/// Whether `candidate` replaces `best` (a strict comparison, as the CPU
/// path's: NaN never replaces).
#[inline(always)]
fn better<T: PartialOrd>(candidate: T, best: T, maximum: bool) -> bool {
    if maximum {
        candidate > best
    } else {
        candidate < best
    }
}

/// The grey-scale filter's body for one element type.
///
/// # Safety
/// As the kernels' `# Safety` sections.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn grey_filter<T: Grey>(
    geometry: &MorphGeometry,
    mode: u32,
    maximum: u32,
    flat: u32,
    cval: f64,
    offsets: *const i64,
    flat_offsets: *const i64,
    weights: *const f64,
    input: *const T,
    output: *mut T,
) {
    let maximum = maximum != 0;
    let elements = geometry.elements;
    // SAFETY: (the closure) offsets hold elements * rank values.
    let offset = |k: usize| unsafe { *offsets.add(k) };
    for_each_position(geometry, |item, p| {
        let coords = geometry.coordinates(p);
        let base = item * geometry.spatial;
        let interior = geometry.interior(&coords);
        let at = (base + p) as i64;
        if flat != 0 {
            // Compared in the input's type (exact: rounding is monotone).
            let outside = T::from_f64(cval);
            let mut best = if maximum { T::SMALLEST } else { T::LARGEST };
            let mut e = 0;
            while e < elements {
                // SAFETY: interior reads stay inside the item (the extrema
                // test); boundary reads map every coordinate into it.
                let v = unsafe {
                    if interior {
                        *input.add((at + *flat_offsets.add(e as usize)) as usize)
                    } else {
                        match geometry.boundary_read(&coords, e, mode, offset) {
                            Some(q) => *input.add((base + q) as usize),
                            None => outside,
                        }
                    }
                };
                if better(v, best, maximum) {
                    best = v;
                }
                e += 1;
            }
            // SAFETY: base + p is an element.
            unsafe { *output.add((base + p) as usize) = best };
        } else {
            // Weighted (a structure): in float64, cast once at the end; cval
            // in the input's type first, as scipy converts it (the tiles
            // hold it so too).
            let cval = T::from_f64(cval).to_f64();
            let mut best = if maximum { f64::NEG_INFINITY } else { f64::INFINITY };
            let mut e = 0;
            while e < elements {
                // SAFETY: as above; weights hold one value per element.
                let (v, w) = unsafe {
                    let w = *weights.add(e as usize);
                    let v = if interior {
                        (*input.add((at + *flat_offsets.add(e as usize)) as usize)).to_f64()
                    } else {
                        match geometry.boundary_read(&coords, e, mode, offset) {
                            Some(q) => (*input.add((base + q) as usize)).to_f64(),
                            None => cval,
                        }
                    };
                    (v, w)
                };
                let v = if maximum { v + w } else { v - w };
                if better(v, best, maximum) {
                    best = v;
                }
                e += 1;
            }
            // SAFETY: base + p is an element.
            unsafe { *output.add((base + p) as usize) = T::from_f64(best) };
        }
    });
}

/// One separable pass's body for one element type.
///
/// # Safety
/// As the kernels' `# Safety` sections.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn grey_line<T: Grey>(
    geometry: &MorphGeometry,
    axis: u32,
    mode: u32,
    maximum: u32,
    low: i64,
    high: i64,
    cval: f64,
    input: *const T,
    output: *mut T,
) {
    let maximum = maximum != 0;
    let (n, stride) = geometry.axis(axis);
    let n = n as i64;
    let outside = T::from_f64(cval);
    for_each_position(geometry, |item, p| {
        let c = if geometry.spatial <= u32::MAX as u64 {
            ((p as u32 / stride as u32) % n as u32) as i64
        } else {
            ((p / stride) % n as u64) as i64
        };
        // The line's first element.
        let line = item * geometry.spatial + p - c as u64 * stride;
        let mut best = if maximum { T::SMALLEST } else { T::LARGEST };
        if c + low >= 0 && c + high < n {
            let mut at = line + (c + low) as u64 * stride;
            let mut o = low;
            while o <= high {
                // SAFETY: c + o lies on the line (tested above).
                let v = unsafe { *input.add(at as usize) };
                if better(v, best, maximum) {
                    best = v;
                }
                at += stride;
                o += 1;
            }
        } else {
            let mut o = low;
            while o <= high {
                let v = match boundary_index(c + o, n, mode) {
                    // SAFETY: j is a coordinate of the line.
                    Some(j) => unsafe { *input.add((line + j as u64 * stride) as usize) },
                    None => outside,
                };
                if better(v, best, maximum) {
                    best = v;
                }
                o += 1;
            }
        }
        // SAFETY: the position is an element.
        unsafe { *output.add((item * geometry.spatial + p) as usize) = best };
    });
}

/// Values each lane of a staged pass over bytes loads before it stores
/// them to the staging area, so that as many loads are in flight (the
/// other types copy asynchronously, `Staged::ASYNC`).
const LINE_BATCH: usize = 8;

/// Shared-memory reads of a staged pass's window issued together.
const LINE_READS: usize = 4;

/// How a staged separable pass moves values from global to shared memory.
trait Staged: Grey {
    /// Whether [`Staged::stage`] copies asynchronously (`cp.async`: the
    /// pass commits and waits for the copies before it reads them).
    const ASYNC: bool;

    /// Copies `*src` to `*dst` (asynchronously when `ASYNC`).
    ///
    /// # Safety
    /// `src` is a readable value of global memory and `dst` a value of
    /// shared memory, both aligned; with `ASYNC`, `dst` is not read before
    /// the copies are waited for.
    unsafe fn stage(dst: *mut Self, src: *const Self);
}

impl Staged for f32 {
    const ASYNC: bool = true;

    #[inline(always)]
    unsafe fn stage(dst: *mut Self, src: *const Self) {
        // SAFETY: the caller's.
        unsafe { copy_async_small::<4>(dst.cast(), src.cast()) }
    }
}

impl Staged for f64 {
    const ASYNC: bool = true;

    #[inline(always)]
    unsafe fn stage(dst: *mut Self, src: *const Self) {
        // SAFETY: the caller's.
        unsafe { copy_async_small::<8>(dst.cast(), src.cast()) }
    }
}

impl Staged for u8 {
    const ASYNC: bool = false;

    #[inline(always)]
    unsafe fn stage(dst: *mut Self, src: *const Self) {
        // SAFETY: the caller's.
        unsafe { *dst = *src }
    }
}

/// The better of two values for a filter known at compile time: `b` when
/// it replaces `a` (strict, as [`better`]: NaN never replaces).
#[inline(always)]
fn pick<T: PartialOrd + Copy, const MAXIMUM: bool>(a: T, b: T) -> T {
    if better_than::<T, MAXIMUM>(b, a) {
        b
    } else {
        a
    }
}

/// The best of the `count` staged values from `at`, `step` slots apart,
/// against `best`, in order; `LINE_READS` reads issued together.
///
/// # Safety
/// `area + at + (count - 1) * step` lies in the warp's staged values.
#[inline(always)]
unsafe fn best_of<T: Grey + Copy, const MAXIMUM: bool>(area: *const T, at: u32, step: u32, count: u32, best: T) -> T {
    let mut best = best;
    let mut o = 0;
    while o < count {
        let mut values = [best; LINE_READS];
        let mut u = 0;
        while u < LINE_READS {
            if o + (u as u32) < count {
                // SAFETY: the caller's.
                values[u] = unsafe { *area.add((at + (o + u as u32) * step) as usize) };
            }
            u += 1;
        }
        let mut u = 0;
        while u < LINE_READS {
            best = pick::<T, MAXIMUM>(best, values[u]);
            u += 1;
        }
        o += LINE_READS as u32;
    }
    best
}

/// A staged unit's outputs along the last axis for windows of at least
/// [`ROW_RUN`] values: in rounds of `32 * ROW_RUN` outputs, each lane takes
/// a run of `ROW_RUN` consecutive ones ([`row_run`]: their windows' shared
/// values taken once). The round's results then replace the values they
/// were taken from in the area (no later round reads those) and the warp
/// writes them out together.
///
/// # Safety
/// The unit's `count + window - 1` values are staged in the warp's area;
/// `window >= ROW_RUN`; `row` is the unit's first output in the output
/// and `count` outputs follow it there.
#[inline(always)]
unsafe fn row_runs<T: Grey + Copy, const MAXIMUM: bool>(
    area: *mut T,
    lane: u32,
    count: u32,
    window: u32,
    output: *mut T,
    row: u64,
) {
    let identity = if MAXIMUM { T::SMALLEST } else { T::LARGEST };
    const RUN: usize = ROW_RUN as usize;
    let mut base = 0u32;
    while base < count {
        // This lane's run starts at output g.
        let g = base + lane * ROW_RUN;
        // SAFETY: (each read) value j of the run, j < (count - g).min(ROW_RUN)
        // + window - 1, is staged: g + j < count + window - 1.
        let value = |j: u32| unsafe { *area.add((g + j) as usize) };
        let results = row_run(window, count.saturating_sub(g), identity, value, pick::<T, MAXIMUM>);
        // Every lane's reads of the round end before any result lands.
        // SAFETY: every lane of the warp takes the same rounds.
        unsafe { sync_warp() };
        let mut i = 0;
        while i < RUN {
            if g + (i as u32) < count {
                // SAFETY: a staged slot; the rounds after this one read
                // only from base + 32 * ROW_RUN on.
                unsafe { *area.add(g as usize + i) = results[i] };
            }
            i += 1;
        }
        // SAFETY: as above.
        unsafe { sync_warp() };
        let end = count.min(base + 32 * ROW_RUN);
        let mut t = base + lane;
        while t < end {
            // SAFETY: slot t holds output t's result; row + t an output.
            unsafe { *output.add((row + t as u64) as usize) = *area.add(t as usize) };
            t += 32;
        }
        base += 32 * ROW_RUN;
    }
}

/// A staged unit's outputs from the warp's area (see [`grey_line_staged`]).
/// Along a strided axis each lane walks its line two outputs at a time,
/// the two windows' shared `window - 1` values taken once; along the last
/// axis runs of outputs share their windows ([`row_runs`]) or, for windows
/// shorter than a run, each output takes its window.
///
/// # Safety
/// The unit's `count + window - 1` values are staged; `line` is this
/// lane's line, `first + count` at most its extent. Along the last axis
/// every lane of the warp calls it (the runs synchronise the warp).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn line_outputs<T: Grey + Copy, const MAXIMUM: bool>(
    area: *mut T,
    rows: bool,
    lane: u32,
    count: u32,
    window: u32,
    output: *mut T,
    line: u64,
    first: u64,
    inner: u64,
) {
    let identity = if MAXIMUM { T::SMALLEST } else { T::LARGEST };
    if rows && window >= ROW_RUN {
        // SAFETY: the caller's; the window holds a run.
        unsafe { row_runs::<T, MAXIMUM>(area, lane, count, window, output, line + first) };
        return;
    }
    if rows {
        let mut t = lane;
        while t < count {
            // SAFETY: the window of output t is staged.
            let best = unsafe { best_of::<T, MAXIMUM>(area, t, 1, window, identity) };
            // SAFETY: first + t < n: an output of the line.
            unsafe { *output.add((line + first + t as u64) as usize) = best };
            t += 32;
        }
        return;
    }
    // SAFETY: this lane's column of the area.
    let column = unsafe { area.add(lane as usize) };
    // SAFETY: (each write) first + t < n: an output of the line.
    let out = |t: u32, v: T| unsafe { *output.add((line + (first + t as u64) * inner) as usize) = v };
    let mut t = 0;
    while t + 1 < count {
        // Outputs t and t + 1 share the values t + 1 to t + window - 1,
        // taken first (from the identity, so that NaN never replaces).
        // SAFETY: rows t to t + window of the column are staged.
        unsafe {
            let shared = best_of::<T, MAXIMUM>(column, (t + 1) * 32, 32, window - 1, identity);
            out(t, pick::<T, MAXIMUM>(shared, *column.add((t * 32) as usize)));
            out(t + 1, pick::<T, MAXIMUM>(shared, *column.add(((t + window) * 32) as usize)));
        }
        t += 2;
    }
    if t < count {
        // SAFETY: rows t to t + window - 1 of the column are staged.
        out(t, unsafe { best_of::<T, MAXIMUM>(column, t * 32, 32, window, identity) });
    }
}

/// One separable pass's staged body ([`LineStaging`]): each warp copies
/// the values its unit's outputs read into its own staging area (floats
/// asynchronously, every copy in flight at once; bytes eight loads at a
/// time), then takes each output's minimum (or maximum) over the window
/// from shared memory ([`line_outputs`]).
///
/// Along a strided axis lane `l` stages row `a` of its line at slot
/// `32a + l` and a window's values are 32 slots apart; along the last axis
/// the lanes stage the unit's values `a` at slot `a`, 32 apart, and a
/// window's values are adjacent.
///
/// # Safety
/// As the kernels' `# Safety` sections, with `chunk > 0`, the launch's
/// `LINE_WARPS` warps per block and `LINE_WARPS * LINE_WARP_BYTES` bytes
/// of dynamic shared memory, and the window fitting the staging area
/// (`LineStaging::fits`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn grey_line_staged<T: Staged>(
    geometry: &MorphGeometry,
    axis: u32,
    mode: u32,
    maximum: u32,
    chunk: u32,
    low: i64,
    high: i64,
    cval: f64,
    input: *const T,
    output: *mut T,
) {
    let staging = LineStaging::new(geometry, axis, chunk);
    let (n, inner, chunk) = (staging.extent, staging.inner, staging.chunk);
    let (chunks, tiles, units) = (staging.chunks(), staging.tiles(), staging.units());
    // The staging area's fit (the caller's) bounds the window and the
    // slots below 2^16.
    let window = (high - low + 1) as u32;
    let lane = thread_idx_x() % 32;
    let warp = thread_idx_x() / 32;
    let capacity = (LINE_WARP_BYTES as usize) / core::mem::size_of::<T>();
    // SAFETY: each warp's area lies in the launch's shared memory.
    let area = unsafe { dynamic_shared::<T>().add(warp as usize * capacity) };
    let outside = T::from_f64(cval);
    // A lane's values along the line: the first, the step between them,
    // and their slots (slot_mul * a + slot_add).
    let rows = inner == 1;
    let (first_at, at_step, slot_mul, slot_add) = if rows { (lane, 32u32, 1u32, 0u32) } else { (0, 1, 32, lane) };
    let mut unit = block_idx_x() as u64 * LINE_WARPS as u64 + warp as u64;
    let warps = grid_dim_x() as u64 * LINE_WARPS as u64;
    while unit < units {
        let tile = unit % tiles;
        let rest = unit / tiles;
        let first = (rest % chunks) * chunk;
        // This lane's line (its first value), and whether it has one.
        let line = (rest / chunks) * n * inner + tile * 32 + if rows { 0 } else { lane as u64 };
        let active = rows || tile * 32 + (lane as u64) < inner;
        let count = chunk.min(n - first) as u32;
        let along = count + window - 1;
        let start = first as i64 + low;
        // Every read of the unit inside the line: no boundary mapping.
        let interior = start >= 0 && start + along as i64 <= n as i64;
        if active && interior && T::ASYNC {
            // The hot path: addresses stepped, every copy in flight.
            let step = (at_step as u64 * inner) as usize;
            // Coordinate start + first_at (past the line when this lane
            // copies nothing: never read).
            let mut src = input.wrapping_add((line + (start as u64 + first_at as u64) * inner) as usize);
            let mut at = first_at;
            while at < along {
                // SAFETY: coordinate start + at lies on the line and its
                // slot in the area; read only after the wait below.
                unsafe {
                    T::stage(area.add((at * slot_mul + slot_add) as usize), src);
                    src = src.wrapping_add(step);
                }
                at += at_step;
            }
        } else if active && !T::ASYNC {
            let mut at = first_at;
            while at < along {
                let mut values = [outside; LINE_BATCH];
                let mut u = 0;
                while u < LINE_BATCH {
                    let a = at + u as u32 * at_step;
                    if a < along {
                        let j = start + a as i64;
                        let k = if interior { Some(j) } else { boundary_index(j, n as i64, mode) };
                        if let Some(k) = k {
                            // SAFETY: k is a coordinate of the line.
                            values[u] = unsafe { *input.add((line + k as u64 * inner) as usize) };
                        }
                    }
                    u += 1;
                }
                let mut u = 0;
                while u < LINE_BATCH {
                    let a = at + u as u32 * at_step;
                    if a < along {
                        // SAFETY: the slot of a < along fits the area.
                        unsafe { *area.add((a * slot_mul + slot_add) as usize) = values[u] };
                    }
                    u += 1;
                }
                at += LINE_BATCH as u32 * at_step;
            }
        } else if active {
            let mut at = first_at;
            while at < along {
                let j = start + at as i64;
                // SAFETY: the slot of at < along fits the area.
                let slot = unsafe { area.add((at * slot_mul + slot_add) as usize) };
                match boundary_index(j, n as i64, mode) {
                    // SAFETY: k is a coordinate of the line; the area is
                    // read only after the copies are waited for.
                    Some(k) => unsafe { T::stage(slot, input.add((line + k as u64 * inner) as usize)) },
                    // SAFETY: as above.
                    None => unsafe { *slot = outside },
                }
                at += at_step;
            }
        }
        if T::ASYNC {
            // SAFETY: waits for this lane's copies.
            unsafe {
                commit_copies();
                wait_copies::<0>();
            }
        }
        // SAFETY: every lane of the warp takes the same units.
        unsafe { sync_warp() };
        if active {
            // SAFETY: the unit's values are staged; the outputs lie on the line.
            unsafe {
                if maximum != 0 {
                    line_outputs::<T, true>(area, rows, lane, count, window, output, line, first, inner)
                } else {
                    line_outputs::<T, false>(area, rows, lane, count, window, output, line, first, inner)
                }
            }
        }
        // The next unit overwrites the area only after every lane's reads.
        // SAFETY: as above.
        unsafe { sync_warp() };
        unit += warps;
    }
}

macro_rules! grey_kernels {
    ($($t:ty: $filter:ident $filter_args:ident, $line:ident $line_args:ident;)*) => {$(
        kernel! {
            /// The grey-scale filter over one value type (float32, float64
            /// or, for flat elements only, bytes): the minimum (erosion) or
            /// maximum (dilation) over the active elements of the input,
            /// less or plus each element's weight unless `flat`.
            ///
            /// # Safety
            /// `input` and `output` hold `items * spatial` values and do
            /// not overlap; `offsets` holds `elements * rank` values whose
            /// extrema per axis are `geometry.low`/`high`, `flat_offsets`
            /// (and `weights` unless `flat`) `elements`; each flat offset
            /// is its per-axis offsets against `geometry.stride`.
            ///
            /// # Parameters
            /// See `GreyFilterF32Args` (the other types' structs differ in their pointers only).
            ///
            /// # Thread mapping
            /// A block per work unit (`MORPH_UNIT` consecutive positions
            /// of one item), grid-stride; a thread per position.
            pub unsafe extern "ptx-kernel" fn $filter(
                geometry: MorphGeometry,
                mode: u32,
                maximum: u32,
                flat: u32,
                reserved: u32,
                cval: f64,
                offsets: *const i64,
                flat_offsets: *const i64,
                weights: *const f64,
                input: *const $t,
                output: *mut $t,
            ) as $filter_args {
                let _ = reserved;
                // SAFETY: the caller's, as documented.
                unsafe {
                    grey_filter::<$t>(&geometry, mode, maximum, flat, cval, offsets, flat_offsets, weights, input, output)
                }
            }
        }

        kernel! {
            /// One separable pass over one value type (float32, float64 or
            /// bytes): the minimum or maximum over the offsets `low..=high`
            /// along `axis`, each position reading its window from global
            /// memory (`chunk` 0), or each warp staging its unit's values in
            /// shared memory first (`LineStaging`).
            ///
            /// # Safety
            /// `input` and `output` hold `items * spatial` values and do
            /// not overlap; `axis < rank`; `low <= high`. With `chunk` set,
            /// the launch gives `LINE_WARPS * 32` threads and `LINE_WARPS *
            /// LINE_WARP_BYTES` bytes of dynamic shared memory, and the
            /// window fits the staging area (`LineStaging::fits`).
            ///
            /// # Parameters
            /// See `GreyLineF32Args` (the other types' structs differ in their pointers only).
            ///
            /// # Thread mapping
            /// `chunk` 0: as the grey-scale filter, a thread per position.
            /// Else a warp per unit (grid-stride over the warps): along a
            /// strided axis a lane per line of the unit's 32, along the
            /// last axis the lanes take the unit's outputs 32 apart.
            pub unsafe extern "ptx-kernel" fn $line(
                geometry: MorphGeometry,
                axis: u32,
                mode: u32,
                maximum: u32,
                chunk: u32,
                low: i64,
                high: i64,
                cval: f64,
                input: *const $t,
                output: *mut $t,
            ) as $line_args {
                // SAFETY: the caller's, as documented.
                unsafe {
                    if chunk == 0 {
                        grey_line::<$t>(&geometry, axis, mode, maximum, low, high, cval, input, output)
                    } else {
                        grey_line_staged::<$t>(&geometry, axis, mode, maximum, chunk, low, high, cval, input, output)
                    }
                }
            }
        }
    )*};
}

grey_kernels! {
    f32: grey_filter_f32 GreyFilterF32Args, grey_line_f32 GreyLineF32Args;
    f64: grey_filter_f64 GreyFilterF64Args, grey_line_f64 GreyLineF64Args;
    u8: grey_filter_u8 GreyFilterU8Args, grey_line_u8 GreyLineU8Args;
}

kernel! {
    /// The binary filter: every (erosion) or any (dilation) active element
    /// reads a non-zero value, `border` outside the array; the input kept
    /// where `mask` is 0. A thread stops reading as soon as its result is
    /// decided (a 0 for erosion, a 1 for dilation).
    ///
    /// # Safety
    /// `input`, `output` and `mask` (unless null) hold `items * spatial`
    /// values; `input` and `output` do not overlap, or are one array (in
    /// place: a step repeated until stable, with an element holding its
    /// centre, so that reads that race with other threads' writes see a
    /// value between the step's input and the stable set); `offsets`,
    /// `flat_offsets` as for the grey-scale filter; `changed` is one word.
    ///
    /// # Parameters
    /// See [`BinaryFilterArgs`].
    ///
    /// # Thread mapping
    /// As the grey-scale filter: a thread per position.
    pub unsafe extern "ptx-kernel" fn binary_filter(
        geometry: MorphGeometry,
        dilation: u32,
        border: u32,
        offsets: *const i64,
        flat_offsets: *const i64,
        input: *const u8,
        mask: *const u8,
        output: *mut u8,
        changed: *mut u32,
    ) as BinaryFilterArgs {
        let dilation = dilation != 0;
        // SAFETY: offsets hold elements * rank values.
        let offset = |k: usize| unsafe { *offsets.add(k) };
        let mut any_change = false;
        for_each_position(&geometry, |item, p| {
            let base = item * geometry.spatial;
            let at = (base + p) as usize;
            // SAFETY: at is an element of every array.
            let current = unsafe { *input.add(at) } != 0;
            // SAFETY: as above (mask is read only when given).
            let result = if !mask.is_null() && unsafe { *mask.add(at) } == 0 {
                current
            } else {
                let coords = geometry.coordinates(p);
                let interior = geometry.interior(&coords);
                // Erosion looks for a 0, dilation for a 1: the first one
                // found decides.
                let mut found = false;
                let mut e = 0;
                while e < geometry.elements && !found {
                    // SAFETY: interior reads stay inside the item; boundary
                    // reads map every coordinate into it.
                    let v = unsafe {
                        if interior {
                            *input.add((at as i64 + *flat_offsets.add(e as usize)) as usize) != 0
                        } else {
                            match geometry.boundary_read(&coords, e, MODE_CONSTANT, offset) {
                                Some(q) => *input.add((base + q) as usize) != 0,
                                None => border != 0,
                            }
                        }
                    };
                    found = v == dilation;
                    e += 1;
                }
                if dilation {
                    found
                } else {
                    !found
                }
            };
            any_change |= result != current;
            // SAFETY: at is an element.
            unsafe { *output.add(at) = result as u8 };
        });
        if any_change {
            // SAFETY: changed is one word.
            unsafe { *changed = 1 };
        }
    }
}

/// The tile work unit `unit`: its item and the tile's first position
/// `(z, y, x)`.
#[inline(always)]
fn tile_unit(g: &TileGeometry, unit: u64) -> (u64, [i64; 3]) {
    let per_item = g.tiles[0] as u64 * g.tiles[1] as u64 * g.tiles[2] as u64;
    let item = unit / per_item;
    let t = (unit % per_item) as u32;
    let tx = t % g.tiles[2];
    let ty = (t / g.tiles[2]) % g.tiles[1];
    let tz = t / (g.tiles[2] * g.tiles[1]);
    (item, [(tz * g.tile_z) as i64, (ty * TILE_Y) as i64, (tx * TILE_X) as i64])
}

/// Loads the halo tile of the unit starting at `first` into `shared`:
/// `read(index)` for positions inside the array (their index in the item),
/// `outside` for those outside in constant mode, the others mapped by
/// `mode`. Thread `t` loads tile values `t`, `t + TILE_THREADS`, ….
/// (Measured on the H200 against a warp per halo row and against
/// division-free coordinate steps: both took more registers and were
/// slower.)
///
/// # Safety
/// `shared` holds `g.shared_len()` values; every thread of the block calls it.
#[inline(always)]
unsafe fn load_tile<T: Copy>(
    g: &TileGeometry,
    first: [i64; 3],
    mode: u32,
    outside: T,
    shared: *mut T,
    read: impl Fn(u64) -> T,
) {
    let len = g.shared_len();
    let extent = [g.extent[0] as i64, g.extent[1] as i64, g.extent[2] as i64];
    let mut h = thread_idx_x();
    while h < len {
        let hx = h % g.halo[2];
        let hy = (h / g.halo[2]) % g.halo[1];
        let hz = h / (g.halo[2] * g.halo[1]);
        let at = [
            first[0] + g.low[0] as i64 + hz as i64,
            first[1] + g.low[1] as i64 + hy as i64,
            first[2] + g.low[2] as i64 + hx as i64,
        ];
        let z = boundary_index(at[0], extent[0], mode);
        let y = boundary_index(at[1], extent[1], mode);
        let x = boundary_index(at[2], extent[2], mode);
        let v = match (z, y, x) {
            (Some(z), Some(y), Some(x)) => read(((z * extent[1] + y) * extent[2] + x) as u64),
            _ => outside,
        };
        // SAFETY: h < len.
        unsafe { *shared.add(h as usize) = v };
        h += TILE_THREADS;
    }
}

/// [`load_tile`] with each thread's coordinates advanced by a fixed step
/// with carries instead of divisions: the binary tiles' loader (faster
/// there on the H200; the grey-scale tiles were faster with
/// [`load_tile`], which keeps fewer registers live beside their
/// accumulators).
///
/// # Safety
/// As [`load_tile`].
#[inline(always)]
unsafe fn load_tile_stepped<T: Copy>(
    g: &TileGeometry,
    first: [i64; 3],
    mode: u32,
    outside: T,
    shared: *mut T,
    read: impl Fn(u64) -> T,
) {
    let extent = [g.extent[0] as i64, g.extent[1] as i64, g.extent[2] as i64];
    let (nx, ny) = (g.halo[2], g.halo[1]);
    let t = thread_idx_x();
    let (mut hx, mut hy, mut hz) = (t % nx, (t / nx) % ny, t / (nx * ny));
    let (dx, dy, dz) = (TILE_THREADS % nx, (TILE_THREADS / nx) % ny, TILE_THREADS / (nx * ny));
    let start = [first[0] + g.low[0] as i64, first[1] + g.low[1] as i64, first[2] + g.low[2] as i64];
    let len = g.shared_len();
    let mut h = t;
    while h < len {
        let at = [start[0] + hz as i64, start[1] + hy as i64, start[2] + hx as i64];
        let v = match (
            boundary_index(at[0], extent[0], mode),
            boundary_index(at[1], extent[1], mode),
            boundary_index(at[2], extent[2], mode),
        ) {
            (Some(z), Some(y), Some(x)) => read(((z * extent[1] + y) * extent[2] + x) as u64),
            _ => outside,
        };
        // SAFETY: h < len.
        unsafe { *shared.add(h as usize) = v };
        h += TILE_THREADS;
        hx += dx;
        if hx >= nx {
            hx -= nx;
            hy += 1;
        }
        hy += dy;
        if hy >= ny {
            hy -= ny;
            hz += 1;
        }
        hz += dz;
    }
}

/// The tiled grey-scale filter's body.
///
/// # Safety
/// As the kernels' `# Safety` sections.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn grey_tile<T: Grey>(
    g: &TileGeometry,
    mode: u32,
    maximum: u32,
    flat: u32,
    cval: f64,
    shared_offsets: *const i32,
    weights: *const f64,
    input: *const T,
    output: *mut T,
) {
    let maximum = maximum != 0;
    let shared = dynamic_shared::<T>();
    let spatial = g.extent[0] as u64 * g.extent[1] as u64 * g.extent[2] as u64;
    let (ly, lx) = ((thread_idx_x() / TILE_X) as i64, (thread_idx_x() % TILE_X) as i64);
    let row = g.halo[2] as usize * g.halo[1] as usize;
    let units = g.units();
    let mut unit = block_idx_x() as u64;
    while unit < units {
        let (item, first) = tile_unit(g, unit);
        let base = item * spatial;
        // SAFETY: the launch gives shared_len values; block-uniform call.
        unsafe {
            load_tile(g, first, mode, T::from_f64(cval), shared, |i| *input.add((base + i) as usize));
            sync_threads();
        }
        let own = (ly as usize) * g.halo[2] as usize + lx as usize;
        if flat != 0 {
            let mut best = [if maximum { T::SMALLEST } else { T::LARGEST }; TILE_MAX_Z as usize];
            let mut e = 0;
            while e < g.elements {
                // SAFETY: shared_offsets holds `elements` values, each
                // inside the tile for every position of it.
                let o = own + unsafe { *shared_offsets.add(e as usize) } as usize;
                let mut k = 0;
                while k < TILE_MAX_Z as usize {
                    if (k as u32) < g.tile_z {
                        // SAFETY: k < tile_z, so the read is inside the tile.
                        let v = unsafe { *shared.add(o + k * row) };
                        if better(v, best[k], maximum) {
                            best[k] = v;
                        }
                    }
                    k += 1;
                }
                e += 1;
            }
            store_tile(g, first, base, ly, lx, output, |k| best[k]);
        } else {
            let mut best = [if maximum { f64::NEG_INFINITY } else { f64::INFINITY }; TILE_MAX_Z as usize];
            let mut e = 0;
            while e < g.elements {
                // SAFETY: as above; weights hold `elements` values.
                let (o, w) = unsafe { (own + *shared_offsets.add(e as usize) as usize, *weights.add(e as usize)) };
                let mut k = 0;
                while k < TILE_MAX_Z as usize {
                    if (k as u32) < g.tile_z {
                        // SAFETY: as above.
                        let v = unsafe { *shared.add(o + k * row) }.to_f64();
                        let v = if maximum { v + w } else { v - w };
                        if better(v, best[k], maximum) {
                            best[k] = v;
                        }
                    }
                    k += 1;
                }
                e += 1;
            }
            store_tile(g, first, base, ly, lx, output, |k| T::from_f64(best[k]));
        }
        // SAFETY: block-uniform; the tile is reused by the next unit.
        unsafe { sync_threads() };
        unit += grid_dim_x() as u64;
    }
}

/// Writes this thread's results `value(k)` of the tile at `first`.
#[inline(always)]
fn store_tile<T>(
    g: &TileGeometry,
    first: [i64; 3],
    base: u64,
    ly: i64,
    lx: i64,
    output: *mut T,
    value: impl Fn(usize) -> T,
) {
    let (y, x) = (first[1] + ly, first[2] + lx);
    if y >= g.extent[1] as i64 || x >= g.extent[2] as i64 {
        return;
    }
    let mut k = 0;
    while k < TILE_MAX_Z as usize {
        let z = first[0] + k as i64;
        if (k as u32) < g.tile_z && z < g.extent[0] as i64 {
            let at = base + ((z as u64 * g.extent[1] as u64 + y as u64) * g.extent[2] as u64 + x as u64);
            // SAFETY: (z, y, x) is a position of the item.
            unsafe { *output.add(at as usize) = value(k) };
        }
        k += 1;
    }
}

macro_rules! tile_kernels {
    ($($t:ty: $tile:ident $tile_args:ident;)*) => {$(
        kernel! {
            /// The tiled grey-scale filter over one value type (float32,
            /// float64 or, for flat elements only, bytes) for rank 1 to 3: the
            /// block loads a tile and its halo (boundary modes applied)
            /// into shared memory once; each thread then takes up to
            /// `TILE_MAX_Z` positions along z from it.
            ///
            /// # Safety
            /// `input` and `output` hold `items * z * y * x` values and do
            /// not overlap; `shared_offsets` (and `weights` unless `flat`)
            /// hold `elements` values, each offset that of an element within
            /// the halo (`TileGeometry::shared_offset` of offsets within
            /// `low..=high`); the launch gives `TILE_THREADS` threads and
            /// `shared_len()` values of dynamic shared memory.
            ///
            /// # Parameters
            /// See `GreyTileF32Args` (the other types' structs differ in their pointers only).
            ///
            /// # Thread mapping
            /// A block per tile (grid-stride over the tiles of every item);
            /// thread `(y, x)` of the `TILE_Y × TILE_X` plane takes the
            /// tile's positions `(0..tile_z, y, x)`.
            pub unsafe extern "ptx-kernel" fn $tile(
                geometry: TileGeometry,
                mode: u32,
                maximum: u32,
                flat: u32,
                reserved: u32,
                cval: f64,
                shared_offsets: *const i32,
                weights: *const f64,
                input: *const $t,
                output: *mut $t,
            ) as $tile_args {
                let _ = reserved;
                // SAFETY: the caller's, as documented. (The comparison as a
                // constant per instance took more registers and was slower.)
                unsafe { grey_tile::<$t>(&geometry, mode, maximum, flat, cval, shared_offsets, weights, input, output) }
            }
        }
    )*};
}

tile_kernels! {
    f32: grey_tile_f32 GreyTileF32Args;
    f64: grey_tile_f64 GreyTileF64Args;
    u8: grey_tile_u8 GreyTileU8Args;
}

/// Runs `$body` for `$s` = each of a thread's `BOX_SLOTS` load slots,
/// written out so that the per-slot arrays stay in registers.
macro_rules! for_each_slot {
    ($s:ident => $body:block) => {
        unrolled!($s in [0 1 2 3 4 5 6 7] => $body)
    };
}
const _: () = assert!(BOX_SLOTS == 8, "for_each_slot! writes out 8 slots");

/// A slot's in-plane offset when it lies outside the array (constant mode).
const BOX_OUTSIDE: u32 = u32::MAX;

/// The box filter's body: the minimum (or maximum) over a flat box, taken
/// as the minimum over z of the minima over y of the minima over x. The
/// comparisons are strict and start from the identity, so NaN is never
/// taken and the order in which the box's values are met does not change
/// the result: it equals the other paths' value for value.
///
/// # Safety
/// As the kernels' `# Safety` sections.
#[inline(always)]
unsafe fn grey_box<T: Grey, const PLUS: bool>(
    g: &BoxGeometry,
    mode: u32,
    maximum: u32,
    cval: f64,
    input: *const T,
    output: *mut T,
) {
    // Both instances in the one kernel, the comparison a constant in each:
    // the kernel is bound by its instructions (ncu: 82 % of the SMs'
    // issue), and a runtime choice compared twice per value.
    // SAFETY: the caller's.
    unsafe {
        if maximum != 0 {
            grey_box_as::<T, PLUS, true>(g, mode, cval, input, output)
        } else {
            grey_box_as::<T, PLUS, false>(g, mode, cval, input, output)
        }
    }
}

/// [`grey_box`] for a minimum or (`MAXIMUM`) maximum known at compile time.
///
/// # Safety
/// As `grey_box`'s.
#[inline(always)]
unsafe fn grey_box_as<T: Grey, const PLUS: bool, const MAXIMUM: bool>(
    g: &BoxGeometry,
    mode: u32,
    cval: f64,
    input: *const T,
    output: *mut T,
) {
    let maximum = MAXIMUM;
    let identity = if maximum { T::SMALLEST } else { T::LARGEST };
    let outside = T::from_f64(cval);
    let (wz, wy, wx) = (g.window(0), g.window(1), g.window(2));
    let (halo_y, halo_x) = (BOX_Y + wy - 1, BOX_X + wx - 1);
    let plane_len = g.plane_len();
    let shared = dynamic_shared::<T>();
    // SAFETY: the launch gives shared_len() values: the plane, its rows'
    // minima along x, then the ring.
    let (halo, rows, ring) =
        unsafe { (shared, shared.add(plane_len as usize), shared.add((plane_len + halo_y * BOX_X) as usize)) };
    let t = thread_idx_x();
    let (ty, tx) = (t / 32, t % 32);
    let extent = [g.extent[0] as i64, g.extent[1] as i64, g.extent[2] as i64];
    let plane = (extent[1] * extent[2]) as u64;
    let spatial = plane * extent[0] as u64;
    let per_item = g.tiles[0] as u64 * g.tiles[1] as u64 * g.tiles[2] as u64;
    let units = g.units();
    let mut unit = block_idx_x() as u64;
    while unit < units {
        let item = unit / per_item;
        let u = (unit % per_item) as u32;
        let (ux, uy, uz) = (u % g.tiles[2], (u / g.tiles[2]) % g.tiles[1], u / (g.tiles[2] * g.tiles[1]));
        let (z0, y0, x0) = ((uz * g.chunk_z) as i64, (uy * BOX_Y) as i64, (ux * BOX_X) as i64);
        let base = item * spatial;
        // The in-plane offset of each value this thread loads (the same in
        // every plane of the unit), boundary modes applied along y and x.
        let mut offset = [BOX_OUTSIDE; BOX_SLOTS as usize];
        for_each_slot!(s => {
            let h = t + s as u32 * BOX_THREADS;
            if h < plane_len {
                let y = boundary_index(y0 + g.low[1] as i64 + (h / halo_x) as i64, extent[1], mode);
                let x = boundary_index(x0 + g.low[2] as i64 + (h % halo_x) as i64, extent[2], mode);
                if let (Some(y), Some(x)) = (y, x) {
                    // The host keeps a plane's positions below u32::MAX.
                    offset[s] = (y * extent[2] + x) as u32;
                }
            }
        });
        let first = z0 + g.low[0] as i64;
        let outputs = (extent[0] - z0).min(g.chunk_z as i64);
        let planes = outputs + wz as i64 - 1;
        // The values of the next plane, loaded a plane ahead so that the
        // loads are in flight while the block works on the current one.
        let mut next = [outside; BOX_SLOTS as usize];
        macro_rules! load_plane {
            ($j:expr) => {{
                let z = boundary_index($j, extent[0], mode);
                // SAFETY: z is a plane of the item (when it is Some).
                let from = z.map(|z| unsafe { input.add((base + z as u64 * plane) as usize) });
                for_each_slot!(s => {
                    if t + s as u32 * BOX_THREADS < plane_len {
                        next[s] = match from {
                            // SAFETY: offset is a position of the plane.
                            Some(from) if offset[s] != BOX_OUTSIDE => unsafe { *from.add(offset[s] as usize) },
                            _ => outside,
                        };
                    }
                });
            }};
        }
        load_plane!(first);
        let mut p = 0i64;
        while p < planes {
            // SAFETY: block-uniform (p and planes are); the barrier keeps the
            // last plane's readers ahead of this plane's writers.
            unsafe { sync_threads() };
            for_each_slot!(s => {
                let h = t + s as u32 * BOX_THREADS;
                if h < plane_len {
                    // SAFETY: h < plane_len.
                    unsafe { *halo.add(h as usize) = next[s] };
                }
            });
            if p + 1 < planes {
                load_plane!(first + p + 1);
            }
            // SAFETY: block-uniform; the plane is stored.
            unsafe { sync_threads() };
            if PLUS {
                plus_plane::<T, MAXIMUM>(g, p, wz, identity, halo, ring, (ty, tx), (z0, y0, x0), extent, base, output);
                p += 1;
                continue;
            }
            // Minima along x: BOX_X columns of each of halo_y rows.
            let column = t % BOX_X;
            let mut r = t / BOX_X;
            while r < halo_y {
                let from = (r * halo_x + column) as usize;
                let mut best = identity;
                let mut i = 0;
                while i < wx {
                    // SAFETY: column + i < halo_x.
                    let v = unsafe { *halo.add(from + i as usize) };
                    if better_than::<T, MAXIMUM>(v, best) {
                        best = v;
                    }
                    i += 1;
                }
                // SAFETY: r < halo_y.
                unsafe { *rows.add((r * BOX_X + column) as usize) = best };
                r += BOX_THREADS / BOX_X;
            }
            // SAFETY: block-uniform; the rows are stored.
            unsafe { sync_threads() };
            // Minima along y into this plane's slot of the ring, then along
            // z once the ring holds a whole window. Each thread reads and
            // writes only its own two columns of the ring.
            let slot = (p % wz as i64) as u32;
            let mut half = 0;
            while half < 2 {
                let c = tx + half * 32;
                let mut best = identity;
                let mut k = 0;
                while k < wy {
                    // SAFETY: ty + k < halo_y.
                    let v = unsafe { *rows.add(((ty + k) * BOX_X + c) as usize) };
                    if better_than::<T, MAXIMUM>(v, best) {
                        best = v;
                    }
                    k += 1;
                }
                // SAFETY: slot < wz.
                unsafe { *ring.add(((slot * BOX_Y + ty) * BOX_X + c) as usize) = best };
                let (y, x) = (y0 + ty as i64, x0 + c as i64);
                if p >= wz as i64 - 1 && y < extent[1] && x < extent[2] {
                    let z = z0 + p - (wz as i64 - 1);
                    let mut out = identity;
                    let mut k = 0;
                    while k < wz {
                        // SAFETY: k < wz.
                        let v = unsafe { *ring.add(((k * BOX_Y + ty) * BOX_X + c) as usize) };
                        if better_than::<T, MAXIMUM>(v, out) {
                            out = v;
                        }
                        k += 1;
                    }
                    let at = base + z as u64 * plane + (y * extent[2] + x) as u64;
                    // SAFETY: (z, y, x) is a position of the item.
                    unsafe { *output.add(at as usize) = out };
                }
                half += 1;
            }
            p += 1;
        }
        unit += grid_dim_x() as u64;
    }
}

/// One plane of a plus in `grey_box`: for each of the thread's two
/// columns, the minimum (or maximum) over the x and y segments through the
/// centre in this plane and the centre's value itself, into the plane's
/// slots of the two rings; once the rings hold a window, the output at the
/// plane `wz - 1` back: the first ring's value of its centre plane and the
/// second ring's values of every plane (the z segment). Each thread reads
/// and writes only its own columns of the rings.
///
/// # Safety
/// As `grey_box`'s: `halo` holds the plane, `ring` the two rings of `wz`
/// planes of `BOX_Y × BOX_X` values; the centre lies in the window.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn plus_plane<T: Grey, const MAXIMUM: bool>(
    g: &BoxGeometry,
    p: i64,
    wz: u32,
    identity: T,
    halo: *mut T,
    ring: *mut T,
    (ty, tx): (u32, u32),
    (z0, y0, x0): (i64, i64, i64),
    extent: [i64; 3],
    base: u64,
    output: *mut T,
) {
    let (wy, wx) = (g.window(1), g.window(2));
    let halo_x = BOX_X + wx - 1;
    // The centre's row and column in the halo, from the thread's own.
    let (cy, cx) = ((g.centre[1] - g.low[1]) as u32, (g.centre[2] - g.low[2]) as u32);
    let centres = ring.wrapping_add((wz * BOX_Y * BOX_X) as usize);
    let slot = (p % wz as i64) as u32;
    let mut half = 0;
    while half < 2 {
        let c = tx + half * 32;
        let mut best = identity;
        let mut k = 0;
        while k < wx {
            // SAFETY: row ty + cy < BOX_Y + wy - 1, column c + k < halo_x.
            let v = unsafe { *halo.add(((ty + cy) * halo_x + c + k) as usize) };
            if better_than::<T, MAXIMUM>(v, best) {
                best = v;
            }
            k += 1;
        }
        let mut k = 0;
        while k < wy {
            // SAFETY: row ty + k < BOX_Y + wy - 1, column c + cx < halo_x.
            let v = unsafe { *halo.add(((ty + k) * halo_x + c + cx) as usize) };
            if better_than::<T, MAXIMUM>(v, best) {
                best = v;
            }
            k += 1;
        }
        let at = ((slot * BOX_Y + ty) * BOX_X + c) as usize;
        // SAFETY: slot < wz; the centre's position is in the halo.
        unsafe {
            *ring.add(at) = best;
            *centres.add(at) = *halo.add(((ty + cy) * halo_x + c + cx) as usize);
        }
        let (y, x) = (y0 + ty as i64, x0 + c as i64);
        if p >= wz as i64 - 1 && y < extent[1] && x < extent[2] {
            // The output's planes are the last wz loaded; its centre plane
            // is the (centre - low)-th of them.
            let first = p - (wz as i64 - 1);
            let centre_slot = ((first + (g.centre[0] - g.low[0]) as i64) % wz as i64) as u32;
            // SAFETY: centre_slot < wz.
            let mut out = unsafe { *ring.add(((centre_slot * BOX_Y + ty) * BOX_X + c) as usize) };
            let mut k = 0;
            while k < wz {
                // SAFETY: k < wz.
                let v = unsafe { *centres.add(((k * BOX_Y + ty) * BOX_X + c) as usize) };
                if better_than::<T, MAXIMUM>(v, out) {
                    out = v;
                }
                k += 1;
            }
            let z = z0 + first;
            let at = base + z as u64 * (extent[1] * extent[2]) as u64 + (y * extent[2] + x) as u64;
            // SAFETY: (z, y, x) is a position of the item.
            unsafe { *output.add(at as usize) = out };
        }
        half += 1;
    }
}

macro_rules! box_kernels {
    ($($t:ty: $name:ident $args:ident, $plus:literal;)*) => {$(
        kernel! {
            /// The grey-scale filter over one value type (float32, float64
            /// or bytes) for a flat box (the
            /// `grey_box_*` kernels) or a flat plus (`grey_plus_*`: the
            /// geometry's `plus` set) and rank 1 to 3: each block streams
            /// the planes of its columns' window along z through shared
            /// memory, taking the minimum (or maximum) along x, then y,
            /// then z over a ring of the last planes (a plus: over its x
            /// and y segments in each plane, then its centre plane's and
            /// the z segment's values from two rings); every input value is
            /// loaded about once per block.
            ///
            /// # Safety
            /// `input` and `output` hold `items * z * y * x` values and do
            /// not overlap; the geometry is consistent (`tiles` as
            /// documented, `low <= high`, `plane_len() <= BOX_SLOTS *
            /// BOX_THREADS`, a plus's centre in the window); the launch
            /// gives `BOX_THREADS` threads and `shared_len()` values of
            /// dynamic shared memory.
            ///
            /// # Parameters
            /// See `GreyBoxF32Args` (the other types' structs differ in their pointers only).
            ///
            /// # Thread mapping
            /// A block per `chunk_z × BOX_Y × BOX_X` unit (grid-stride over
            /// the units of every item); thread `(y, x)` of the `BOX_Y × 32`
            /// block takes the unit's columns `(y, x)` and `(y, x + 32)`.
            pub unsafe extern "ptx-kernel" fn $name(
                geometry: BoxGeometry,
                mode: u32,
                maximum: u32,
                cval: f64,
                input: *const $t,
                output: *mut $t,
            ) as $args {
                // SAFETY: the caller's, as documented.
                unsafe { grey_box::<$t, $plus>(&geometry, mode, maximum, cval, input, output) }
            }
        }
    )*};
}

box_kernels! {
    f32: grey_box_f32 GreyBoxF32Args, false;
    f64: grey_box_f64 GreyBoxF64Args, false;
    f32: grey_plus_f32 GreyPlusF32Args, true;
    f64: grey_plus_f64 GreyPlusF64Args, true;
    u8: grey_box_u8 GreyBoxU8Args, false;
    u8: grey_plus_u8 GreyPlusU8Args, true;
}

/// Values that a warp shuffle moves between lanes.
trait Lane: Copy {
    /// The value that lane `src` holds.
    ///
    /// # Safety
    /// All 32 lanes of the warp call it together.
    unsafe fn from_lane(self, src: u32) -> Self;
}

impl Lane for f32 {
    #[inline(always)]
    unsafe fn from_lane(self, src: u32) -> Self {
        // SAFETY: the caller's: every lane calls.
        f32::from_bits(unsafe { shuffle_u32(self.to_bits(), src) })
    }
}

impl Lane for u8 {
    #[inline(always)]
    unsafe fn from_lane(self, src: u32) -> Self {
        // SAFETY: the caller's: every lane calls.
        unsafe { shuffle_u32(self as u32, src) as u8 }
    }
}

impl Lane for f64 {
    #[inline(always)]
    unsafe fn from_lane(self, src: u32) -> Self {
        let bits = self.to_bits();
        // SAFETY: the caller's: every lane calls.
        let (low, high) = unsafe { (shuffle_u32(bits as u32, src), shuffle_u32((bits >> 32) as u32, src)) };
        f64::from_bits(low as u64 | (high as u64) << 32)
    }
}

/// The most rows a warp loads per plane (`rows + wy - 1`), for the arrays
/// that hold them.
const WARP_LOAD_ROWS: usize = 10;
/// The most output rows per warp.
const WARP_MAX_ROWS: usize = 8;
/// The most earlier planes a warp keeps (`wz - 1`).
const WARP_MAX_HISTORY: usize = 2;
const _: () = assert!(
    WARP_ROWS_F32 as usize <= WARP_MAX_ROWS
        && WARP_ROWS_FIXED_F32 as usize <= WARP_MAX_ROWS
        && WARP_ROWS_FIXED_PLUS_F32 as usize <= WARP_MAX_ROWS
        && WARP_ROWS_F64 as usize <= WARP_MAX_ROWS
        && WARP_MAX_ROWS + WARP_WINDOW as usize - 1 <= WARP_LOAD_ROWS
        && WARP_WINDOW as usize - 1 <= WARP_MAX_HISTORY,
    "the warp kernels' register arrays and unrolled lists hold their windows"
);

/// Whether `candidate` replaces `best` for a filter known at compile time
/// (strict, as [`better`]).
#[inline(always)]
fn better_than<T: PartialOrd, const MAXIMUM: bool>(candidate: T, best: T) -> bool {
    if MAXIMUM {
        candidate > best
    } else {
        candidate < best
    }
}

/// The warp kernels' body: the minimum (or, with `MAXIMUM`, maximum) over a
/// flat box (or, with `PLUS`, a flat plus: the x segment through the centre
/// row and the y segment through the centre column, both in the centre
/// plane, and the z segment through the centre) of at most `WARP_WINDOW`
/// along every axis, with `ROWS` output
/// rows per warp, all in registers. As in `grey_box`, the comparisons are
/// strict and start from the identity, so NaN is never taken and the
/// result equals the other paths' value for value.
///
/// Each warp takes `outputs_x()` columns, of `ROWS` rows and `chunk_z`
/// planes: with `PAST` (the geometry's `past`) every lane's, else all but
/// the last `wx - 1` lanes'. For each plane of its window along z, a lane
/// loads its column's `ROWS + wy - 1` rows (the next plane's loads issued
/// before this plane's work), and with `PAST` the first `wx - 1` lanes
/// also the column `WARP_X` to their right, which the last lanes' windows
/// reach (this plane's only: prefetched, those values' registers cost more
/// than they saved); the minimum along x comes from the lanes to its right
/// by shuffles (lane `l` sends, for the shift `i`, its past-the-warp value
/// when `l < i`, so that one shuffle serves every lane), along y from its own registers, and
/// along z from the last `wz - 1` planes' results, kept in registers.
/// With `FIXED` above 0, the windows are not read from the geometry: 3
/// along y and x and `FIXED` along z, constants to the compiler.
///
/// # Safety
/// As the kernels' `# Safety` sections; `ROWS <= WARP_MAX_ROWS`; `FIXED`
/// is 0, or the geometry is `fixed()` with `FIXED` its window along z.
#[inline(always)]
unsafe fn grey_warp<
    T: Grey + Lane,
    const ROWS: usize,
    const MAXIMUM: bool,
    const PLUS: bool,
    const PAST: bool,
    const FIXED: usize,
>(
    g: &WarpGeometry,
    mode: u32,
    cval: f64,
    input: *const T,
    output: *mut T,
) {
    let identity = if MAXIMUM { T::SMALLEST } else { T::LARGEST };
    let outside = T::from_f64(cval);
    // With `FIXED` set (`WARP_WINDOW` along y and x and `FIXED` along z, as
    // scipy's `size=3` and its cross in 3-D and in 2-D), the windows are
    // constants: the conditions on them, and the branches around the
    // shuffles they guard, fold away.
    let (wz, wy, wx) = if FIXED > 0 {
        (FIXED, WARP_WINDOW as usize, WARP_WINDOW as usize)
    } else {
        (g.window(0) as usize, g.window(1) as usize, g.window(2) as usize)
    };
    let lane = thread_idx_x() % 32;
    let warps = (WARP_THREADS / 32) as u64;
    let extent = [g.extent[0] as i64, g.extent[1] as i64, g.extent[2] as i64];
    let plane = (extent[1] * extent[2]) as u64;
    let spatial = plane * extent[0] as u64;
    let per_item = g.tiles[0] as u64 * g.tiles[1] as u64 * g.tiles[2] as u64;
    let units = g.units();
    let columns = g.outputs_x() as i64;
    // A plus's centre in the window: its plane, row and column.
    let (cz, cy, cx) = if PLUS {
        ((g.centre[0] - g.low[0]) as usize, (g.centre[1] - g.low[1]) as usize, (g.centre[2] - g.low[2]) as u32)
    } else {
        (0, 0, 0)
    };

    // Warp-uniform: every lane of a warp takes the same units, so all 32
    // take part in every shuffle.
    let mut unit = block_idx_x() as u64 * warps + (thread_idx_x() / 32) as u64;
    while unit < units {
        let item = unit / per_item;
        let u = unit % per_item;
        let (tx, ty) = (g.tiles[2] as u64, g.tiles[1] as u64);
        let (ux, uy, uz) = (u % tx, (u / tx) % ty, u / (tx * ty));
        let (z0, y0, x0) = ((uz * g.chunk_z as u64) as i64, (uy * ROWS as u64) as i64, ux as i64 * columns);
        let base = item * spatial;
        // The lane's column and the rows' offsets in a plane, boundary
        // modes applied: all below u32::MAX (the host keeps a plane's
        // positions so), which marks a position outside the array.
        let in_plane = |j: i64, n: i64, scale: i64| match boundary_index(j, n, mode) {
            Some(j) => (j * scale) as u32,
            None => BOX_OUTSIDE,
        };
        let column = in_plane(x0 + g.low[2] as i64 + lane as i64, extent[2], 1);
        // The column past the warp's that this lane loads (the first wx - 1
        // lanes), or BOX_OUTSIDE.
        let past = if PAST && (lane as usize) < wx - 1 {
            in_plane(x0 + g.low[2] as i64 + (WARP_X + lane) as i64, extent[2], 1)
        } else {
            BOX_OUTSIDE
        };
        let loaded = ROWS + wy - 1;
        // A loaded row `k` serves the output rows `k - wy + 1 ..= k`: one
        // past the array's last row (a plane's last tile) serves none that
        // is written, and with a window along z is not read (its values,
        // `outside`, reach only output rows that are not written). With one
        // plane per window (2-D), the test cost more than the loads it saved
        // (8192² 6 % slower, `docs/BENCHMARKS.md`).
        let trim = FIXED != 1 && wz > 1;
        let mut row = [BOX_OUTSIDE; WARP_LOAD_ROWS];
        unrolled!(k in [0 1 2 3 4 5 6 7 8 9] => {
            let needed = !trim || y0 + (k as i64 + 1 - wy as i64).max(0) < extent[1];
            if k < ROWS + WARP_WINDOW as usize - 1 && k < loaded && needed {
                row[k] = in_plane(y0 + g.low[1] as i64 + k as i64, extent[1], extent[2]);
            }
        });
        let outputs = (extent[0] - z0).min(g.chunk_z as i64);
        let planes = outputs + wz as i64 - 1;
        // One slot more than kept, so that the unrolled shift's last index
        // (never taken) stays in bounds.
        let mut history = [[identity; WARP_MAX_ROWS]; WARP_MAX_HISTORY + 1];
        // A plus's centre values of the same planes.
        let mut centres = [[identity; WARP_MAX_ROWS]; WARP_MAX_HISTORY + 1];
        // The plane `j` of the window's rows at `column`, loaded without
        // branches: a position outside the array reads the plane's first
        // value (or the input's, for a plane outside it) and takes
        // `outside` instead. (Positions computed here for each plane took
        // fewer registers, and less time, than positions kept from the
        // unit's start.)
        // The start of the window's plane `j` (boundary modes applied), or
        // none outside the array.
        let plane_at = |j: i64| {
            boundary_index(z0 + g.low[0] as i64 + j, extent[0], mode)
                // SAFETY: z is a plane of the item.
                .map(|z| unsafe { input.add((base + z as u64 * plane) as usize) })
        };
        let load = |from: Option<*const T>, column: u32| {
            let plane_start = from.unwrap_or(input);
            let column_in = from.is_some() && column != BOX_OUTSIDE;
            let mut values = [outside; WARP_LOAD_ROWS];
            unrolled!(k in [0 1 2 3 4 5 6 7 8 9] => {
                if k < ROWS + WARP_WINDOW as usize - 1 && k < loaded {
                    let inside = column_in && row[k] != BOX_OUTSIDE;
                    let at = if inside { row[k] + column } else { 0 };
                    // SAFETY: at is a position of the plane (boundary modes
                    // applied), or 0.
                    let value = unsafe { *plane_start.add(at as usize) };
                    values[k] = if inside { value } else { outside };
                }
            });
            values
        };
        let mut next_plane = plane_at(0);
        let mut next = load(next_plane, column);
        let mut p = 0i64;
        while p < planes {
            // The next plane's loads are issued before this plane's shuffles
            // (inline assembly, which loads do not cross), so that they are
            // in flight while the warp works; the columns past the warp's
            // are loaded for this plane only, from its start found with the
            // plane's other loads.
            let (values, this_plane) = (next, next_plane);
            if p + 1 < planes {
                next_plane = plane_at(p + 1);
                next = load(next_plane, column);
            }
            let mut beyond = [outside; WARP_LOAD_ROWS];
            if PAST && past != BOX_OUTSIDE {
                beyond = load(this_plane, past);
            }
            // Each loaded row's minimum along x over the lane's window: the
            // lanes to its right (the last lanes' results are not stored).
            let mut along_x = [identity; WARP_LOAD_ROWS];
            unrolled!(k in [0 1 2 3 4 5 6 7 8 9] => {
                // Warp-uniform conditions: every lane shuffles or none.
                if k < ROWS + WARP_WINDOW as usize - 1 && k < loaded {
                    let value = values[k];
                    let mut best = identity;
                    if better_than::<T, MAXIMUM>(value, best) {
                        best = value;
                    }
                    unrolled!(i in [1 2] => {
                        if i < wx {
                            // Lane l receives lane (l + i) mod 32's value:
                            // its column l + i, or for l + i >= 32 the
                            // column past the warp that lane l + i - 32 < i
                            // loaded.
                            let (sent, from) = if PAST {
                                (if (lane as usize) < i { beyond[k] } else { value }, (lane + i as u32) % 32)
                            } else {
                                (value, (lane + i as u32).min(31))
                            };
                            // SAFETY: every lane of the warp is here (the
                            // conditions are warp-uniform).
                            let v = unsafe { sent.from_lane(from) };
                            if better_than::<T, MAXIMUM>(v, best) {
                                best = v;
                            }
                        }
                    });
                    along_x[k] = best;
                }
            });
            // Each output row's minimum over its wy rows (a box), or over
            // the centre column's wy rows and the centre row's x segment (a
            // plus), with a plus's centre value of each row.
            let mut planar = [identity; WARP_MAX_ROWS];
            let mut centre = [identity; WARP_MAX_ROWS];
            if PLUS {
                let mut centre_column = [identity; WARP_LOAD_ROWS];
                unrolled!(k in [0 1 2 3 4 5 6 7 8 9] => {
                    if k < ROWS + WARP_WINDOW as usize - 1 && k < loaded {
                        let (sent, from) = if PAST {
                            (if lane < cx { beyond[k] } else { values[k] }, (lane + cx) % 32)
                        } else {
                            (values[k], (lane + cx).min(31))
                        };
                        // SAFETY: every lane of the warp is here (the
                        // conditions are warp-uniform).
                        centre_column[k] = unsafe { sent.from_lane(from) };
                    }
                });
                unrolled!(r in [0 1 2 3 4 5 6 7] => {
                    if r < ROWS {
                        unrolled!(k in [0 1 2] => {
                            if k < wy && better_than::<T, MAXIMUM>(centre_column[r + k], planar[r]) {
                                planar[r] = centre_column[r + k];
                            }
                            if k == cy {
                                if better_than::<T, MAXIMUM>(along_x[r + k], planar[r]) {
                                    planar[r] = along_x[r + k];
                                }
                                centre[r] = centre_column[r + k];
                            }
                        });
                    }
                });
            } else {
                unrolled!(r in [0 1 2 3 4 5 6 7] => {
                    if r < ROWS {
                        unrolled!(k in [0 1 2] => {
                            if k < wy && better_than::<T, MAXIMUM>(along_x[r + k], planar[r]) {
                                planar[r] = along_x[r + k];
                            }
                        });
                    }
                });
            }
            let x = x0 + lane as i64;
            if p >= wz as i64 - 1 && (lane as i64) < columns && x < extent[2] {
                let z = z0 + p - (wz as i64 - 1);
                // SAFETY: z is a plane of the item.
                let to = unsafe { output.add((base + z as u64 * plane) as usize) };
                let first = (y0 * extent[2] + x) as u32;
                unrolled!(r in [0 1 2 3 4 5 6 7] => {
                    if r < ROWS {
                        let mut out = planar[r];
                        if PLUS {
                            // The centre plane's minimum (this plane's
                            // when the centre is the window's last), then
                            // the window's centre values (the z segment).
                            unrolled!(j in [0 1] => {
                                if j == cz && j + 1 < wz {
                                    out = history[j][r];
                                }
                            });
                            if better_than::<T, MAXIMUM>(centre[r], out) {
                                out = centre[r];
                            }
                            unrolled!(j in [0 1] => {
                                if j + 1 < wz && better_than::<T, MAXIMUM>(centres[j][r], out) {
                                    out = centres[j][r];
                                }
                            });
                        } else {
                            unrolled!(j in [0 1] => {
                                if j + 1 < wz && better_than::<T, MAXIMUM>(history[j][r], out) {
                                    out = history[j][r];
                                }
                            });
                        }
                        if y0 + (r as i64) < extent[1] {
                            // SAFETY: (z, y0 + r, x) is a position of the item.
                            unsafe { *to.add((first + r as u32 * extent[2] as u32) as usize) = out };
                        }
                    }
                });
            }
            // The planes kept for z: the oldest first, this one last.
            unrolled!(j in [0 1] => {
                if j + 2 < wz {
                    history[j] = history[j + 1];
                    if PLUS {
                        centres[j] = centres[j + 1];
                    }
                } else if j + 1 < wz {
                    history[j] = planar;
                    if PLUS {
                        centres[j] = centre;
                    }
                }
            });
            p += 1;
        }
        unit += grid_dim_x() as u64 * warps;
    }
}

macro_rules! warp_kernels {
    ($($t:ty: $name:ident $args:ident, $rows:expr, $past:expr, $maximum:literal, $plus:literal, $fixed:literal;)*) => {$(
        kernel! {
            /// The grey-scale minimum (`grey_warp_min_*`,
            /// `grey_warp_plus_min_*` and their `fixed` kernels) or maximum
            /// (`..._max_*`) filter over one value type (float32, float64
            /// or bytes) for a flat box (or,
            /// the `plus` kernels, a flat plus: `geometry.plus` set) of rank
            /// 1 to 3 and windows up to
            /// `WARP_WINDOW`, held in registers: each warp streams the planes of its columns'
            /// window along z, taking the minimum along x by shuffles,
            /// along y and z in registers; no shared memory, no barriers.
            /// The `grey_warp_fixed_*` kernels hold the windows of a
            /// `WarpGeometry::fixed` geometry as constants (compiled apart
            /// from the others, so that neither costs the other registers).
            ///
            /// # Safety
            /// `input` and `output` hold `items * z * y * x` values and do
            /// not overlap; the geometry is consistent (`tiles` as
            /// documented, `rows` this kernel's, every window 1 to
            /// `WARP_WINDOW`, a plus's centre in its window; `fixed()` for
            /// the fixed kernels, which otherwise trap: the launch fails with
            /// an error that leaves the context unusable) and a
            /// plane's positions, with a warp's rows and columns past its
            /// end, below `u32::MAX`; the launch gives `WARP_THREADS`
            /// threads.
            ///
            /// # Parameters
            /// See `GreyWarpMinF32Args` (the others differ in their pointers only).
            ///
            /// # Thread mapping
            /// A warp per `chunk_z × rows × outputs_x()` unit (grid-stride
            /// over the units of every item, four warps per block); lane
            /// `x` loads column `x` of the unit's window and, below
            /// `outputs_x()`, writes it; with `past`, lanes below `wx - 1`
            /// also load its column `WARP_X + x`.
            pub unsafe extern "ptx-kernel" fn $name(
                geometry: WarpGeometry,
                mode: u32,
                reserved: u32,
                cval: f64,
                input: *const $t,
                output: *mut $t,
            ) as $args {
                let _ = reserved;
                // SAFETY: the caller's, as documented; `FIXED` is the
                // geometry's own window along z (a fixed kernel given
                // another geometry traps instead).
                unsafe {
                    if !$fixed {
                        grey_warp::<$t, { $rows as usize }, $maximum, $plus, $past, 0>(&geometry, mode, cval, input, output)
                    } else if !geometry.fixed() {
                        trap()
                    } else if geometry.window(0) == WARP_WINDOW {
                        grey_warp::<$t, { $rows as usize }, $maximum, $plus, $past, { WARP_WINDOW as usize }>(&geometry, mode, cval, input, output)
                    } else {
                        grey_warp::<$t, { $rows as usize }, $maximum, $plus, $past, 1>(&geometry, mode, cval, input, output)
                    }
                }
            }
        }
    )*};
}

warp_kernels! {
    f32: grey_warp_min_f32 GreyWarpMinF32Args, WARP_ROWS_F32, WARP_PAST_F32, false, false, false;
    f32: grey_warp_max_f32 GreyWarpMaxF32Args, WARP_ROWS_F32, WARP_PAST_F32, true, false, false;
    f64: grey_warp_min_f64 GreyWarpMinF64Args, WARP_ROWS_F64, WARP_PAST_F64, false, false, false;
    f64: grey_warp_max_f64 GreyWarpMaxF64Args, WARP_ROWS_F64, WARP_PAST_F64, true, false, false;
    f32: grey_warp_plus_min_f32 GreyWarpPlusMinF32Args, WARP_ROWS_F32, WARP_PAST_F32, false, true, false;
    f32: grey_warp_plus_max_f32 GreyWarpPlusMaxF32Args, WARP_ROWS_F32, WARP_PAST_F32, true, true, false;
    f32: grey_warp_fixed_min_f32 GreyWarpFixedMinF32Args, WARP_ROWS_FIXED_F32, WARP_PAST_F32, false, false, true;
    f32: grey_warp_fixed_max_f32 GreyWarpFixedMaxF32Args, WARP_ROWS_FIXED_F32, WARP_PAST_F32, true, false, true;
    f64: grey_warp_fixed_min_f64 GreyWarpFixedMinF64Args, WARP_ROWS_F64, WARP_PAST_F64, false, false, true;
    f64: grey_warp_fixed_max_f64 GreyWarpFixedMaxF64Args, WARP_ROWS_F64, WARP_PAST_F64, true, false, true;
    f32: grey_warp_fixed_plus_min_f32 GreyWarpFixedPlusMinF32Args, WARP_ROWS_FIXED_PLUS_F32, WARP_PAST_F32, false, true, true;
    f32: grey_warp_fixed_plus_max_f32 GreyWarpFixedPlusMaxF32Args, WARP_ROWS_FIXED_PLUS_F32, WARP_PAST_F32, true, true, true;
    u8: grey_warp_min_u8 GreyWarpMinU8Args, WARP_ROWS_F32, WARP_PAST_F32, false, false, false;
    u8: grey_warp_max_u8 GreyWarpMaxU8Args, WARP_ROWS_F32, WARP_PAST_F32, true, false, false;
    u8: grey_warp_plus_min_u8 GreyWarpPlusMinU8Args, WARP_ROWS_F32, WARP_PAST_F32, false, true, false;
    u8: grey_warp_plus_max_u8 GreyWarpPlusMaxU8Args, WARP_ROWS_F32, WARP_PAST_F32, true, true, false;
    u8: grey_warp_fixed_min_u8 GreyWarpFixedMinU8Args, WARP_ROWS_FIXED_F32, WARP_PAST_F32, false, false, true;
    u8: grey_warp_fixed_max_u8 GreyWarpFixedMaxU8Args, WARP_ROWS_FIXED_F32, WARP_PAST_F32, true, false, true;
    u8: grey_warp_fixed_plus_min_u8 GreyWarpFixedPlusMinU8Args, WARP_ROWS_FIXED_PLUS_F32, WARP_PAST_F32, false, true, true;
    u8: grey_warp_fixed_plus_max_u8 GreyWarpFixedPlusMaxU8Args, WARP_ROWS_FIXED_PLUS_F32, WARP_PAST_F32, true, true, true;
}

/// The most rows a wide warp kernel's lane loads per plane.
const WIDE_LOAD_ROWS: usize = 14;
/// The most earlier planes a wide warp kernel keeps (`wz - 1`).
const WIDE_MAX_HISTORY: usize = 6;
const _: () = assert!(
    WARP_ROWS_WIDE as usize <= WARP_MAX_ROWS
        && WARP_ROWS_WIDE as usize + WARP_WIDE_WINDOW as usize - 1 <= WIDE_LOAD_ROWS
        && WARP_WIDE_WINDOW as usize - 1 <= WIDE_MAX_HISTORY,
    "the wide warp kernels' register arrays and unrolled lists hold their windows"
);

/// The wide warp kernels' body: the minimum (or, with `MAXIMUM`, maximum)
/// over a flat box of at most `WARP_WIDE_WINDOW` along every axis, with
/// `ROWS` output rows and 32 output columns per warp, all in registers.
/// Unlike [`grey_warp`] (whose plus needs the rows' minima along x first),
/// a box is taken along y first, in each lane's registers, so that only
/// the `ROWS` output rows go through the shuffles along x (not the `ROWS +
/// wy - 1` loaded ones): the first `wx - 1` lanes also load and reduce the
/// column `WARP_X` to their right, which lane `l` sends for the shift `i`
/// when `l < i`. Along z, registers hold for each `j < wz` the minimum over
/// the last `j` planes' results, each updated in place from the one
/// before (no planes shifted, which kept two copies live). As in the other paths, the comparisons are strict and start
/// from the identity, so NaN is never taken and the result equals theirs
/// value for value.
///
/// # Safety
/// As the kernels' `# Safety` sections; `ROWS <= WARP_MAX_ROWS`.
#[inline(always)]
unsafe fn grey_warp_wide<T: Grey + Lane, const ROWS: usize, const MAXIMUM: bool>(
    g: &WarpGeometry,
    mode: u32,
    cval: f64,
    input: *const T,
    output: *mut T,
) {
    let identity = if MAXIMUM { T::SMALLEST } else { T::LARGEST };
    let outside = T::from_f64(cval);
    let (wz, wy, wx) = (g.window(0) as usize, g.window(1) as usize, g.window(2) as usize);
    let lane = thread_idx_x() % 32;
    let warps = (WARP_THREADS / 32) as u64;
    let extent = [g.extent[0] as i64, g.extent[1] as i64, g.extent[2] as i64];
    let plane = (extent[1] * extent[2]) as u64;
    let spatial = plane * extent[0] as u64;
    let per_item = g.tiles[0] as u64 * g.tiles[1] as u64 * g.tiles[2] as u64;
    let units = g.units();
    let loaded = ROWS + wy - 1;
    // Warp-uniform: every lane of a warp takes the same units, so all 32
    // take part in every shuffle.
    let mut unit = block_idx_x() as u64 * warps + (thread_idx_x() / 32) as u64;
    while unit < units {
        let item = unit / per_item;
        let u = unit % per_item;
        let (tx, ty) = (g.tiles[2] as u64, g.tiles[1] as u64);
        let (ux, uy, uz) = (u % tx, (u / tx) % ty, u / (tx * ty));
        let (z0, y0, x0) = ((uz * g.chunk_z as u64) as i64, (uy * ROWS as u64) as i64, (ux * WARP_X as u64) as i64);
        let base = item * spatial;
        // In-plane offsets with the boundary modes applied (below u32::MAX,
        // as the host keeps a plane's positions), BOX_OUTSIDE outside.
        let in_plane = |j: i64, n: i64, scale: i64| match boundary_index(j, n, mode) {
            Some(j) => (j * scale) as u32,
            None => BOX_OUTSIDE,
        };
        let column = in_plane(x0 + g.low[2] as i64 + lane as i64, extent[2], 1);
        let past = if (lane as usize) < wx - 1 {
            in_plane(x0 + g.low[2] as i64 + (WARP_X + lane) as i64, extent[2], 1)
        } else {
            BOX_OUTSIDE
        };
        // Rows past the array's last one serve no output that is written
        // (loaded row k serves output rows k - wy + 1 ..= k): not loaded.
        let mut row = [BOX_OUTSIDE; WIDE_LOAD_ROWS];
        unrolled!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13] => {
            if k < loaded && y0 + (k as i64 + 1 - wy as i64).max(0) < extent[1] {
                row[k] = in_plane(y0 + g.low[1] as i64 + k as i64, extent[1], extent[2]);
            }
        });
        let outputs = (extent[0] - z0).min(g.chunk_z as i64);
        let planes = outputs + wz as i64 - 1;
        let plane_at = |j: i64| {
            boundary_index(z0 + g.low[0] as i64 + j, extent[0], mode)
                // SAFETY: z is a plane of the item.
                .map(|z| unsafe { input.add((base + z as u64 * plane) as usize) })
        };
        // Column `column` of the plane's loaded rows, reduced along y: each
        // output row's minimum over its wy rows (a position outside the
        // array takes `outside`; its load reads the plane's first value).
        let load = |from: Option<*const T>, column: u32| {
            let plane_start = from.unwrap_or(input);
            let column_in = from.is_some() && column != BOX_OUTSIDE;
            let mut values = [outside; WIDE_LOAD_ROWS];
            unrolled!(k in [0 1 2 3 4 5 6 7 8 9 10 11 12 13] => {
                if k < ROWS + WARP_WIDE_WINDOW as usize - 1 && k < loaded {
                    let inside = column_in && row[k] != BOX_OUTSIDE;
                    let at = if inside { row[k] + column } else { 0 };
                    // SAFETY: at is a position of the plane (boundary modes
                    // applied), or 0.
                    let value = unsafe { *plane_start.add(at as usize) };
                    values[k] = if inside { value } else { outside };
                }
            });
            values
        };
        let along_y = |values: &[T; WIDE_LOAD_ROWS]| {
            let mut reduced = [identity; WARP_MAX_ROWS];
            unrolled!(r in [0 1 2 3 4 5 6 7] => {
                if r < ROWS {
                    unrolled!(k in [0 1 2 3 4 5 6] => {
                        if k < wy && better_than::<T, MAXIMUM>(values[r + k], reduced[r]) {
                            reduced[r] = values[r + k];
                        }
                    });
                }
            });
            reduced
        };
        // last[j]: each output row's minimum over the results of the
        // planes p - j - 1 ..= p - 1 (fewer at the start: the identity
        // stands for the planes before the first).
        let mut last = [[identity; WARP_MAX_ROWS]; WIDE_MAX_HISTORY];
        let mut next_plane = plane_at(0);
        let mut next = load(next_plane, column);
        let mut p = 0i64;
        while p < planes {
            // The next plane's loads are issued before this plane's
            // shuffles; the column past the warp's is loaded for this
            // plane only (lanes below wx - 1).
            let (values, this_plane) = (next, next_plane);
            if p + 1 < planes {
                next_plane = plane_at(p + 1);
                next = load(next_plane, column);
            }
            let own = along_y(&values);
            // A column past the warp's outside the array (constant mode)
            // holds `outside` in every row, as its load would give.
            let mut beyond = [outside; WARP_MAX_ROWS];
            if past != BOX_OUTSIDE {
                beyond = along_y(&load(this_plane, past));
            }
            // Along x: lane l receives lane (l + i) mod 32's minimum, its
            // column l + i, or for l + i >= 32 the column past the warp
            // that lane l + i - 32 < i reduced.
            let mut planar = own;
            unrolled!(r in [0 1 2 3 4 5 6 7] => {
                if r < ROWS {
                    unrolled!(i in [1 2 3 4 5 6] => {
                        // Warp-uniform: every lane shuffles or none.
                        if i < wx {
                            let sent = if (lane as usize) < i { beyond[r] } else { own[r] };
                            // SAFETY: every lane of the warp is here (the
                            // condition is warp-uniform).
                            let v = unsafe { sent.from_lane((lane + i as u32) % 32) };
                            if better_than::<T, MAXIMUM>(v, planar[r]) {
                                planar[r] = v;
                            }
                        }
                    });
                }
            });
            let x = x0 + lane as i64;
            if p >= wz as i64 - 1 && x < extent[2] {
                let z = z0 + p - (wz as i64 - 1);
                // SAFETY: z is a plane of the item.
                let to = unsafe { output.add((base + z as u64 * plane) as usize) };
                let first = (y0 * extent[2] + x) as u32;
                unrolled!(r in [0 1 2 3 4 5 6 7] => {
                    if r < ROWS {
                        // The window's other wz - 1 planes: last[wz - 2].
                        let mut out = planar[r];
                        unrolled!(j in [0 1 2 3 4 5] => {
                            if j + 2 == wz && better_than::<T, MAXIMUM>(last[j][r], out) {
                                out = last[j][r];
                            }
                        });
                        if y0 + (r as i64) < extent[1] {
                            // SAFETY: (z, y0 + r, x) is a position of the item.
                            unsafe { *to.add((first + r as u32 * extent[2] as u32) as usize) = out };
                        }
                    }
                });
            }
            // The minima over the planes up to this one, the longest first
            // (each from the one before it, not yet updated).
            unrolled!(j in [5 4 3 2 1] => {
                if j + 1 < wz {
                    unrolled!(r in [0 1 2 3 4 5 6 7] => {
                        if r < ROWS && better_than::<T, MAXIMUM>(planar[r], last[j - 1][r]) {
                            last[j][r] = planar[r];
                        } else if r < ROWS {
                            last[j][r] = last[j - 1][r];
                        }
                    });
                }
            });
            last[0] = planar;
            p += 1;
        }
        unit += grid_dim_x() as u64 * warps;
    }
}

macro_rules! wide_kernels {
    ($($t:ty: $name:ident $args:ident, $maximum:literal;)*) => {$(
        kernel! {
            /// The grey-scale minimum (`grey_warp_wide_min_*`) or maximum
            /// (`..._max_*`) filter over float32 or bytes for a flat box of
            /// rank 1 to 3 with windows up to `WARP_WIDE_WINDOW`, one of
            /// them longer than `WARP_WINDOW` (`WarpGeometry::wide`), held
            /// in registers (`grey_warp_wide`): each warp streams the
            /// planes of its columns' window along z, taking the minimum
            /// along y in registers, along x by shuffles and along z in
            /// registers; no shared memory, no barriers.
            ///
            /// # Safety
            /// `input` and `output` hold `items * z * y * x` values and do
            /// not overlap; the geometry is `wide()` and consistent (`tiles`
            /// as documented, `rows` `WARP_ROWS_WIDE`; otherwise the kernel
            /// traps: the launch fails with an error that leaves the context
            /// unusable) and a plane's positions, with a warp's rows and
            /// columns past its end, below `u32::MAX`; the launch gives
            /// `WARP_THREADS` threads.
            ///
            /// # Parameters
            /// See `GreyWarpWideMinF32Args` (the others differ in their pointers only).
            ///
            /// # Thread mapping
            /// A warp per `chunk_z × rows × 32` unit (grid-stride over the
            /// units of every item, four warps per block); lane `x` loads
            /// column `x` of the unit's window and writes it; lanes below
            /// `wx - 1` also load its column `WARP_X + x`.
            pub unsafe extern "ptx-kernel" fn $name(
                geometry: WarpGeometry,
                mode: u32,
                reserved: u32,
                cval: f64,
                input: *const $t,
                output: *mut $t,
            ) as $args {
                let _ = reserved;
                if !geometry.wide() || geometry.rows != WARP_ROWS_WIDE {
                    trap()
                } else {
                    // SAFETY: the caller's, as documented; the windows and
                    // rows are checked above.
                    unsafe {
                        grey_warp_wide::<$t, { WARP_ROWS_WIDE as usize }, $maximum>(&geometry, mode, cval, input, output)
                    }
                }
            }
        }
    )*};
}

wide_kernels! {
    f32: grey_warp_wide_min_f32 GreyWarpWideMinF32Args, false;
    f32: grey_warp_wide_max_f32 GreyWarpWideMaxF32Args, true;
    u8: grey_warp_wide_min_u8 GreyWarpWideMinU8Args, false;
    u8: grey_warp_wide_max_u8 GreyWarpWideMaxU8Args, true;
}

kernel! {
    /// The tiled binary filter for rank 1 to 3: the block loads a tile and
    /// its halo (`border` outside the array) into shared memory; each
    /// thread decides its positions (stopping at the first deciding
    /// element); with `local`, the block repeats the step on its tile in
    /// shared memory until no position of it changes, then writes.
    ///
    /// # Safety
    /// `input`, `output` and `mask` (unless null) hold `items * z * y * x`
    /// values; `input` and `output` do not overlap, or are one array (in
    /// place, as for `binary_filter`); `shared_offsets` as for
    /// the grey-scale tiles; `changed` is one word; `local` only with an
    /// element holding offset 0 (the repeated step is then monotone); the
    /// launch gives `TILE_THREADS` threads and `shared_len()` bytes.
    ///
    /// # Parameters
    /// See [`BinaryTileArgs`].
    ///
    /// # Thread mapping
    /// As the grey-scale tiles.
    pub unsafe extern "ptx-kernel" fn binary_tile(
        geometry: TileGeometry,
        dilation: u32,
        border: u32,
        local: u32,
        reserved: u32,
        shared_offsets: *const i32,
        input: *const u8,
        mask: *const u8,
        output: *mut u8,
        changed: *mut u32,
    ) as BinaryTileArgs {
        let _ = reserved;
        // SAFETY: the caller's, as documented.
        unsafe {
            if dilation != 0 {
                binary_tile_body::<true>(&geometry, border, local, shared_offsets, input, mask, output, changed)
            } else {
                binary_tile_body::<false>(&geometry, border, local, shared_offsets, input, mask, output, changed)
            }
        }
    }
}

/// The tiled binary filter's body, with the rule a constant.
///
/// # Safety
/// As `binary_tile`'s `# Safety` section.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn binary_tile_body<const DILATION: bool>(
    g: &TileGeometry,
    border: u32,
    local: u32,
    shared_offsets: *const i32,
    input: *const u8,
    mask: *const u8,
    output: *mut u8,
    changed: *mut u32,
) {
    let dilation = DILATION;
    let shared = dynamic_shared::<u8>();
    let spatial = g.extent[0] as u64 * g.extent[1] as u64 * g.extent[2] as u64;
    let (ly, lx) = ((thread_idx_x() / TILE_X) as i64, (thread_idx_x() % TILE_X) as i64);
    let row = g.halo[2] as usize * g.halo[1] as usize;
    let own = ((-g.low[0]) as usize * g.halo[1] as usize + (ly - g.low[1] as i64) as usize) * g.halo[2] as usize
        + (lx - g.low[2] as i64) as usize;
    let own_read = (ly as usize) * g.halo[2] as usize + lx as usize;
    let mut any_change = false;
    let units = g.units();
    let mut unit = block_idx_x() as u64;
    while unit < units {
        let (item, first) = tile_unit(g, unit);
        let base = item * spatial;
        // SAFETY: the launch gives shared_len bytes; block-uniform call.
        unsafe {
            load_tile_stepped(g, first, MODE_CONSTANT, border as u8, shared, |i| {
                (*input.add((base + i) as usize) != 0) as u8
            });
            sync_threads();
        }
        // Bit k: whether this thread's position k is inside the array and
        // may change (the mask), and its value.
        let (y, x) = (first[1] + ly, first[2] + lx);
        let mut active = 0u32;
        let mut value = 0u32;
        let mut k = 0;
        while k < TILE_MAX_Z as usize {
            let z = first[0] + k as i64;
            let inside =
                (k as u32) < g.tile_z && z < g.extent[0] as i64 && y < g.extent[1] as i64 && x < g.extent[2] as i64;
            if inside {
                let at = base + ((z as u64 * g.extent[1] as u64 + y as u64) * g.extent[2] as u64 + x as u64);
                // SAFETY: at is a position; the tile holds the thread's own positions.
                unsafe {
                    if mask.is_null() || *mask.add(at as usize) != 0 {
                        active |= 1 << k;
                    }
                    if *shared.add(own + k * row) != 0 {
                        value |= 1 << k;
                    }
                }
            }
            k += 1;
        }
        let initial = value;
        loop {
            // Bit k: some element reads the deciding value (1 for
            // dilation, 0 for erosion) from position k.
            let mut found = 0u32;
            let mut e = 0;
            while e < g.elements && found != active {
                // SAFETY: shared_offsets holds `elements` values.
                let o = own_read + unsafe { *shared_offsets.add(e as usize) } as usize;
                let mut k = 0;
                while k < TILE_MAX_Z as usize {
                    if (active & !found) & (1 << k) != 0 {
                        // SAFETY: offsets stay inside the tile; volatile: other
                        // threads of the block may write it (local mode).
                        let v = unsafe { core::ptr::read_volatile(shared.add(o + k * row)) } != 0;
                        if v == dilation {
                            found |= 1 << k;
                        }
                    }
                    k += 1;
                }
                e += 1;
            }
            let decided = if dilation { found } else { active & !found };
            let result = (value & !active) | decided;
            let step_change = result != value;
            if local == 0 {
                value = result;
                break;
            }
            // SAFETY: block-uniform barriers: every thread runs the same
            // number of rounds (the OR is block-wide).
            unsafe {
                sync_threads();
                let flipped = result ^ value;
                let mut k = 0;
                while k < TILE_MAX_Z as usize {
                    if flipped & (1 << k) != 0 {
                        core::ptr::write_volatile(shared.add(own + k * row), ((result >> k) & 1) as u8);
                    }
                    k += 1;
                }
                value = result;
                if !sync_threads_or(step_change) {
                    break;
                }
            }
        }
        any_change |= value != initial;
        store_tile(g, first, base, ly, lx, output, |k| ((value >> k) & 1) as u8);
        // SAFETY: block-uniform; the tile is reused by the next unit.
        unsafe { sync_threads() };
        unit += grid_dim_x() as u64;
    }
    if any_change {
        // SAFETY: changed is one word.
        unsafe { *changed = 1 };
    }
}

kernel! {
    /// The binary filter on rows of bits (rank 1 to 3): the block loads
    /// its tile's rows and their halo as words of 32 positions (a warp's
    /// ballot per word; `border` outside the array) and each thread
    /// computes one row's `32 · BITS_WORDS` results, 32 at once, an AND (erosion) or OR
    /// (dilation) of the elements' shifted words, stopping when the row is
    /// decided; with `local`, the block repeats the step on its tile in
    /// shared memory until no row changes, then writes (each repeat also
    /// spreading the deciding value along x through the active positions
    /// of the row when `x_runs` says the element holds its x neighbours).
    ///
    /// # Safety
    /// `input`, `output` and `mask` (unless null) hold `items * z * y * x`
    /// values; `input` and `output` do not overlap, or are one array (in
    /// place, as for `binary_filter`); `element_rows` and
    /// `element_x` hold `elements` values whose rows stay inside the halo
    /// from every row of the tile (offsets within `low..=high`) and whose
    /// x offsets are within ±`BITS_REACH_X`; `changed` is one word; `local`
    /// only with an element at offset 0; the launch gives `BITS_THREADS`
    /// threads and `shared_words()` words of dynamic shared memory.
    ///
    /// # Parameters
    /// See [`BinaryBitsArgs`].
    ///
    /// # Thread mapping
    /// A block per tile (grid-stride over the tiles of every item); thread
    /// `t` takes row `(t / tile_y, t % tile_y)` of the tile; warps load the
    /// words and write the bytes, a word or a row per lane step.
    pub unsafe extern "ptx-kernel" fn binary_bits(
        geometry: BitsGeometry,
        dilation: u32,
        border: u32,
        local: u32,
        x_runs: u32,
        element_rows: *const i32,
        element_x: *const i32,
        input: *const u8,
        mask: *const u8,
        output: *mut u8,
        changed: *mut u32,
    ) as BinaryBitsArgs {
        // Runs along x only fill while repeating until stable.
        let x_runs = if local != 0 { x_runs } else { 0 };
        // The rule as a constant: one body per rule.
        macro_rules! body {
            ($dilation:literal) => {
                // SAFETY: the caller's, as documented.
                unsafe {
                    binary_bits_body::<$dilation>(
                        &geometry,
                        border,
                        local,
                        x_runs,
                        element_rows,
                        element_x,
                        input,
                        mask,
                        output,
                        changed,
                    )
                }
            };
        }
        if dilation != 0 {
            body!(true)
        } else {
            body!(false)
        }
    }
}

/// The bit-row binary filter's body, with the rule a constant.
///
/// # Safety
/// As `binary_bits`' `# Safety` section.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn binary_bits_body<const DILATION: bool>(
    g: &BitsGeometry,
    border: u32,
    local: u32,
    x_runs: u32,
    element_rows: *const i32,
    element_x: *const i32,
    input: *const u8,
    mask: *const u8,
    output: *mut u8,
    changed: *mut u32,
) {
    const W: usize = BITS_WORDS as usize;
    const _: () = assert!(BITS_WORDS == 4, "the runs along x are filled as one u128 row");
    const ROW: usize = W + 2;
    /// Halo rows whose loads a warp issues together (aligned rows).
    const HALO_BATCH: usize = 4;
    let words = dynamic_shared::<u32>();
    let halo_rows = g.halo[0] * g.halo[1];
    // SAFETY: the mask words follow the halo's words (shared_words()).
    let mask_words = unsafe { words.add(halo_rows as usize * ROW) };
    let spatial = g.extent[0] as u64 * g.extent[1] as u64 * g.extent[2] as u64;
    let (ez, ey, ex) = (g.extent[0] as i64, g.extent[1] as i64, g.extent[2] as i64);
    let t = thread_idx_x();
    let (warp, lane) = (t / 32, t % 32);
    let (lz, ly) = (t / g.tile_y, t % g.tile_y);
    let tile_rows = g.tile_z * g.tile_y;
    let own_row = ((lz as i32 - g.low[0]) * g.halo[1] as i32 + (ly as i32 - g.low[1])) as usize;
    let per_item = g.tiles[0] as u64 * g.tiles[1] as u64 * g.tiles[2] as u64;
    let mut any_change = false;
    let units = g.units();
    let mut unit = block_idx_x() as u64;
    while unit < units {
        let item = unit / per_item;
        let u = (unit % per_item) as u32;
        let tx = u % g.tiles[2];
        let ty = (u / g.tiles[2]) % g.tiles[1];
        let tz = u / (g.tiles[2] * g.tiles[1]);
        let (z0, y0, x0) = ((tz * g.tile_z) as i64, (ty * g.tile_y) as i64, (tx * 32 * BITS_WORDS) as i64);
        let base = item * spatial;
        // The halo's words: a warp per halo row (warp-uniform loops); the
        // row's coordinates taken once per row. When rows start on 4-byte
        // boundaries (`aligned`), each lane loads 4 positions at once and
        // groups of 8 lanes assemble a word (`nibble_word`); else a ballot
        // per word of bytes.
        let aligned = ex % 4 == 0 && (input as u64 + base) % 4 == 0 && (output as u64 + base) % 4 == 0;
        let border_bytes = if border != 0 { 0x0101_0101u32 } else { 0 };
        if aligned {
            // Words 0..4 of a row from a first load, 4..ROW from a second
            // (lanes 0..16); x0 - 32 and ex are multiples of 4, so a lane's
            // 4 positions are all inside or all outside. A warp issues the
            // loads of HALO_BATCH rows before it assembles any, so that
            // they are in flight together.
            let mut row = warp;
            while row < halo_rows {
                let mut loaded = [[0u32; 2]; HALO_BATCH];
                unrolled!(i in [0 1 2 3] => {
                    let r = row + i as u32 * (BITS_THREADS / 32);
                    if r < halo_rows {
                        let z = z0 + g.low[0] as i64 + (r / g.halo[1]) as i64;
                        let y = y0 + g.low[1] as i64 + (r % g.halo[1]) as i64;
                        let row_inside = z >= 0 && z < ez && y >= 0 && y < ey;
                        let start = base as i64 + (z * ey + y) * ex;
                        let mut half = 0;
                        while half < 2 {
                            let x = x0 - 32 + 128 * half as i64 + 4 * lane as i64;
                            loaded[i][half] = if half == 1 && lane >= 16 {
                                0
                            } else if row_inside && x >= 0 && x < ex {
                                // SAFETY: 4 positions of the item, 4-byte aligned.
                                unsafe { *(input.add((start + x) as usize) as *const u32) }
                            } else {
                                border_bytes
                            };
                            half += 1;
                        }
                    }
                });
                unrolled!(i in [0 1 2 3] => {
                    let r = row + i as u32 * (BITS_THREADS / 32);
                    if r < halo_rows {
                        let mut half = 0;
                        while half < 2 {
                            // SAFETY: every lane of the warp is here (r is warp-uniform).
                            let word = unsafe { nibble_word(loaded[i][half], lane) };
                            if (half == 0 || lane < 16) && lane % 8 == 0 {
                                // SAFETY: r < halo_rows, 4 * half + lane / 8 < ROW.
                                unsafe { *words.add(r as usize * ROW + 4 * half + lane as usize / 8) = word };
                            }
                            half += 1;
                        }
                    }
                });
                row += HALO_BATCH as u32 * (BITS_THREADS / 32);
            }
        } else {
            let mut row = warp;
            while row < halo_rows {
                let z = z0 + g.low[0] as i64 + (row / g.halo[1]) as i64;
                let y = y0 + g.low[1] as i64 + (row % g.halo[1]) as i64;
                let row_inside = z >= 0 && z < ez && y >= 0 && y < ey;
                let start = base as i64 + (z * ey + y) * ex;
                let mut w = 0;
                while w < ROW {
                    let x = x0 - 32 + 32 * w as i64 + lane as i64;
                    let v = if row_inside && x >= 0 && x < ex {
                        // SAFETY: an element of the item.
                        unsafe { *input.add((start + x) as usize) != 0 }
                    } else {
                        border != 0
                    };
                    // SAFETY: every lane of the warp is here (the loops are warp-uniform).
                    let word = unsafe { ballot(v) };
                    if lane == 0 {
                        // SAFETY: row < halo_rows, w < ROW.
                        unsafe { *words.add(row as usize * ROW + w) = word };
                    }
                    w += 1;
                }
                row += BITS_THREADS / 32;
            }
        }
        // The tile rows' masks: inside the array and the mask, loaded when
        // there is a mask; without one, each thread takes its own row's
        // from the extents below.
        if !mask.is_null() {
            let mut q = warp;
            while q < tile_rows * W as u32 {
                let (r, k) = (q / W as u32, q % W as u32);
                let z = z0 + (r / g.tile_y) as i64;
                let y = y0 + (r % g.tile_y) as i64;
                let x = x0 + 32 * k as i64 + lane as i64;
                let inside = z < ez && y < ey && x < ex;
                let at = base + ((z * ey + y) * ex + x) as u64;
                // SAFETY: at is an element when inside.
                let m = inside && unsafe { *mask.add(at as usize) } != 0;
                // SAFETY: warp-uniform loop.
                let word = unsafe { ballot(m) };
                if lane == 0 {
                    // SAFETY: q < tile_rows * W.
                    unsafe { *mask_words.add(q as usize) = word };
                }
                q += BITS_THREADS / 32;
            }
        }
        // SAFETY: block-uniform.
        unsafe { sync_threads() };
        let mine = t < tile_rows;
        let mut active = [0u32; W];
        let mut value = [0u32; W];
        if mine {
            let row_inside = z0 + (lz as i64) < ez && y0 + (ly as i64) < ey;
            let mut k = 0;
            while k < W {
                active[k] = if !mask.is_null() {
                    // SAFETY: t is a tile row.
                    unsafe { *mask_words.add(t as usize * W + k) }
                } else {
                    // The word's positions inside the array along x.
                    let inside = (ex - (x0 + 32 * k as i64)).clamp(0, 32) as u32;
                    match (row_inside, inside) {
                        (false, _) | (_, 0) => 0,
                        (true, 32) => u32::MAX,
                        (true, inside) => u32::MAX >> (32 - inside),
                    }
                };
                // SAFETY: own_row is a halo row.
                value[k] = unsafe { *words.add(own_row * ROW + 1 + k) };
                k += 1;
            }
        }
        let initial = value;
        loop {
            let mut acc = [if DILATION { 0u32 } else { !0u32 }; W];
            if mine {
                let mut e = 0;
                // The halo row read last: elements of one row (the host
                // lists them row by row) read it once.
                let mut row = [0u32; ROW];
                let mut row_offset = i32::MIN;
                while e < g.elements {
                    // SAFETY: the tables hold `elements` values; each row is
                    // a halo row from every tile row (the caller's bounds);
                    // volatile: other threads may write the tile between
                    // the steps of local mode.
                    let ox = unsafe {
                        let offset = *element_rows.add(e as usize);
                        if offset != row_offset {
                            row_offset = offset;
                            let start = (own_row as i32 + offset) as usize * ROW;
                            let mut w = 0;
                            while w < ROW {
                                row[w] = core::ptr::read_volatile(words.add(start + w));
                                w += 1;
                            }
                        }
                        *element_x.add(e as usize)
                    };
                    let mut decided = true;
                    let mut k = 0;
                    while k < W {
                        let window = bits_window(row[k], row[k + 1], row[k + 2], ox);
                        if DILATION {
                            acc[k] |= window;
                            decided &= acc[k] & active[k] == active[k];
                        } else {
                            acc[k] &= window;
                            decided &= acc[k] & active[k] == 0;
                        }
                        k += 1;
                    }
                    if decided {
                        break;
                    }
                    e += 1;
                }
            }
            let mut result = value;
            let mut k = 0;
            while k < W {
                result[k] = (acc[k] & active[k]) | (value[k] & !active[k]);
                k += 1;
            }
            if x_runs != 0 {
                // The deciding value (1 for dilation, 0 for erosion) spread
                // through the active positions along x, as the steps would.
                let wide =
                    |w: [u32; W]| w[0] as u128 | (w[1] as u128) << 32 | (w[2] as u128) << 64 | (w[3] as u128) << 96;
                let deciding = if DILATION { wide(result) } else { !wide(result) };
                let filled = fill_x_runs(deciding, wide(active), x_runs);
                let filled = if DILATION { filled } else { !filled };
                result = [filled as u32, (filled >> 32) as u32, (filled >> 64) as u32, (filled >> 96) as u32];
            }
            let mut step_change = false;
            let mut k = 0;
            while k < W {
                step_change |= result[k] != value[k];
                k += 1;
            }
            if local == 0 {
                value = result;
                break;
            }
            // SAFETY: block-uniform barriers (the OR is block-wide).
            unsafe {
                sync_threads();
                if mine {
                    let mut k = 0;
                    while k < W {
                        if result[k] != value[k] {
                            core::ptr::write_volatile(words.add(own_row * ROW + 1 + k), result[k]);
                        }
                        k += 1;
                    }
                }
                value = result;
                if !sync_threads_or(step_change) {
                    break;
                }
            }
        }
        any_change |= value != initial;
        // The bytes: a warp writes the rows of its 32 threads, 128
        // consecutive positions per row (4 per lane) when aligned, else 32
        // per step.
        let mut j = 0;
        while j < 32 {
            let r = warp * 32 + j;
            let z = z0 + (r / g.tile_y) as i64;
            let y = y0 + (r % g.tile_y) as i64;
            let row_inside = r < tile_rows && z < ez && y < ey;
            let start = base as i64 + (z * ey + y) * ex;
            if aligned {
                // SAFETY: every lane of the warp is here.
                let words_of_j: [u32; W] = unsafe {
                    [
                        shuffle_u32(value[0], j),
                        shuffle_u32(value[1], j),
                        shuffle_u32(value[2], j),
                        shuffle_u32(value[3], j),
                    ]
                };
                let x = x0 + 4 * lane as i64;
                let word = match lane / 8 {
                    0 => words_of_j[0],
                    1 => words_of_j[1],
                    2 => words_of_j[2],
                    _ => words_of_j[3],
                };
                if row_inside && x < ex {
                    // SAFETY: 4 positions of the item (ex and x are
                    // multiples of 4), 4-byte aligned.
                    unsafe { *(output.add((start + x) as usize) as *mut u32) = word_bytes(word, lane % 8) };
                }
            } else {
                let mut k = 0;
                while k < W {
                    // SAFETY: every lane of the warp is here.
                    let word = unsafe { shuffle_u32(value[k], j) };
                    let x = x0 + 32 * k as i64 + lane as i64;
                    if row_inside && x < ex {
                        // SAFETY: (z, y, x) is a position of the item.
                        unsafe { *output.add((start + x) as usize) = ((word >> lane) & 1) as u8 };
                    }
                    k += 1;
                }
            }
            j += 1;
        }
        // SAFETY: block-uniform; the tile is reused by the next unit.
        unsafe { sync_threads() };
        unit += grid_dim_x() as u64;
    }
    if any_change {
        // SAFETY: changed is one word.
        unsafe { *changed = 1 };
    }
}

kernel! {
    /// `binary_fill_holes` by components, step 1: each background
    /// element's faces to its previous background neighbours along z, y and
    /// x, as the watershed's edge masks, for `uf_tile_local` and
    /// `uf_tile_faces` (scipy's cross joins faces only).
    ///
    /// # Safety
    /// `input` and `edges` hold one byte per element of `dims`, fewer than
    /// 2^32 elements.
    ///
    /// # Parameters
    /// - `input`: non-zero = foreground; `dims`: the extent; `edges`: written
    ///   for every element.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration.
    pub unsafe extern "ptx-kernel" fn fill_holes_edges(
        input: *const u8,
        dims: gpu_waterz_abi::Dims3,
        edges: *mut u8,
    ) as FillHolesEdgesArgs {
        use gpu_waterz_abi::watershed::{NEG_X, NEG_Y, NEG_Z};
        let [sz, sy, _] = dims.strides();
        grid_stride(dims.z * dims.y * dims.x, |i| {
            let (z, y, x) = crate::watershed::coords(i, dims);
            // SAFETY: i and its previous neighbours (where they exist) lie
            // below the element count.
            unsafe {
                let background = |j: u64| *input.add(j as usize) == 0;
                let mut bits = 0u8;
                if background(i) {
                    if z > 0 && background(i - sz) {
                        bits |= NEG_Z;
                    }
                    if y > 0 && background(i - sy) {
                        bits |= NEG_Y;
                    }
                    if x > 0 && background(i - 1) {
                        bits |= NEG_X;
                    }
                }
                *edges.add(i as usize) = bits;
            }
        });
    }
}

kernel! {
    /// `binary_fill_holes` by components, step 2: marks the root of every
    /// background component with an element on the array's border (a face
    /// of one of the axes from `first_axis` on): the background the
    /// dilation from outside reaches.
    ///
    /// # Safety
    /// `input`, `parent` and `reached` hold one entry per element of `dims`,
    /// fewer than 2^32; `parent` a complete components forest over indices
    /// below that count.
    ///
    /// # Parameters
    /// - `input`: non-zero = foreground; `dims`; `first_axis`: the first axis
    ///   of the array; `parent`: the forest; `reached`: set to 1 at roots.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration (only border elements
    /// follow the forest).
    pub unsafe extern "ptx-kernel" fn fill_holes_reach(
        input: *const u8,
        dims: gpu_waterz_abi::Dims3,
        first_axis: u32,
        reserved: u32,
        parent: *const u32,
        reached: *mut u8,
    ) as FillHolesReachArgs {
        let _ = reserved;
        grid_stride(dims.z * dims.y * dims.x, |i| {
            let (z, y, x) = crate::watershed::coords(i, dims);
            let on = |axis: u32, at: u64, extent: u64| axis >= first_axis && (at == 0 || at + 1 == extent);
            if on(0, z, dims.z) || on(1, y, dims.y) || on(2, x, dims.x) {
                // SAFETY: i lies below the element count; the forest's
                // roots too.
                unsafe {
                    if *input.add(i as usize) == 0 {
                        let root = crate::watershed::labels::find_root(parent, i as u32);
                        *reached.add(root as usize) = 1;
                    }
                }
            }
        });
    }
}

kernel! {
    /// `binary_fill_holes` by components, step 3: the result, 1 for the
    /// foreground and for background whose component `fill_holes_reach`
    /// did not mark.
    ///
    /// # Safety
    /// `input`, `parent`, `reached` and `output` hold `n < 2^32` entries;
    /// `parent` a complete components forest.
    ///
    /// # Parameters
    /// - `input`: non-zero = foreground; `n`; `parent`: the forest;
    ///   `reached`: the marked roots; `output`: written for every element.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one element per iteration.
    pub unsafe extern "ptx-kernel" fn fill_holes_output(
        input: *const u8,
        n: u64,
        parent: *const u32,
        reached: *const u8,
        output: *mut u8,
    ) as FillHolesOutputArgs {
        grid_stride(n, |i| {
            // SAFETY: i < n, and the forest's roots too.
            unsafe {
                let filled = *input.add(i as usize) != 0
                    || *reached.add(crate::watershed::labels::find_root(parent, i as u32) as usize) == 0;
                *output.add(i as usize) = filled as u8;
            }
        });
    }
}
