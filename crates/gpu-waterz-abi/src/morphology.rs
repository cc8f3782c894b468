//! Grey-scale and binary morphology (`scipy.ndimage`'s minimum and maximum
//! filters over a structuring element): the geometry the host resolves
//! once, the boundary modes, and the argument structs of the kernels in
//! `kernels-rs/src/morphology.rs`.
//!
//! Arrays are `items` independent C-order arrays of one spatial shape of
//! rank 1 to [`MORPH_MAX_RANK`] (a batch `(B, C, spatial…)` is `B · C`
//! items). The structuring element is a list of active elements, each an
//! offset per axis and the same offset flattened against the spatial
//! strides; elements whose every offset stays inside the array (the
//! interior, tested per axis against the offsets' extrema) add the flat
//! offset to the position, and only positions near a face map each
//! coordinate through [`boundary_index`].

/// The largest spatial rank the kernels take.
pub const MORPH_MAX_RANK: usize = 8;
/// Threads per block of the morphology kernels.
pub const MORPH_THREADS: u32 = 256;
/// Positions per thread in one work unit: a unit is
/// `MORPH_THREADS * MORPH_PER_THREAD` consecutive positions of one item.
pub const MORPH_PER_THREAD: u32 = 4;
/// Positions in one work unit.
pub const MORPH_UNIT: u64 = (MORPH_THREADS * MORPH_PER_THREAD) as u64;

/// `d c b a | a b c d | d c b a`.
pub const MODE_REFLECT: u32 = 0;
/// `k k k k | a b c d | k k k k` with `k = cval`.
pub const MODE_CONSTANT: u32 = 1;
/// `a a a a | a b c d | d d d d`.
pub const MODE_NEAREST: u32 = 2;
/// `d c b | a b c d | c b a`.
pub const MODE_MIRROR: u32 = 3;
/// `a b c d | a b c d | a b c d`.
pub const MODE_WRAP: u32 = 4;

/// Where coordinate `j` of an axis of extent `n` (≥ 1) reads under `mode`
/// (one of the `MODE_*` codes), or `None` for `cval` (constant mode
/// outside the axis). An unknown mode reads as constant.
#[inline(always)]
pub fn boundary_index(j: i64, n: i64, mode: u32) -> Option<i64> {
    if j >= 0 && j < n {
        return Some(j);
    }
    match mode {
        MODE_NEAREST => Some(if j < 0 { 0 } else { n - 1 }),
        MODE_WRAP => Some(j.rem_euclid(n)),
        MODE_REFLECT => {
            let k = j.rem_euclid(2 * n);
            Some(if k >= n { 2 * n - 1 - k } else { k })
        }
        MODE_MIRROR => {
            if n == 1 {
                Some(0)
            } else {
                let period = 2 * n - 2;
                let k = j.rem_euclid(period);
                Some(if k >= n { period - k } else { k })
            }
        }
        _ => None,
    }
}

/// The shape of the arrays and the extent of the structuring element, as
/// the kernels see them. Axes past `rank` are unused (extent 1, stride 0,
/// offsets 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MorphGeometry {
    /// The spatial rank, 1 to [`MORPH_MAX_RANK`].
    pub rank: u32,
    /// The number of active elements.
    pub elements: u32,
    /// Elements of one item (the product of the extents).
    pub spatial: u64,
    /// The number of items.
    pub items: u64,
    /// The extent of each axis (the last varies fastest).
    pub extent: [u64; MORPH_MAX_RANK],
    /// The stride of each axis in elements.
    pub stride: [u64; MORPH_MAX_RANK],
    /// The least offset along each axis over the active elements.
    pub low: [i64; MORPH_MAX_RANK],
    /// The largest offset along each axis over the active elements.
    pub high: [i64; MORPH_MAX_RANK],
}

impl MorphGeometry {
    /// The extent and stride of `axis`, selected without indexing by a
    /// run-time value (which would copy the struct to local memory on the
    /// device).
    #[inline(always)]
    pub fn axis(&self, axis: u32) -> (u64, u64) {
        let (mut extent, mut stride) = (1, 0);
        let mut a = 0;
        while a < MORPH_MAX_RANK {
            if a as u32 == axis {
                extent = self.extent[a];
                stride = self.stride[a];
            }
            a += 1;
        }
        (extent, stride)
    }

    /// Whether a position with coordinates `coords` reads only inside
    /// the array through every element (the fast path).
    #[inline(always)]
    pub fn interior(&self, coords: &[i64; MORPH_MAX_RANK]) -> bool {
        let mut inside = true;
        let mut axis = 0;
        while axis < MORPH_MAX_RANK {
            if (axis as u32) < self.rank {
                let c = coords[axis];
                let n = self.extent[axis] as i64;
                inside &= c + self.low[axis] >= 0 && c + self.high[axis] < n;
            }
            axis += 1;
        }
        inside
    }

    /// The coordinates of position `p` of an item (C order).
    #[inline(always)]
    pub fn coordinates(&self, p: u64) -> [i64; MORPH_MAX_RANK] {
        let mut coords = [0i64; MORPH_MAX_RANK];
        if self.spatial <= u32::MAX as u64 {
            // 32-bit division where the positions fit (the common case).
            let mut rest = p as u32;
            let mut axis = MORPH_MAX_RANK;
            while axis > 0 {
                axis -= 1;
                if (axis as u32) < self.rank {
                    let n = self.extent[axis] as u32;
                    coords[axis] = (rest % n) as i64;
                    rest /= n;
                }
            }
        } else {
            let mut rest = p;
            let mut axis = MORPH_MAX_RANK;
            while axis > 0 {
                axis -= 1;
                if (axis as u32) < self.rank {
                    let n = self.extent[axis];
                    coords[axis] = (rest % n) as i64;
                    rest /= n;
                }
            }
        }
        coords
    }

    /// The position element `element` (whose per-axis offsets are
    /// `offset(element * rank + axis)`) reads from `coords` under `mode`,
    /// or `None` for `cval`.
    #[inline(always)]
    pub fn boundary_read(
        &self,
        coords: &[i64; MORPH_MAX_RANK],
        element: u32,
        mode: u32,
        offset: impl Fn(usize) -> i64,
    ) -> Option<u64> {
        let mut index = 0u64;
        let mut outside = false;
        let first = element as usize * self.rank as usize;
        // Unrolled by hand: a loop over the axes would index the struct by
        // a run-time value, which copies it to local memory on the device.
        macro_rules! axis {
            ($($axis:literal)*) => {$(
                if ($axis as u32) < self.rank {
                    let j = coords[$axis] + offset(first + $axis);
                    match boundary_index(j, self.extent[$axis] as i64, mode) {
                        Some(j) => index += j as u64 * self.stride[$axis],
                        None => outside = true,
                    }
                }
            )*};
        }
        axis!(0 1 2 3 4 5 6 7);
        if outside {
            None
        } else {
            Some(index)
        }
    }
}

/// Warps per block of the staged separable passes (`chunk` set in the
/// `GreyLine*Args`): each warp works alone, with its own staging area.
pub const LINE_WARPS: u32 = 4;
/// Bytes of shared memory per warp of the staged separable passes.
pub const LINE_WARP_BYTES: u32 = 6144;

/// Consecutive outputs per lane of a staged pass along the last axis
/// whose window holds at least as many values ([`row_run`]); odd, so that
/// the lanes' reads of 32-bit slots, `ROW_RUN` apart, fall in distinct
/// banks.
pub const ROW_RUN: u32 = 5;

/// Reads of a run's shared values issued together ([`row_run`]).
const ROW_RUN_READS: u32 = 4;

/// The outputs of a run of [`ROW_RUN`] consecutive windows of `window`
/// values (at least `ROW_RUN`), the first output `i` of them for `i <
/// outputs` (the others `identity`): output `i` is the best (`pick(best,
/// v)` keeps the better) of `value(i)` to `value(i + window - 1)`. Every
/// window holds values `ROW_RUN - 1` to `window - 1` (taken once,
/// `ROW_RUN_READS` reads at a time); output `i` adds the values before
/// them from `i` (suffixes, taken backwards) and after them up to `i +
/// window - 1` (a running prefix): `window + ROW_RUN - 1` reads for
/// `ROW_RUN` outputs instead of `window * ROW_RUN`. Reads `value(j)` only
/// for `j < outputs.min(ROW_RUN) + window - 1`, and nothing when `outputs`
/// is 0.
#[inline(always)]
pub fn row_run<T: Copy>(
    window: u32,
    outputs: u32,
    identity: T,
    value: impl Fn(u32) -> T,
    pick: impl Fn(T, T) -> T,
) -> [T; ROW_RUN as usize] {
    const RUN: usize = ROW_RUN as usize;
    let mut results = [identity; RUN];
    if outputs == 0 {
        return results;
    }
    // suffix[i]: the best of values i to ROW_RUN - 2.
    let mut suffix = [identity; RUN];
    let mut running = identity;
    let mut i = RUN - 1;
    while i > 0 {
        i -= 1;
        running = pick(running, value(i as u32));
        suffix[i] = running;
    }
    // The values every window holds: ROW_RUN - 1 to window - 1.
    let mut core = identity;
    let mut j = ROW_RUN - 1;
    while j < window {
        let mut values = [identity; ROW_RUN_READS as usize];
        let mut u = 0;
        while u < ROW_RUN_READS {
            if j + u < window {
                values[u as usize] = value(j + u);
            }
            u += 1;
        }
        let mut u = 0;
        while u < ROW_RUN_READS as usize {
            core = pick(core, values[u]);
            u += 1;
        }
        j += ROW_RUN_READS;
    }
    let mut after = identity;
    let mut i = 0;
    while i < RUN {
        if (i as u32) < outputs {
            if i > 0 {
                after = pick(after, value(window + i as u32 - 1));
            }
            results[i] = pick(pick(core, suffix[i]), after);
        }
        i += 1;
    }
    results
}

/// How a staged separable pass (`GreyLine*Args` with `chunk` set) splits
/// the arrays: each line along the axis is `extent` values `inner` apart,
/// and there are `outer` lines per column (the items times the extents
/// before the axis). Along a strided axis (`inner` > 1) a warp's unit is
/// 32 adjacent lines (a lane each, reading whole rows of 32 values) and
/// `chunk` outputs along them: it stages the `chunk + window - 1` values
/// its outputs read of each line, 32 to a row. Along the last axis
/// (`inner` = 1) a warp's unit is `chunk` outputs of one line, staged as
/// `chunk + window - 1` consecutive values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineStaging {
    /// Lines (or groups of lines along the last axis) before the axis.
    pub outer: u64,
    /// The axis's extent.
    pub extent: u64,
    /// The axis's stride (1: the last axis).
    pub inner: u64,
    /// Outputs along the axis per unit (at least 1).
    pub chunk: u64,
}

impl LineStaging {
    /// The staging of `axis` of `geometry` with `chunk` outputs per unit.
    #[inline(always)]
    pub fn new(geometry: &MorphGeometry, axis: u32, chunk: u32) -> LineStaging {
        let (extent, inner) = geometry.axis(axis);
        let line = extent * inner;
        let outer = geometry.spatial.checked_div(line).map_or(0, |lines| geometry.items * lines);
        LineStaging { outer, extent, inner, chunk: chunk.max(1) as u64 }
    }

    /// Units along the axis.
    #[inline(always)]
    pub fn chunks(&self) -> u64 {
        self.extent.div_ceil(self.chunk)
    }

    /// Units across the lines of one row (groups of 32 along a strided
    /// axis; 1 along the last).
    #[inline(always)]
    pub fn tiles(&self) -> u64 {
        if self.inner == 1 {
            1
        } else {
            self.inner.div_ceil(32)
        }
    }

    /// Every warp's unit: `outer × chunks × tiles`.
    #[inline(always)]
    pub fn units(&self) -> u64 {
        self.outer * self.chunks() * self.tiles()
    }

    /// The values a warp stages for a window of `window` offsets: what
    /// [`Self::fits`] holds to the staging area.
    #[inline(always)]
    pub fn staged_values(&self, window: u64) -> u64 {
        let along = self.chunk + window - 1;
        if self.inner == 1 {
            along
        } else {
            along * 32
        }
    }

    /// Whether a window of `window` (≥ 1) offsets fits a warp's staging
    /// area of [`LINE_WARP_BYTES`] for values of `value_bytes` bytes.
    #[inline(always)]
    pub fn fits(&self, window: u64, value_bytes: u32) -> bool {
        window >= 1 && self.staged_values(window) * value_bytes as u64 <= LINE_WARP_BYTES as u64
    }
}

macro_rules! grey_args {
    ($($args:ident, $line:ident, $t:ty, $variant:ident, $line_variant:ident;)*) => {$(
        #[doc = concat!("Arguments of the grey-scale filter over `", stringify!($t), "`: at every position, the")]
        /// minimum (or maximum) over the active elements of the input
        /// (less, or plus, the element's weight when `flat` is 0, in
        /// float64), with the boundary `mode`.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $args {
            /// The arrays and the element.
            pub geometry: MorphGeometry,
            /// A `MODE_*` code.
            pub mode: u32,
            /// 1: maximum (dilation); 0: minimum (erosion).
            pub maximum: u32,
            /// 1 when every weight is 0 (compared in the input's type).
            pub flat: u32,
            /// Unused; keeps `cval` aligned.
            pub reserved: u32,
            /// The value outside the array in constant mode.
            pub cval: f64,
            /// `elements * rank` per-axis offsets.
            pub offsets: *const i64,
            /// `elements` flat offsets (the per-axis ones against the strides).
            pub flat_offsets: *const i64,
            /// `elements` weights (read when `flat` is 0).
            pub weights: *const f64,
            /// `items * spatial` values.
            pub input: *const $t,
            /// Out: `items * spatial` values.
            pub output: *mut $t,
        }

        #[doc = concat!("Arguments of one separable pass over `", stringify!($t), "`: the minimum (or")]
        /// maximum) over the window `[low, high]` of offsets along `axis`,
        /// with the boundary `mode` (a box element is one pass per axis).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $line {
            /// The arrays (the element fields are unused).
            pub geometry: MorphGeometry,
            /// The axis.
            pub axis: u32,
            /// A `MODE_*` code.
            pub mode: u32,
            /// 1: maximum; 0: minimum.
            pub maximum: u32,
            /// 0: a thread per position reads its window from global
            /// memory (any window); else each warp stages the lines of its
            /// unit in shared memory ([`LineStaging`]), `chunk` outputs
            /// along the axis per line of the unit.
            pub chunk: u32,
            /// The least offset of the window.
            pub low: i64,
            /// The largest offset of the window.
            pub high: i64,
            /// The value outside the array in constant mode.
            pub cval: f64,
            /// `items * spatial` values.
            pub input: *const $t,
            /// Out: `items * spatial` values.
            pub output: *mut $t,
        }

        impl_kernel_args!(
            $args => $variant { geometry, mode, maximum, flat, reserved, cval, offsets, flat_offsets, weights, input, output },
            $line => $line_variant { geometry, axis, mode, maximum, chunk, low, high, cval, input, output },
        );
    )*};
}

grey_args! {
    GreyFilterF32Args, GreyLineF32Args, f32, GreyFilterF32, GreyLineF32;
    GreyFilterF64Args, GreyLineF64Args, f64, GreyFilterF64, GreyLineF64;
    GreyFilterU8Args, GreyLineU8Args, u8, GreyFilterU8, GreyLineU8;
}

/// Arguments of the binary filter: at every position, whether every
/// (erosion) or any (dilation) active element reads a non-zero value,
/// outside the array `border`; where `mask` is given and 0, the input
/// unchanged. Sets `changed` when an output differs from its input.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinaryFilterArgs {
    /// The arrays and the element.
    pub geometry: MorphGeometry,
    /// 1: any (dilation, over the reflected element); 0: every (erosion).
    pub dilation: u32,
    /// The value outside the array (0 or 1).
    pub border: u32,
    /// `elements * rank` per-axis offsets.
    pub offsets: *const i64,
    /// `elements` flat offsets.
    pub flat_offsets: *const i64,
    /// `items * spatial` values, 0 or 1.
    pub input: *const u8,
    /// `items * spatial` values (0: keep the input), or null.
    pub mask: *const u8,
    /// Out: `items * spatial` values, 0 or 1.
    pub output: *mut u8,
    /// One word, set to 1 when some output differs from its input.
    pub changed: *mut u32,
}

impl_kernel_args!(
    BinaryFilterArgs => BinaryFilter { geometry, dilation, border, offsets, flat_offsets, input, mask, output, changed },
);

/// Threads per block of the tile kernels: a `TILE_Y × TILE_X` plane of
/// threads, each taking up to [`TILE_MAX_Z`] positions along z.
pub const TILE_THREADS: u32 = TILE_X * TILE_Y;
/// The tile's extent along x (one warp).
pub const TILE_X: u32 = 32;
/// The tile's extent along y.
pub const TILE_Y: u32 = 8;
/// The most positions a thread takes along z.
pub const TILE_MAX_Z: u32 = 8;
/// The shared memory a tile kernel may take per block.
pub const TILE_SHARED_BYTES: u32 = 48 * 1024;

/// Arrays of rank 1 to 3 (as `(z, y, x)`, leading axes of extent 1) cut
/// into tiles of `tile_z × TILE_Y × TILE_X` positions, each loaded with
/// its halo (the element's reach) into shared memory once.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileGeometry {
    /// The number of items.
    pub items: u64,
    /// `(z, y, x)` extents of an item.
    pub extent: [u32; 3],
    /// Positions per thread along z (1 to [`TILE_MAX_Z`]).
    pub tile_z: u32,
    /// The least offset of the element along each axis.
    pub low: [i32; 3],
    /// The largest offset along each axis.
    pub high: [i32; 3],
    /// The shared tile's extents: the tile plus `high - low` per axis.
    pub halo: [u32; 3],
    /// The number of tiles along each axis.
    pub tiles: [u32; 3],
    /// The number of active elements.
    pub elements: u32,
}

impl TileGeometry {
    /// The offset in the shared tile of an element at `(z, y, x)` offsets
    /// from a position (the host tabulates it per element).
    pub fn shared_offset(&self, offset: [i32; 3]) -> i32 {
        ((offset[0] - self.low[0]) * self.halo[1] as i32 + (offset[1] - self.low[1])) * self.halo[2] as i32
            + (offset[2] - self.low[2])
    }

    /// The values in a shared tile.
    pub fn shared_len(&self) -> u32 {
        self.halo[0] * self.halo[1] * self.halo[2]
    }

    /// The number of work units (tiles of all items).
    pub fn units(&self) -> u64 {
        self.items * self.tiles[0] as u64 * self.tiles[1] as u64 * self.tiles[2] as u64
    }
}

macro_rules! tile_args {
    ($($args:ident, $t:ty, $variant:ident;)*) => {$(
        #[doc = concat!("Arguments of the tiled grey-scale filter over `", stringify!($t), "` (rank 1 to 3):")]
        /// what [`GreyFilterF32Args`] computes, from a shared tile.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $args {
            /// The tiles.
            pub geometry: TileGeometry,
            /// A `MODE_*` code.
            pub mode: u32,
            /// 1: maximum; 0: minimum.
            pub maximum: u32,
            /// 1 when every weight is 0.
            pub flat: u32,
            /// Unused; keeps `cval` aligned.
            pub reserved: u32,
            /// The value outside the array in constant mode.
            pub cval: f64,
            /// `elements` offsets in the shared tile ([`TileGeometry::shared_offset`]).
            pub shared_offsets: *const i32,
            /// `elements` weights (read when `flat` is 0).
            pub weights: *const f64,
            /// `items * z * y * x` values.
            pub input: *const $t,
            /// Out: `items * z * y * x` values.
            pub output: *mut $t,
        }

        impl_kernel_args!(
            $args => $variant { geometry, mode, maximum, flat, reserved, cval, shared_offsets, weights, input, output },
        );
    )*};
}

tile_args! {
    GreyTileF32Args, f32, GreyTileF32;
    GreyTileF64Args, f64, GreyTileF64;
    GreyTileU8Args, u8, GreyTileU8;
}

/// Outputs per block of the box kernels along x (two per thread).
pub const BOX_X: u32 = 64;
/// Outputs per block along y (one per thread row).
pub const BOX_Y: u32 = 8;
/// Threads per block of the box kernels: `BOX_Y` rows of 32.
pub const BOX_THREADS: u32 = 256;
/// The most values a thread loads per plane: the plane with its halo
/// holds at most `BOX_SLOTS * BOX_THREADS` values.
pub const BOX_SLOTS: u32 = 8;
/// The most shared memory a box kernel takes per block.
pub const BOX_SHARED_BYTES: u32 = 48 * 1024;

/// Arrays of rank 1 to 3 (as `(z, y, x)`, leading axes of extent 1)
/// filtered by a flat box, the window `low..=high` along each axis (or a
/// flat plus: `plus`, `centre`): a
/// block takes `BOX_Y × BOX_X` columns of `chunk_z` positions and streams
/// the planes of its window along z, each plane's minimum (or maximum)
/// over x then y taken in shared memory and the last `high - low + 1`
/// along z kept in a ring there.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoxGeometry {
    /// The number of items.
    pub items: u64,
    /// `(z, y, x)` extents of an item.
    pub extent: [u32; 3],
    /// Output planes per block (at least 1).
    pub chunk_z: u32,
    /// The window's least offset along each axis.
    pub low: [i32; 3],
    /// Its largest offset (at least `low`).
    pub high: [i32; 3],
    /// The number of blocks' worth of work along `(z, y, x)`:
    /// `extent[0] / chunk_z`, `extent[1] / BOX_Y`, `extent[2] / BOX_X`
    /// rounded up.
    pub tiles: [u32; 3],
    /// 0: the box `low..=high`; 1: a plus, the three segments `low..=high`
    /// along one axis through `centre` (which lies in the window).
    pub plus: u32,
    /// The plus's centre (unused for a box).
    pub centre: [i32; 3],
    /// Unused; keeps the struct's size a multiple of 8.
    pub reserved: u32,
}

impl BoxGeometry {
    /// The window's length along `axis` (0: z, 1: y, 2: x).
    pub fn window(&self, axis: usize) -> u32 {
        (self.high[axis] - self.low[axis] + 1) as u32
    }

    /// The values of one input plane with its halo: `(BOX_Y + wy - 1) ×
    /// (BOX_X + wx - 1)`.
    pub fn plane_len(&self) -> u32 {
        (BOX_Y + self.window(1) - 1) * (BOX_X + self.window(2) - 1)
    }

    /// The values of shared memory a block takes: the plane, its minima
    /// along x (`(BOX_Y + wy - 1) × BOX_X`) and the ring of `wz` planes of
    /// results (`wz × BOX_Y × BOX_X`); a plus keeps a second ring, of the
    /// centres' values.
    pub fn shared_len(&self) -> u32 {
        let rings = if self.plus != 0 { 2 } else { 1 };
        self.plane_len() + (BOX_Y + self.window(1) - 1) * BOX_X + rings * self.window(0) * BOX_Y * BOX_X
    }

    /// The number of work units (blocks' worth of columns of every item).
    pub fn units(&self) -> u64 {
        self.items * self.tiles[0] as u64 * self.tiles[1] as u64 * self.tiles[2] as u64
    }

    /// The bytes of shared memory a block takes for values of
    /// `value_bytes`, or `None` when the window does not fit the kernel:
    /// a window of no position, a plane beyond `BOX_SLOTS` loads per
    /// thread, or more than `BOX_SHARED_BYTES`. (Each window is bounded
    /// first, so that [`Self::plane_len`] and [`Self::shared_len`] do not
    /// wrap.)
    pub fn shared_bytes(&self, value_bytes: u32) -> Option<u32> {
        let limit = (BOX_SLOTS * BOX_THREADS) as i64;
        if (0..3).any(|a| !(1..=limit).contains(&(self.high[a] as i64 - self.low[a] as i64 + 1))) {
            return None;
        }
        if self.plus != 0 && (0..3).any(|a| !(self.low[a]..=self.high[a]).contains(&self.centre[a])) {
            return None;
        }
        let shared = self.shared_len() as u64 * value_bytes as u64;
        (self.plane_len() <= BOX_SLOTS * BOX_THREADS && shared <= BOX_SHARED_BYTES as u64).then_some(shared as u32)
    }
}

/// The argument structs of the kernels that stream planes along z (the box
/// and plus kernels, the warp kernels): a geometry, the mode, one flag
/// word, `cval` and the arrays.
macro_rules! streamed_args {
    ($($args:ident: $geometry:ident, $t:ty, $variant:ident, $flag:ident ($flag_doc:literal), $what:literal;)*) => {$(
        #[doc = concat!("Arguments of ", $what, " over `", stringify!($t), "` (rank 1 to 3, as its windows allow), boundary modes as")]
        /// [`GreyFilterF32Args`].
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $args {
            /// The window and the arrays.
            pub geometry: $geometry,
            /// A `MODE_*` code.
            pub mode: u32,
            #[doc = $flag_doc]
            pub $flag: u32,
            /// The value outside the array in constant mode.
            pub cval: f64,
            /// `items * z * y * x` values.
            pub input: *const $t,
            /// Out: `items * z * y * x` values.
            pub output: *mut $t,
        }

        impl_kernel_args!(
            $args => $variant { geometry, mode, $flag, cval, input, output },
        );
    )*};
}

streamed_args! {
    GreyBoxF32Args: BoxGeometry, f32, GreyBoxF32, maximum ("1: maximum; 0: minimum."), "a box kernel: the minimum or maximum over a flat box";
    GreyBoxF64Args: BoxGeometry, f64, GreyBoxF64, maximum ("1: maximum; 0: minimum."), "a box kernel: the minimum or maximum over a flat box";
    GreyPlusF32Args: BoxGeometry, f32, GreyPlusF32, maximum ("1: maximum; 0: minimum."), "a plus kernel: the minimum or maximum over a flat plus";
    GreyPlusF64Args: BoxGeometry, f64, GreyPlusF64, maximum ("1: maximum; 0: minimum."), "a plus kernel: the minimum or maximum over a flat plus";
    GreyBoxU8Args: BoxGeometry, u8, GreyBoxU8, maximum ("1: maximum; 0: minimum."), "a box kernel: the minimum or maximum over a flat box";
    GreyPlusU8Args: BoxGeometry, u8, GreyPlusU8, maximum ("1: maximum; 0: minimum."), "a plus kernel: the minimum or maximum over a flat plus";
}

/// Threads per block of the warp kernels: four independent warps.
pub const WARP_THREADS: u32 = 128;
/// Lanes of a warp, each loading one column ([`WarpGeometry::outputs_x`]
/// says how many of them a warp writes).
pub const WARP_X: u32 = 32;
/// Whether the first `wx - 1` lanes of the float32 warp kernels also load
/// the columns just past the warp's, which the last lanes' windows reach,
/// so that every lane writes its column (a row of 64 takes two warps, not
/// three); the float64 kernels do not (the extra values' registers cost
/// them more than the idle lanes, `docs/BENCHMARKS.md`).
pub const WARP_PAST_F32: bool = true;
/// [`WARP_PAST_F32`] for the float64 warp kernels.
pub const WARP_PAST_F64: bool = false;
/// The byte (uint8) warp kernels take the float32 kernels' rows per warp
/// and columns past the warp: their values take 32-bit registers as well.
///
/// Output rows per warp of the float32 warp kernels (four: fewer
/// registers, more warps per multiprocessor; eight rows read fewer halo
/// rows but measured slower in these generic kernels, `docs/BENCHMARKS.md`).
pub const WARP_ROWS_F32: u32 = 4;
/// Output rows per warp of the fixed-window float32 warp kernels
/// ([`WarpGeometry::fixed`]), whose constant windows leave registers for
/// more rows: each plane's halo rows are then read for more output rows.
/// Eight, held to 128 registers (four blocks per multiprocessor, 24 bytes
/// spilled): 4–7 % faster than six on an H100 for 256³ to 512³ and
/// 8192², within 2 % either way for 128³ and 96 × 160 × 200, and a 64-row
/// plane takes whole tiles; eight at 168 registers (three blocks) had
/// measured slower than six (`docs/BENCHMARKS.md`).
pub const WARP_ROWS_FIXED_F32: u32 = 8;
/// Output rows per warp of the fixed-window float32 warp kernels for a
/// plus (their other values take registers: at eight rows and 128
/// registers ptxas spilled 236 bytes).
pub const WARP_ROWS_FIXED_PLUS_F32: u32 = 6;
/// Output rows per warp of the float64 warp kernels.
pub const WARP_ROWS_F64: u32 = 4;
/// The longest window along every axis of the warp kernels.
pub const WARP_WINDOW: u32 = 3;
/// The longest window along every axis of the wide warp kernels
/// (`grey_warp_wide_*`): flat boxes only, with a window longer than
/// [`WARP_WINDOW`] along some axis ([`WarpGeometry::wide`]).
pub const WARP_WIDE_WINDOW: u32 = 7;
/// Output rows per warp of the wide warp kernels: a lane holds `rows +
/// wy - 1` loaded rows per plane and the last `wz - 1` planes' results.
pub const WARP_ROWS_WIDE: u32 = 8;

/// Arrays of rank 1 to 3 (as `(z, y, x)`, leading axes of extent 1)
/// filtered by a flat box of windows up to [`WARP_WINDOW`], the window
/// `low..=high` along each axis, in registers: each warp takes
/// `outputs_x() × rows` columns of `chunk_z` positions and streams the
/// planes of its window along z; a lane loads its column of `rows + wy -
/// 1` rows per plane (with `past`, the first `wx - 1` lanes also the
/// column `WARP_X` to their right), takes the minimum (or maximum) along x by warp
/// shuffles from the lanes to its right, along y in its registers and along
/// z over the last `wz` planes' results, also in registers. No shared
/// memory and no barriers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpGeometry {
    /// The number of items.
    pub items: u64,
    /// `(z, y, x)` extents of an item.
    pub extent: [u32; 3],
    /// Output planes per warp (at least 1).
    pub chunk_z: u32,
    /// The window's least offset along each axis.
    pub low: [i32; 3],
    /// Its largest offset (at least `low`).
    pub high: [i32; 3],
    /// The number of warps' worth of work along `(z, y, x)`:
    /// `extent[0] / chunk_z`, `extent[1] / rows`, `extent[2] /
    /// outputs_x()` rounded up.
    pub tiles: [u32; 3],
    /// Output rows per warp: the kernel's (`WARP_ROWS_F32`,
    /// `WARP_ROWS_FIXED_F32`, `WARP_ROWS_FIXED_PLUS_F32` or
    /// `WARP_ROWS_F64`).
    pub rows: u32,
    /// 0: the box `low..=high`; 1: a plus, the three segments `low..=high`
    /// along one axis through `centre` (the `grey_warp_plus_*` and
    /// `grey_warp_fixed_plus_*` kernels, float32 only).
    pub plus: u32,
    /// The plus's centre (unused for a box).
    pub centre: [i32; 3],
    /// 1: the first `wx - 1` lanes also load the columns past the warp's
    /// and every lane writes (the kernels of [`WARP_PAST_F32`]); 0: the
    /// last `wx - 1` lanes only load.
    pub past: u32,
}

impl WarpGeometry {
    /// The window's length along `axis` (0: z, 1: y, 2: x), 0 for an empty
    /// or reversed one.
    pub fn window(&self, axis: usize) -> u32 {
        (self.high[axis] as i64 - self.low[axis] as i64 + 1).clamp(0, u32::MAX as i64) as u32
    }

    /// Whether the fixed-window warp kernels take this geometry: windows of
    /// [`WARP_WINDOW`] along y and x and [`WARP_WINDOW`] or 1 along z
    /// (scipy's `size=3` and its cross, in 3-D and in 2-D), which they
    /// hold as constants (fewer instructions, their own registers).
    pub fn fixed(&self) -> bool {
        self.window(1) == WARP_WINDOW && self.window(2) == WARP_WINDOW && matches!(self.window(0), 1 | WARP_WINDOW)
    }

    /// Whether the wide warp kernels take this geometry: a box (not a
    /// plus) whose every window is 1 to [`WARP_WIDE_WINDOW`] and one of them
    /// longer than [`WARP_WINDOW`] (shorter ones are the other warp
    /// kernels'), with the columns past the warp loaded (`past`).
    pub fn wide(&self) -> bool {
        self.plus == 0
            && self.past != 0
            && (0..3).all(|axis| (1..=WARP_WIDE_WINDOW).contains(&self.window(axis)))
            && (0..3).any(|axis| self.window(axis) > WARP_WINDOW)
    }

    /// Whether every window is 1 to [`WARP_WINDOW`] (and a plus's centre
    /// lies in it).
    pub fn windows_fit(&self) -> bool {
        (0..3).all(|axis| {
            (1..=WARP_WINDOW).contains(&self.window(axis))
                && (self.plus == 0 || (self.low[axis]..=self.high[axis]).contains(&self.centre[axis]))
        })
    }

    /// Output columns per warp: one per lane with `past` (the `wx - 1`
    /// columns past them, which the last lanes' windows reach, are loaded by
    /// the first lanes), else the lanes less the `wx - 1` at the warp's
    /// right edge (whose values only the lanes to their left read).
    pub fn outputs_x(&self) -> u32 {
        if self.past != 0 {
            WARP_X
        } else {
            WARP_X - (self.window(2).clamp(1, WARP_WINDOW) - 1)
        }
    }

    /// The number of work units (warps' worth of columns of every item).
    pub fn units(&self) -> u64 {
        self.items * self.tiles[0] as u64 * self.tiles[1] as u64 * self.tiles[2] as u64
    }
}

streamed_args! {
    GreyWarpMinF32Args: WarpGeometry, f32, GreyWarpMinF32, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the minimum over a flat box in registers";
    GreyWarpMaxF32Args: WarpGeometry, f32, GreyWarpMaxF32, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the maximum over a flat box in registers";
    GreyWarpMinF64Args: WarpGeometry, f64, GreyWarpMinF64, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the minimum over a flat box in registers";
    GreyWarpMaxF64Args: WarpGeometry, f64, GreyWarpMaxF64, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the maximum over a flat box in registers";
    GreyWarpPlusMinF32Args: WarpGeometry, f32, GreyWarpPlusMinF32, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the minimum over a flat plus in registers";
    GreyWarpPlusMaxF32Args: WarpGeometry, f32, GreyWarpPlusMaxF32, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the maximum over a flat plus in registers";
    GreyWarpFixedMinF32Args: WarpGeometry, f32, GreyWarpFixedMinF32, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel (windows of [`WARP_WINDOW`] along y and x, [`WARP_WINDOW`] or 1 along z: [`WarpGeometry::fixed`]): the minimum over a flat box in registers";
    GreyWarpFixedMaxF32Args: WarpGeometry, f32, GreyWarpFixedMaxF32, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the maximum over a flat box in registers";
    GreyWarpFixedMinF64Args: WarpGeometry, f64, GreyWarpFixedMinF64, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the minimum over a flat box in registers";
    GreyWarpFixedMaxF64Args: WarpGeometry, f64, GreyWarpFixedMaxF64, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the maximum over a flat box in registers";
    GreyWarpFixedPlusMinF32Args: WarpGeometry, f32, GreyWarpFixedPlusMinF32, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the minimum over a flat plus in registers";
    GreyWarpFixedPlusMaxF32Args: WarpGeometry, f32, GreyWarpFixedPlusMaxF32, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the maximum over a flat plus in registers";
    GreyWarpMinU8Args: WarpGeometry, u8, GreyWarpMinU8, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the minimum over a flat box in registers";
    GreyWarpMaxU8Args: WarpGeometry, u8, GreyWarpMaxU8, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the maximum over a flat box in registers";
    GreyWarpPlusMinU8Args: WarpGeometry, u8, GreyWarpPlusMinU8, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the minimum over a flat plus in registers";
    GreyWarpPlusMaxU8Args: WarpGeometry, u8, GreyWarpPlusMaxU8, reserved ("Unused; keeps `cval` aligned."), "a warp kernel: the maximum over a flat plus in registers";
    GreyWarpWideMinF32Args: WarpGeometry, f32, GreyWarpWideMinF32, reserved ("Unused; keeps `cval` aligned."), "a wide warp kernel (a box of windows up to [`WARP_WIDE_WINDOW`]: [`WarpGeometry::wide`]): the minimum in registers";
    GreyWarpWideMaxF32Args: WarpGeometry, f32, GreyWarpWideMaxF32, reserved ("Unused; keeps `cval` aligned."), "a wide warp kernel ([`WarpGeometry::wide`]): the maximum in registers";
    GreyWarpWideMinU8Args: WarpGeometry, u8, GreyWarpWideMinU8, reserved ("Unused; keeps `cval` aligned."), "a wide warp kernel ([`WarpGeometry::wide`]): the minimum in registers";
    GreyWarpWideMaxU8Args: WarpGeometry, u8, GreyWarpWideMaxU8, reserved ("Unused; keeps `cval` aligned."), "a wide warp kernel ([`WarpGeometry::wide`]): the maximum in registers";
    GreyWarpFixedMinU8Args: WarpGeometry, u8, GreyWarpFixedMinU8, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel (windows of [`WARP_WINDOW`] along y and x, [`WARP_WINDOW`] or 1 along z: [`WarpGeometry::fixed`]): the minimum over a flat box in registers";
    GreyWarpFixedMaxU8Args: WarpGeometry, u8, GreyWarpFixedMaxU8, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the maximum over a flat box in registers";
    GreyWarpFixedPlusMinU8Args: WarpGeometry, u8, GreyWarpFixedPlusMinU8, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the minimum over a flat plus in registers";
    GreyWarpFixedPlusMaxU8Args: WarpGeometry, u8, GreyWarpFixedPlusMaxU8, reserved ("Unused; keeps `cval` aligned."), "a fixed-window warp kernel ([`WarpGeometry::fixed`]): the maximum over a flat plus in registers";
}

/// Arguments of the tiled binary filter (rank 1 to 3): what
/// [`BinaryFilterArgs`] computes, from a shared tile; with `local` set (a
/// structure holding its centre, run until stable) each block repeats the
/// step inside its tile until the tile stops changing, which reaches the
/// same fixed point in fewer launches.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinaryTileArgs {
    /// The tiles.
    pub geometry: TileGeometry,
    /// 1: any (dilation); 0: every (erosion).
    pub dilation: u32,
    /// The value outside the array (0 or 1).
    pub border: u32,
    /// 1: repeat inside the tile until it is stable.
    pub local: u32,
    /// Unused; keeps the pointers aligned.
    pub reserved: u32,
    /// `elements` offsets in the shared tile.
    pub shared_offsets: *const i32,
    /// `items * z * y * x` values, 0 or 1.
    pub input: *const u8,
    /// The same (0: keep the input), or null.
    pub mask: *const u8,
    /// Out: `items * z * y * x` values.
    pub output: *mut u8,
    /// One word, set to 1 when some output differs from its input.
    pub changed: *mut u32,
}

impl_kernel_args!(
    BinaryTileArgs => BinaryTile { geometry, dilation, border, local, reserved, shared_offsets, input, mask, output, changed },
);

/// Threads per block of `binary_bits`: one per row of 32 positions.
pub const BITS_THREADS: u32 = 256;
/// The most rows a `binary_bits` tile spans along z.
pub const BITS_MAX_Z: u32 = 16;
/// The reach along x `binary_bits` takes: element offsets in
/// `-BITS_REACH_X..=BITS_REACH_X` (one word on either side of a row's).
pub const BITS_REACH_X: i32 = 32;
/// Words of 32 positions a `binary_bits` thread takes along x (a tile is
/// `32 · BITS_WORDS` positions wide; its rows are held with one more word
/// on either side).
pub const BITS_WORDS: u32 = 4;

/// Binary arrays of rank 1 to 3 as rows of bits: a tile is `tile_z ×
/// tile_y` rows (`tile_z · tile_y = BITS_THREADS`) of `32 · BITS_WORDS`
/// positions along x, held with its halo as `BITS_WORDS + 2` words per row
/// (the 32 positions on either side too).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitsGeometry {
    /// The number of items.
    pub items: u64,
    /// `(z, y, x)` extents of an item.
    pub extent: [u32; 3],
    /// Rows per tile along z (a power of two, at most [`BITS_MAX_Z`]).
    pub tile_z: u32,
    /// Rows per tile along y (`BITS_THREADS / tile_z`).
    pub tile_y: u32,
    /// The least element offset along z and y (at most 0).
    pub low: [i32; 2],
    /// The largest along z and y (at least 0).
    pub high: [i32; 2],
    /// Rows of the halo tile along z and y (`tile + high - low`).
    pub halo: [u32; 2],
    /// The number of tiles along z, y and x (x in `32 · BITS_WORDS`).
    pub tiles: [u32; 3],
    /// The number of active elements.
    pub elements: u32,
}

impl BitsGeometry {
    /// Words of shared memory: `BITS_WORDS + 2` per halo row, and
    /// `BITS_WORDS` mask words per row of the tile.
    pub fn shared_words(&self) -> u32 {
        self.halo[0] * self.halo[1] * (BITS_WORDS + 2) + self.tile_z * self.tile_y * BITS_WORDS
    }

    /// The number of work units (tiles of all items).
    pub fn units(&self) -> u64 {
        self.items * self.tiles[0] as u64 * self.tiles[1] as u64 * self.tiles[2] as u64
    }
}

/// [`BinaryBitsArgs::x_runs`]: the element holds `(0, 0, -1)`, so a
/// deciding value moves toward higher x (the position after it takes it).
pub const X_RUNS_UP: u32 = 1;
/// [`BinaryBitsArgs::x_runs`]: the element holds `(0, 0, +1)`, so a
/// deciding value moves toward lower x.
pub const X_RUNS_DOWN: u32 = 2;

/// The deciding values of a row of 128 positions (`seeds`, bit `p` for
/// position `p`) spread along x through `runs` (the positions that may
/// take them): toward higher positions with [`X_RUNS_UP`], lower with
/// [`X_RUNS_DOWN`], a step at a time for as long as the next position is
/// in `runs`, as repeated steps along x would spread them (a Kogge–Stone
/// fill: 7 doublings per direction). Positions outside `runs` keep their
/// bit.
#[inline(always)]
pub fn fill_x_runs(seeds: u128, runs: u128, directions: u32) -> u128 {
    let mut filled = seeds;
    if directions & X_RUNS_UP != 0 {
        let (mut g, mut m) = (filled, runs);
        let mut shift = 1;
        while shift < 128 {
            g |= m & (g << shift);
            m &= m << shift;
            shift *= 2;
        }
        filled = g;
    }
    if directions & X_RUNS_DOWN != 0 {
        let (mut g, mut m) = (filled, runs);
        let mut shift = 1;
        while shift < 128 {
            g |= m & (g >> shift);
            m &= m >> shift;
            shift *= 2;
        }
        filled = g;
    }
    filled
}

/// The 4 bits of 4 consecutive positions held as bytes (little-endian:
/// the lowest byte is the first position): bit `i` is set when byte `i` is
/// non-zero.
#[inline(always)]
pub fn bytes_nibble(bytes: u32) -> u32 {
    ((bytes & 0xff != 0) as u32)
        | (((bytes & 0xff00 != 0) as u32) << 1)
        | (((bytes & 0x00ff_0000 != 0) as u32) << 2)
        | (((bytes & 0xff00_0000 != 0) as u32) << 3)
}

/// The 4 bytes (0 or 1, little-endian) of positions `4 g..4 g + 4` of a
/// word of 32 positions: [`bytes_nibble`]'s inverse for group lane `g`
/// (`0..8`).
#[inline(always)]
pub fn word_bytes(word: u32, g: u32) -> u32 {
    let nibble = (word >> (4 * g)) & 0xf;
    (nibble & 1) | ((nibble >> 1) & 1) << 8 | ((nibble >> 2) & 1) << 16 | ((nibble >> 3) & 1) << 24
}

/// The 32 bits a row reads at x offset `ox` (`-32..=32`) from its three
/// words `(before, own, after)`: bit `p` is the value at `x0 + p + ox`.
#[inline(always)]
pub fn bits_window(before: u32, own: u32, after: u32, ox: i32) -> u32 {
    if ox >= 0 {
        ((((after as u64) << 32) | own as u64) >> ox as u32) as u32
    } else {
        ((((own as u64) << 32) | before as u64) >> (32 + ox) as u32) as u32
    }
}

/// Arguments of `binary_bits`: [`BinaryTileArgs`]' filter on rows of bits,
/// 32 positions per operation.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BinaryBitsArgs {
    /// The tiles.
    pub geometry: BitsGeometry,
    /// 1: any (dilation); 0: every (erosion).
    pub dilation: u32,
    /// The value outside the array (0 or 1).
    pub border: u32,
    /// 1: repeat inside the tile until it is stable (elements holding offset 0 only).
    pub local: u32,
    /// With `local`: which x offsets of the element's own row let each
    /// step also fill whole runs along x ([`X_RUNS_UP`], [`X_RUNS_DOWN`];
    /// 0: none), so that a tile settles in fewer steps.
    pub x_runs: u32,
    /// `elements` row offsets in the halo (`oz * halo_y + oy`).
    pub element_rows: *const i32,
    /// `elements` x offsets (`-32..=32`).
    pub element_x: *const i32,
    /// `items * z * y * x` values, 0 or 1.
    pub input: *const u8,
    /// The same (0: keep the input), or null.
    pub mask: *const u8,
    /// Out: `items * z * y * x` values.
    pub output: *mut u8,
    /// One word, set to 1 when some output differs from its input.
    pub changed: *mut u32,
}

impl_kernel_args!(
    BinaryBitsArgs => BinaryBits {
        geometry, dilation, border, local, x_runs, element_rows, element_x, input, mask, output, changed
    },
);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn boundary_modes_extend_as_scipy_documents() {
        // a b c d at 0..4, read from -3 to 6.
        let read = |mode| (-3..7).map(|j| boundary_index(j, 4, mode)).collect::<Vec<_>>();
        let some = |v: &[i64]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        assert_eq!(read(MODE_REFLECT), some(&[2, 1, 0, 0, 1, 2, 3, 3, 2, 1]));
        assert_eq!(read(MODE_MIRROR), some(&[3, 2, 1, 0, 1, 2, 3, 2, 1, 0]));
        assert_eq!(read(MODE_NEAREST), some(&[0, 0, 0, 0, 1, 2, 3, 3, 3, 3]));
        assert_eq!(read(MODE_WRAP), some(&[1, 2, 3, 0, 1, 2, 3, 0, 1, 2]));
        assert_eq!(read(MODE_CONSTANT)[..3], [None, None, None]);
        assert_eq!(read(MODE_CONSTANT)[3..7], some(&[0, 1, 2, 3]));
        assert_eq!(boundary_index(-5, 1, MODE_MIRROR), Some(0));
        assert_eq!(boundary_index(9, 1, MODE_REFLECT), Some(0));
    }

    fn geometry(extent: &[u64], low: &[i64], high: &[i64]) -> MorphGeometry {
        let rank = extent.len();
        let mut g = MorphGeometry {
            rank: rank as u32,
            elements: 1,
            spatial: extent.iter().product(),
            items: 1,
            extent: [1; MORPH_MAX_RANK],
            stride: [0; MORPH_MAX_RANK],
            low: [0; MORPH_MAX_RANK],
            high: [0; MORPH_MAX_RANK],
        };
        let mut stride = 1;
        for axis in (0..rank).rev() {
            g.extent[axis] = extent[axis];
            g.stride[axis] = stride;
            stride *= extent[axis];
            g.low[axis] = low[axis];
            g.high[axis] = high[axis];
        }
        g
    }

    #[test]
    fn x_runs_fill_as_repeated_steps() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..3000 {
            let wide = |a: u64, b: u64| (a as u128) << 64 | b as u128;
            let seeds = wide(next() & next() & next(), next() & next() & next());
            let runs = if case % 7 == 0 { u128::MAX } else { wide(next() | next(), next() | next()) };
            let directions = (case % 3 + 1) as u32;
            // Steps along x until nothing changes: a position in runs takes
            // a deciding value from its neighbour below (up) or above (down).
            let mut want = seeds;
            loop {
                let mut step = want;
                if directions & X_RUNS_UP != 0 {
                    step |= runs & (want << 1);
                }
                if directions & X_RUNS_DOWN != 0 {
                    step |= runs & (want >> 1);
                }
                if step == want {
                    break;
                }
                want = step;
            }
            assert_eq!(fill_x_runs(seeds, runs, directions), want, "case {case}");
        }
        assert_eq!(fill_x_runs(1, u128::MAX, X_RUNS_UP), u128::MAX);
        assert_eq!(fill_x_runs(1 << 127, u128::MAX, X_RUNS_DOWN), u128::MAX);
        assert_eq!(fill_x_runs(0b1, 0b1110_0110, X_RUNS_UP), 0b111);
    }

    #[test]
    fn words_go_to_bytes_and_back() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let word = state as u32;
            // Each group lane's bytes, as memory holds them, give its nibble back.
            let mut again = 0u32;
            for g in 0..8 {
                let bytes = word_bytes(word, g);
                let memory = bytes.to_le_bytes();
                for (i, &b) in memory.iter().enumerate() {
                    assert_eq!(b as u32, (word >> (4 * g + i as u32)) & 1, "word {word:#x}, lane {g}, byte {i}");
                }
                again |= bytes_nibble(bytes) << (4 * g);
            }
            assert_eq!(again, word);
            // Any non-zero byte is a set bit.
            let bytes = (state >> 32) as u32;
            let want = (0..4).map(|i| (((bytes >> (8 * i)) & 0xff != 0) as u32) << i).sum::<u32>();
            assert_eq!(bytes_nibble(bytes), want, "bytes {bytes:#x}");
        }
    }

    #[test]
    fn bit_windows_shift_across_words() {
        let (before, own, after) = (0x8000_0001u32, 0x0000_00F0, 0x0000_0003);
        assert_eq!(bits_window(before, own, after, 0), own);
        assert_eq!(bits_window(before, own, after, 4), 0x3000_000F);
        // Position 30 reads x0 + 32: after's bit 0.
        assert_eq!(bits_window(before, own, after, 2), (own >> 2) | (1 << 30) | (1 << 31));
        assert_eq!(bits_window(before, own, after, 32), after);
        assert_eq!(bits_window(before, own, after, -32), before);
        // Position 0 reads x0 - 1: before's bit 31.
        assert_eq!(bits_window(before, own, after, -1), (own << 1) | 1);
        for ox in -32..=32 {
            for p in 0..32 {
                let x = p + ox + 32;
                let want = match x / 32 {
                    0 => before >> x,
                    1 => own >> (x - 32),
                    _ => after >> (x - 64),
                } & 1;
                assert_eq!((bits_window(before, own, after, ox) >> p) & 1, want, "ox {ox} p {p}");
            }
        }
    }

    #[test]
    fn coordinates_and_interior() {
        let g = geometry(&[3, 4, 5], &[-1, -1, -2], &[1, 0, 2]);
        assert_eq!(g.coordinates(0)[..3], [0, 0, 0]);
        assert_eq!(g.coordinates(59)[..3], [2, 3, 4]);
        assert_eq!(g.coordinates(5 * 4 + 5 + 2)[..3], [1, 1, 2]);
        assert!(g.interior(&g.coordinates(5 * 4 + 5 + 2)));
        assert!(!g.interior(&g.coordinates(5 * 4 + 5 + 1)));
        assert!(g.interior(&g.coordinates(5 * 4 + 3 * 5 + 2)));
        assert!(!g.interior(&g.coordinates(2 * 20 + 5 + 2)));
    }

    #[test]
    fn boundary_reads_map_every_axis() {
        let g = geometry(&[3, 4], &[-1, -1], &[1, 1]);
        let offsets = [-1i64, 1];
        let read = |c: [i64; 2], mode| {
            let mut coords = [0; MORPH_MAX_RANK];
            coords[..2].copy_from_slice(&c);
            g.boundary_read(&coords, 0, mode, |k| offsets[k])
        };
        assert_eq!(read([1, 1], MODE_CONSTANT), Some(2));
        assert_eq!(read([0, 1], MODE_CONSTANT), None);
        assert_eq!(read([0, 3], MODE_NEAREST), Some(3));
        assert_eq!(read([0, 3], MODE_WRAP), Some(2 * 4));
        assert_eq!(read([0, 3], MODE_REFLECT), Some(3));
    }

    /// Every output of a run is its window's minimum (or maximum), for
    /// windows of 5 to 44 values and 0 to 7 outputs asked for (whole runs
    /// from 5); no read falls past the run's windows, and a run reads at
    /// most `window + ROW_RUN - 1` values.
    #[test]
    fn row_runs_are_their_windows_best() {
        let mut state = 0x2f6b_91d3_4c07_a5e1u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        for case in 0..4000u32 {
            let window = ROW_RUN + next() % 40;
            let outputs = next() % (ROW_RUN + 3);
            let values: Vec<u32> = (0..ROW_RUN + window).map(|_| next() % [3, 50, 1000][case as usize % 3]).collect();
            let reads = core::cell::RefCell::new(Vec::new());
            let value = |j: u32| {
                reads.borrow_mut().push(j);
                values[j as usize]
            };
            for maximum in [false, true] {
                let pick = |a: u32, b: u32| if maximum { a.max(b) } else { a.min(b) };
                let identity = if maximum { 0 } else { u32::MAX };
                let got = row_run(window, outputs, identity, value, pick);
                for (i, &g) in got.iter().enumerate() {
                    let i = i as u32;
                    let want = if i < outputs {
                        let w = &values[i as usize..(i + window) as usize];
                        if maximum {
                            *w.iter().max().unwrap()
                        } else {
                            *w.iter().min().unwrap()
                        }
                    } else {
                        identity
                    };
                    assert_eq!(g, want, "case {case}, window {window}, outputs {outputs}, output {i}");
                }
            }
            let bound = outputs.min(ROW_RUN) + window - 1;
            assert!(reads.borrow().iter().all(|&j| j < bound), "case {case}: a read past the run's windows");
            let per_run = 2 * (window + ROW_RUN - 1);
            assert!(outputs == 0 || reads.borrow().len() as u32 <= per_run, "case {case}: reads per run");
        }
    }

    /// A staged pass's units and staging: 32 lines to a unit along a
    /// strided axis (the items and the axes before it counted as lines),
    /// one line along the last; the halo's rows counted against the 6 KB
    /// per warp.
    #[test]
    fn line_staging_units_and_fits() {
        let mut g = geometry(&[5, 70, 40], &[0, 0, 0], &[0, 0, 0]);
        g.items = 3;
        let y = LineStaging::new(&g, 1, 16);
        assert_eq!((y.outer, y.extent, y.inner, y.chunks(), y.tiles()), (15, 70, 40, 5, 2));
        assert_eq!(y.units(), 15 * 5 * 2);
        assert_eq!(y.staged_values(7), (16 + 6) * 32);
        assert!(y.fits(7, 4) && y.fits(33, 4) && !y.fits(34, 4), "48 rows of 32 float32");
        assert!(y.fits(9, 8) && !y.fits(10, 8), "24 rows of 32 float64");
        assert!(!y.fits(0, 4), "an empty window");
        let x = LineStaging::new(&g, 2, 1024);
        assert_eq!((x.outer, x.inner, x.chunks(), x.tiles(), x.units()), (3 * 5 * 70, 1, 1, 1, 1050));
        assert!(x.fits(513, 4) && !x.fits(514, 4), "1536 float32 values");
        let z = LineStaging::new(&g, 0, 0);
        assert_eq!((z.outer, z.inner, z.chunk), (3, 2800, 1), "a chunk of at least one");
        let empty = LineStaging::new(&geometry(&[0, 4], &[0, 0], &[0, 0]), 1, 8);
        assert_eq!(empty.units(), 0);
    }

    /// The box kernels' shared memory: the plane, its rows and the ring
    /// for a 3 × 3 × 3 box; windows that are empty, too wide for the
    /// loads or too large for the memory are refused without wrapping.
    #[test]
    fn box_shared_memory_fits_or_is_refused() {
        let g = |low: [i32; 3], high: [i32; 3]| BoxGeometry {
            items: 1,
            extent: [64, 64, 64],
            chunk_z: 32,
            low,
            high,
            tiles: [2, 8, 1],
            plus: 0,
            centre: [0; 3],
            reserved: 0,
        };
        let cube = g([-1; 3], [1; 3]);
        assert_eq!(cube.plane_len(), 10 * 66);
        assert_eq!(cube.shared_bytes(4), Some((10 * 66 + 10 * 64 + 3 * 8 * 64) * 4));
        assert_eq!(g([0, 0, 1], [0, 0, 0]).shared_bytes(4), None);
        assert_eq!(g([0, 0, i32::MIN], [0, 0, i32::MAX]).shared_bytes(4), None);
        assert_eq!(g([0, 0, 0], [0, 0, 2047]).shared_bytes(4), None, "a plane beyond the loads");
        assert_eq!(g([0, 0, 0], [40, 0, 0]).shared_bytes(8), None, "a ring beyond the memory");
        // A plus keeps a second ring, and its centre lies in the window.
        let plus = BoxGeometry { plus: 1, ..cube };
        assert_eq!(plus.shared_bytes(4), Some((10 * 66 + 10 * 64 + 2 * 3 * 8 * 64) * 4));
        assert_eq!(BoxGeometry { centre: [0, 2, 0], ..plus }.shared_bytes(4), None);
    }

    /// The wide warp kernels take boxes (not pluses) of windows 1 to 7 with
    /// one longer than 3, loading the columns past the warp; the other warp
    /// kernels keep windows up to 3.
    #[test]
    fn wide_warp_geometries() {
        let g = |low: [i32; 3], high: [i32; 3]| WarpGeometry {
            items: 1,
            extent: [64, 64, 64],
            chunk_z: 8,
            low,
            high,
            tiles: [8, 8, 2],
            rows: WARP_ROWS_WIDE,
            plus: 0,
            centre: [0; 3],
            past: 1,
        };
        let seven = g([-3; 3], [3; 3]);
        assert!(seven.wide() && !seven.windows_fit());
        assert!(g([0, -1, -2], [0, 1, 2]).wide(), "1 × 3 × 5");
        assert!(g([0, 0, -3], [0, 0, 3]).wide(), "a row of 7");
        assert!(!g([-1; 3], [1; 3]).wide(), "3 × 3 × 3: the other warp kernels'");
        assert!(g([-1; 3], [1; 3]).windows_fit());
        assert!(!g([0, 0, -4], [0, 0, 3]).wide(), "a window of 8");
        assert!(!g([0, 0, 1], [0, 0, 0]).wide(), "an empty window");
        assert!(!WarpGeometry { plus: 1, ..seven }.wide(), "a plus");
        assert!(!WarpGeometry { past: 0, ..seven }.wide(), "no columns past the warp");
        assert_eq!(seven.outputs_x(), WARP_X);
    }
}

/// `fill_holes_edges`: the background's edges for `binary_fill_holes` by
/// connected components (scipy's cross: faces only), in the watershed's
/// edge masks (`crate::watershed`'s direction bits), so that its
/// components kernels join them.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FillHolesEdgesArgs {
    /// One byte per element of `dims`, non-zero: foreground.
    pub input: *const u8,
    /// The array's extent (rank 1 and 2 as leading extents of 1).
    pub dims: crate::Dims3,
    /// One byte per element: for a background element, the faces to its
    /// previous background neighbours along z, y and x; 0 for foreground.
    pub edges: *mut u8,
}

/// `fill_holes_reach`: marks the components of the background that touch
/// the array's border.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FillHolesReachArgs {
    /// One byte per element of `dims`, non-zero: foreground.
    pub input: *const u8,
    /// The array's extent.
    pub dims: crate::Dims3,
    /// The first axis (0 = z, 1 = y, 2 = x) that belongs to the array: the
    /// axes before it are the leading extents of 1 of rank 1 and 2, whose
    /// faces are not borders.
    pub first_axis: u32,
    /// Reserved, 0 (keeps the pointers 8-byte aligned).
    pub reserved: u32,
    /// The components forest (`uf_tile_faces` has run): one `u32` per
    /// element, each tree rooted at its smallest element.
    pub parent: *const u32,
    /// One byte per element, 0 at the launch: set to 1 at the root of each
    /// background component with an element on a border.
    pub reached: *mut u8,
}

/// `fill_holes_output`: `binary_fill_holes`' result: foreground, or
/// background whose component does not reach the border.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FillHolesOutputArgs {
    /// One byte per element, non-zero: foreground.
    pub input: *const u8,
    /// The number of elements.
    pub n: u64,
    /// The components forest, as for [`FillHolesReachArgs`].
    pub parent: *const u32,
    /// The marks of [`FillHolesReachArgs`].
    pub reached: *const u8,
    /// One byte per element: 1 (filled) or 0.
    pub output: *mut u8,
}

impl_kernel_args!(
    FillHolesEdgesArgs => FillHolesEdges { input, dims, edges },
    FillHolesReachArgs => FillHolesReach { input, dims, first_axis, reserved, parent, reached },
    FillHolesOutputArgs => FillHolesOutput { input, n, parent, reached, output },
);
