//! Launch constants, argument structs and float64 math of the batched
//! Sinkhorn kernels (entropic optimal transport between `n` pairs of
//! histograms of `d` bins that share one `d × d` cost matrix).
//!
//! Layouts: matrices are row-major `d × d`; the batch's histograms,
//! scalings and potentials are row-major `n × d` (pair `t`, bin `i` at
//! `t * d + i`).

/// Threads per block of the tile kernels: 16 along the rows (bins `i`)
/// by 16 along the pairs.
pub const TRANSPORT_THREADS: u32 = 256;
/// Rows (bins `i`) and pairs of a block's output tile: each thread owns
/// [`TRANSPORT_MICRO`] × [`TRANSPORT_MICRO`] outputs, rows `i0 + 4 ti + a`
/// and pairs `q0 + 4 tq + b`.
pub const TRANSPORT_BLOCK: u32 = 64;
/// Outputs per thread along each side of the tile.
pub const TRANSPORT_MICRO: u32 = 4;
/// Columns `j` staged in shared memory per step.
pub const TRANSPORT_CHUNK: u32 = 16;
/// Shared memory of a tile kernel, in elements: a chunk of the matrix rows
/// and a chunk of the vectors, each `CHUNK × (BLOCK + 4)` (four elements of
/// padding per column: aligned vector reads, few bank conflicts).
pub const TRANSPORT_SHARED_ELEMENTS: u32 = 2 * TRANSPORT_CHUNK * (TRANSPORT_BLOCK + 4);

/// Rows (bins) and pairs of the wide scaling kernel's output tile
/// (`ot_wide_scaling_f32`): each of [`TRANSPORT_THREADS`] threads owns 8 × 8
/// outputs, rows `i0 + 4 ti + a` and `i0 + 64 + 4 ti + a` (`a < 4`) and
/// pairs likewise.
pub const TRANSPORT_WIDE_BLOCK: u32 = 128;
/// Columns `j` the wide scaling kernel stages in shared memory per step.
pub const TRANSPORT_WIDE_CHUNK: u32 = 16;
/// Values of one plane of a wide chunk: the TF32 parts (`x ≈ big +
/// small`, one plane each) of [`TRANSPORT_WIDE_CHUNK`] columns of
/// [`TRANSPORT_WIDE_BLOCK`] matrix rows or pairs, in the order the tensor
/// cores' operands take them ([`wide_row_slot`], [`wide_pair_slot`]).
pub const TRANSPORT_WIDE_PLANE: u32 = TRANSPORT_WIDE_CHUNK * TRANSPORT_WIDE_BLOCK;
/// Chunks the wide scaling kernel holds in shared memory at once: the one
/// its tensor cores read and the next ones, copied there asynchronously
/// (`cp.async`) while it computes.
pub const TRANSPORT_WIDE_STAGES: u32 = 3;
/// Shared memory of the wide scaling kernel, in bytes: per stage, a chunk
/// of the matrix rows and one of the vectors, each as its two planes
/// ([`TRANSPORT_WIDE_PLANE`]). 96 KiB: within the opt-in limit of every
/// device from compute capability 8.0 on.
pub const TRANSPORT_WIDE_SHARED_BYTES: u32 = TRANSPORT_WIDE_STAGES * 4 * TRANSPORT_WIDE_PLANE * 4;

/// The fewest pairs for which float32 scaling-domain half-steps use the
/// wide kernel instead of the 64 × 64 tiles. Measured on an H200 at
/// d = 1024 (100 iterations): the wide kernel takes 3.71 ms at n = 64
/// against the tiles' 4.40 ms, and 16.2 ms against 19+ ms at n = 1024.
pub const TRANSPORT_WIDE_MIN_PAIRS: u64 = 64;

/// Operand planes in the wide kernel's order for its matrix rows
/// ([`wide_row_slot`]: tiles of [`TRANSPORT_WIDE_BLOCK`] rows, chunks of
/// [`TRANSPORT_WIDE_CHUNK`] columns).
pub const PLANES_WIDE_ROWS: u32 = 0;
/// Operand planes in the wide kernel's order for its vectors
/// ([`wide_pair_slot`]).
pub const PLANES_WIDE_PAIRS: u32 = 1;
/// Operand planes in the warpgroup kernel's order for its matrix rows
/// ([`wgmma_slot`]: tiles of [`TRANSPORT_WGMMA_ROWS`] rows, chunks of
/// [`TRANSPORT_WGMMA_CHUNK`] columns).
pub const PLANES_WGMMA_ROWS: u32 = 2;
/// Operand planes in the warpgroup kernel's order for its vectors
/// ([`wgmma_slot`]: tiles of [`TRANSPORT_WGMMA_PAIRS`] pairs).
pub const PLANES_WGMMA_PAIRS: u32 = 3;

/// Rows (or pairs) per tile of operand planes in `layout` (one of the
/// `PLANES_*` constants).
#[inline(always)]
pub fn planes_tile(layout: u32) -> u64 {
    match layout {
        PLANES_WGMMA_ROWS => TRANSPORT_WGMMA_ROWS as u64,
        PLANES_WGMMA_PAIRS => TRANSPORT_WGMMA_PAIRS as u64,
        _ => TRANSPORT_WIDE_BLOCK as u64,
    }
}

/// Columns per chunk of operand planes in `layout`.
#[inline(always)]
pub fn planes_chunk(layout: u32) -> u64 {
    match layout {
        PLANES_WGMMA_ROWS | PLANES_WGMMA_PAIRS => TRANSPORT_WGMMA_CHUNK as u64,
        _ => TRANSPORT_WIDE_CHUNK as u64,
    }
}

/// Values of one plane (one tile's chunk, big or small parts) in `layout`.
#[inline(always)]
pub fn planes_plane(layout: u32) -> u64 {
    planes_tile(layout) * planes_chunk(layout)
}

/// Values of the tensor-core kernels' operand planes of `rows` matrix rows
/// (or pairs) of `d` columns in `layout`: for each tile and each chunk of
/// columns, the big plane then the small one ([`planes_offset`]), zero
/// outside the rows and columns.
#[inline(always)]
pub fn planes_len(rows: u64, d: u64, layout: u32) -> u64 {
    rows.div_ceil(planes_tile(layout)) * d.div_ceil(planes_chunk(layout)) * 2 * planes_plane(layout)
}

/// Where the big plane of tile `tile`, chunk `chunk` starts in operand
/// planes of `chunks` chunks per tile in `layout` (the small plane follows
/// it): the chunks of a tile lie in column order, one after the other, so
/// that a chunk is one contiguous copy into shared memory.
#[inline(always)]
pub fn planes_offset(tile: u64, chunk: u64, chunks: u64, layout: u32) -> u64 {
    (tile * chunks + chunk) * 2 * planes_plane(layout)
}

/// Where the big part of row (or pair) `r`, column `j` lies in operand
/// planes of `d` columns in `layout`; its small part lies
/// [`planes_plane`] values further on.
#[inline(always)]
pub fn planes_index(r: u64, j: u64, d: u64, layout: u32) -> u64 {
    let (tile, chunk) = (planes_tile(layout), planes_chunk(layout));
    let (rr, jj) = ((r % tile) as usize, (j % chunk) as usize);
    let slot = match layout {
        PLANES_WIDE_ROWS => wide_row_slot(rr, jj),
        PLANES_WIDE_PAIRS => wide_pair_slot(rr, jj),
        _ => wgmma_slot(rr, jj),
    };
    planes_offset(r / tile, j / chunk, d.div_ceil(chunk), layout) + slot as u64
}

/// Rows (bins) of the warpgroup kernel's output tile
/// (`ot_wgmma_scaling_f32`): one warpgroup's `m64` product.
pub const TRANSPORT_WGMMA_ROWS: u32 = 64;
/// Pairs of the warpgroup kernel's output tile: the product's `n128`.
pub const TRANSPORT_WGMMA_PAIRS: u32 = 128;
/// Columns `j` the warpgroup kernel stages per chunk (four `k8` steps).
pub const TRANSPORT_WGMMA_CHUNK: u32 = 32;
/// Threads of a warpgroup kernel block: one warpgroup.
pub const TRANSPORT_WGMMA_THREADS: u32 = 128;
/// Chunks the warpgroup kernel holds in shared memory at once: the one
/// its tensor cores read and the next, copied there by `cp.async` while
/// they work.
pub const TRANSPORT_WGMMA_STAGES: u32 = 2;
/// Shared memory of the warpgroup kernel, in bytes: per stage, the chunk's
/// matrix rows and vectors as two planes each ([`PLANES_WGMMA_ROWS`],
/// [`PLANES_WGMMA_PAIRS`]); two blocks fit a Hopper multiprocessor.
pub const TRANSPORT_WGMMA_SHARED_BYTES: u32 =
    TRANSPORT_WGMMA_STAGES * 2 * (TRANSPORT_WGMMA_ROWS + TRANSPORT_WGMMA_PAIRS) * TRANSPORT_WGMMA_CHUNK * 4;

/// Where row `r`, column `j` of a staged plane goes (in 32-bit values):
/// the `wgmma` operands' canonical K-major layout without swizzling. Core
/// matrices of 8 rows × 4 columns (8 rows of 16 bytes, 128 bytes in all)
/// lie along the columns 128 bytes apart (the descriptors' leading byte
/// offset) and along the rows `TRANSPORT_WGMMA_CHUNK / 4` core matrices
/// apart (the stride byte offset, [`WGMMA_STRIDE_BYTES`]).
#[inline(always)]
pub fn wgmma_slot(r: usize, j: usize) -> usize {
    ((r / 8) * (TRANSPORT_WGMMA_CHUNK as usize / 4) + j / 4) * 32 + (r % 8) * 4 + j % 4
}

/// Bytes between core matrices adjacent along the columns (`K`) of a
/// staged plane ([`wgmma_slot`]).
pub const WGMMA_LEADING_BYTES: u64 = 128;
/// Bytes between core matrices adjacent along the rows (`M` or `N`) of a
/// staged plane ([`wgmma_slot`]).
pub const WGMMA_STRIDE_BYTES: u64 = 128 * (TRANSPORT_WGMMA_CHUNK as u64 / 4);

/// The shared-memory matrix descriptor of a `wgmma` operand whose first
/// core matrix starts at shared address `address` (16-byte aligned), laid
/// out as [`wgmma_slot`] (no swizzling): the address, the leading and the
/// stride byte offsets, each in 16-byte units.
#[inline(always)]
pub fn wgmma_descriptor(address: u32) -> u64 {
    let field = |bytes: u64| (bytes >> 4) & 0x3fff;
    field(address as u64) | field(WGMMA_LEADING_BYTES) << 16 | field(WGMMA_STRIDE_BYTES) << 32
}

/// Pairs one warp of a row kernel handles together (its lanes stride over
/// one matrix row and keep one sum per pair).
pub const TRANSPORT_ROW_PAIRS: u32 = 8;
/// The most pairs for which the half-steps use the row kernels (one warp
/// per (row, [`TRANSPORT_ROW_PAIRS`] pairs), the update in the same
/// kernel) instead of the tile kernels. Measured on the H200 (d = 1024,
/// 100 scaling iterations): one pair 2.22 ms by rows against 3.50 ms by
/// tiles, four pairs 3.93 against 3.49 ms, sixteen 5.50 against 3.55 ms.
pub const TRANSPORT_ROWS_MAX_PAIRS: u64 = 1;

/// Dynamic shared memory of the log-domain tile kernel, in elements: the
/// chunk of matrix rows and of vectors as staged, the same as powers above
/// their bounds, and each row's and pair's bound.
pub const TRANSPORT_LOG_SHARED_ELEMENTS: u32 = 4 * TRANSPORT_CHUNK * (TRANSPORT_BLOCK + 4) + 2 * TRANSPORT_BLOCK;

/// Where matrix row `r`, column `j` of a chunk goes in its plane: the
/// tensor cores' operand order (the `a` operand of `mma.sync.m16n8k8` in TF32), so that lane `l` of a
/// warp reads its four values of 16-row operand `r / 16` of step `j / 8`
/// with one 16-byte read at `((j / 8) 8 + r / 16) 128 + 4 l`.
#[inline(always)]
pub fn wide_row_slot(r: usize, j: usize) -> usize {
    let (step, jj) = (j / 8, j % 8);
    let lane = r % 8 * 4 + jj % 4;
    ((step * (TRANSPORT_WIDE_BLOCK as usize / 16) + r / 16) * 32 + lane) * 4 + r % 16 / 8 + 2 * (jj / 4)
}

/// Where pair `p`, column `j` of a chunk goes in its plane: the tensor
/// cores' operand order (its `b` operand), so that lane `l` reads its two
/// values of 8-pair operand `p / 8` of step `j / 8` with one 8-byte read at
/// `((j / 8) 16 + p / 8) 64 + 2 l`.
#[inline(always)]
pub fn wide_pair_slot(p: usize, j: usize) -> usize {
    let (step, jj) = (j / 8, j % 8);
    let lane = p % 8 * 4 + jj % 4;
    ((step * (TRANSPORT_WIDE_BLOCK as usize / 8) + p / 8) * 32 + lane) * 2 + jj / 4
}

/// The block of a tile kernel's launch: `(row tile, pair tile, split)`
/// for block index `block` with `row_tiles` tiles of rows and
/// `pair_tiles` of pairs.
#[inline(always)]
pub fn tile_of_block(block: u64, row_tiles: u64, pair_tiles: u64) -> (u64, u64, u64) {
    let tiles = row_tiles * pair_tiles;
    (block % tiles % row_tiles, block % tiles / row_tiles, block / tiles)
}

/// The chunks `[first, end)` of split `split` of `splits` over `chunks`
/// chunks of [`TRANSPORT_CHUNK`] columns: as even as integers allow, in
/// order, together covering every chunk once.
#[inline(always)]
pub fn chunks_of_split(split: u64, splits: u64, chunks: u64) -> (u64, u64) {
    (split * chunks / splits, (split + 1) * chunks / splits)
}

/// `ln 2` split so that `k * LN2_HI` is exact for `|k| < 2^20`.
const LN2_HI: f64 = f64::from_bits(core::f64::consts::LN_2.to_bits() & 0xFFFF_FFFF_F000_0000);
/// The rest of `ln 2` after [`LN2_HI`], to float64 precision (from the true
/// value, not from `LN_2 - LN2_HI`, which would lose `LN_2`'s own rounding).
const LN2_LO: f64 = 2.789_766_808_773_754_5e-8;

/// `e^x` in float64 without the standard library (the device has no `exp`
/// instruction for float64): `x = k ln 2 + r` with `|r| <= ln 2 / 2`, then
/// the Taylor series of `e^r` to degree 14 (its remainder is below 1e-18),
/// scaled by `2^k`. Within a few units in the last place of the true value
/// (tested against `f64::exp`); `e^-inf = 0`, `e^inf = inf`, NaN stays NaN.
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.782_712_893_384 {
        return f64::INFINITY;
    }
    if x < -745.2 {
        return 0.0;
    }
    let kf = round_f64(x * core::f64::consts::LOG2_E);
    let k = kf as i64;
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    // Horner's scheme for sum_{j=0..=14} r^j / j!, by multiplications only.
    let mut p = EXP_TAYLOR[14];
    let mut j = 14;
    while j > 0 {
        j -= 1;
        p = p * r + EXP_TAYLOR[j];
    }
    scale_by_power_of_two(p, k)
}

/// `1 / j!` for `j = 0..=14`: [`exp_f64`]'s Taylor coefficients (each
/// factorial is exact in float64; each coefficient rounded once).
const EXP_TAYLOR: [f64; 15] = {
    let mut c = [0.0; 15];
    let mut factorial = 1.0;
    let mut j = 0;
    while j < 15 {
        c[j] = 1.0 / factorial;
        j += 1;
        factorial *= j as f64;
    }
    c
};

/// `1 / (2 k + 1)` for `k = 0..=11`: [`ln_f64`]'s series coefficients.
const ATANH_SERIES: [f64; 12] = {
    let mut c = [0.0; 12];
    let mut k = 0;
    while k < 12 {
        c[k] = 1.0 / (2 * k + 1) as f64;
        k += 1;
    }
    c
};

/// Rounds to the nearest integer (half away from zero), without `std`.
#[inline(always)]
fn round_f64(x: f64) -> f64 {
    let t = x as i64 as f64; // truncation toward zero
    let d = x - t;
    if d >= 0.5 {
        t + 1.0
    } else if d <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// `x * 2^k` for the `k` that [`exp_f64`] meets (`-1080 < k < 1025`), in two
/// steps so that neither factor overflows or underflows on its own.
#[inline(always)]
fn scale_by_power_of_two(x: f64, k: i64) -> f64 {
    let half = k / 2;
    let rest = k - half;
    x * power_of_two(half) * power_of_two(rest)
}

/// `2^k` for `-1022 <= k <= 1023` (normal numbers), else its nearest
/// bound (callers split their exponent so that this suffices).
#[inline(always)]
fn power_of_two(k: i64) -> f64 {
    let k = k.clamp(-1022, 1023);
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `ln x` in float64 without the standard library: `x = m 2^e` with
/// `m` in `[sqrt(1/2), sqrt(2))`, `ln m = 2 atanh(s)`, `s = (m - 1) / (m + 1)`
/// (`|s| < 0.172`), summed to `s^23` (remainder below 1e-18). Within a few
/// units in the last place; `ln 0 = -inf`, negative or NaN gives NaN,
/// `ln inf = inf`. Subnormal inputs are scaled into the normal range first.
#[inline(always)]
pub fn ln_f64(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x == f64::INFINITY {
        return x;
    }
    let (x, extra) = if x < f64::MIN_POSITIVE { (x * power_of_two(60), -60i64) } else { (x, 0) };
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7FF) as i64 - 1023 + extra;
    let mut m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | (1023u64 << 52));
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    // 2 * (s + s^3/3 + ... + s^23/23), by Horner in z.
    let mut p = ATANH_SERIES[11];
    let mut k = 11;
    while k > 0 {
        k -= 1;
        p = p * z + ATANH_SERIES[k];
    }
    let e = e as f64;
    e * LN2_HI + (2.0 * s * p + e * LN2_LO)
}

/// Sinkhorn arguments of both float types.
macro_rules! transport_args {
    ($real:ty, $prepare:ident, $check:ident, $pair_stats:ident, $fill:ident, $potentials:ident, $tile_scaling:ident, $tile_log:ident, $tile_cost:ident,
     $finish_scaling:ident, $finish_log:ident, $finish_sum:ident, $rows_scaling:ident, $rows_log:ident) => {
        /// `ot_rows_scaling_*`: for every pair `t` and bin `i`, `s =
        /// sum_j op[i][j] x_in[t][j]`, then `x_out[t][i] = marginal[t][i] /
        /// s` (0 where the marginal is 0); with `err` not null, first
        /// `err[t][i] = |x_out[t][i] s - marginal[t][i]|`. For few pairs.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $rows_scaling {
            /// `d * d` values: the Gibbs kernel or its transpose.
            pub op: *const $real,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// `n * d` values: the other side's scalings.
            pub x_in: *const $real,
            /// `n * d` values: this side's histograms.
            pub marginal: *const $real,
            /// `n * d` values, read then written: this side's scalings.
            pub x_out: *mut $real,
            /// `n * d` writable values, or null.
            pub err: *mut $real,
        }

        /// `ot_rows_log_*`: for every pair `t` and bin `i`, `l =
        /// logsumexp_j((p_in[t][j] - c[i][j]) / reg)`, then `p_out[t][i] =
        /// reg ln marginal[t][i] - reg l` (-inf where the marginal is 0);
        /// with `err` not null, first `err[t][i] = |e^(p_out[t][i] / reg +
        /// l) - marginal[t][i]|`. The terms are taken as `(p_in - c) scale`
        /// in the base of the log kernel's arguments. For few pairs.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $rows_log {
            /// `d * d` values: the cost matrix or its transpose.
            pub c: *const $real,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// The entropic regularisation (> 0).
            pub reg: $real,
            /// The factor of the terms.
            pub scale: $real,
            /// `n * d` values: the other side's potentials.
            pub p_in: *const $real,
            /// `n * d` values: this side's histograms.
            pub marginal: *const $real,
            /// `n * d` values, read then written: this side's potentials.
            pub p_out: *mut $real,
            /// `n * d` writable values, or null.
            pub err: *mut $real,
        }

        /// `ot_prepare_*`: `out[i][j] = f(m[i][j])` and `out_t[j][i]` the
        /// same, with `f(x) = e^(-x / reg)` when `exponentiate` is 1, else
        /// `f(x) = x` (a transpose).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $prepare {
            /// `d * d` values, row-major.
            pub m: *const $real,
            /// The number of bins.
            pub d: u64,
            /// The entropic regularisation (> 0).
            pub reg: $real,
            /// 1: the Gibbs kernel `e^(-m / reg)`; 0: `m` itself.
            pub exponentiate: u32,
            /// `d * d` writable values.
            pub out: *mut $real,
            /// `d * d` writable values: the transpose of `out`.
            pub out_t: *mut $real,
        }

        /// `ot_check_*`: sets bit 0 of `*flags` when some `a[k]` (`k <
        /// len`) is negative or not finite, bit 1 for `b`, bit 2 when some
        /// `m[k]` (`k < m_len`) is not finite; other bits are left alone.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $check {
            /// `len` values: the first histograms.
            pub a: *const $real,
            /// `len` values: the second histograms.
            pub b: *const $real,
            /// How many values `a` and `b` hold.
            pub len: u64,
            /// `m_len` values: the cost matrix.
            pub m: *const $real,
            /// How many values `m` holds.
            pub m_len: u64,
            /// One writable flag word.
            pub flags: *mut u32,
        }

        /// `ot_pair_stats_*`: for every pair `t`, `cost[t] = sum_i
        /// partial[t][i]` (summed in float64), and where `f_centred` is not
        /// null, `f_centred[t] = f[t] - mean` over the finite values of
        /// `f[t]` (-inf stays -inf; the mean of none is 0), the same for `g`.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $pair_stats {
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// `n * d` values: each (pair, row)'s part of the cost.
            pub partial: *const $real,
            /// `n * d` values: the first potentials.
            pub f: *const $real,
            /// `n * d` values: the second potentials.
            pub g: *const $real,
            /// `n` writable values.
            pub cost: *mut $real,
            /// `n * d` writable values, or null.
            pub f_centred: *mut $real,
            /// `n * d` writable values (when `f_centred` is not null).
            pub g_centred: *mut $real,
        }

        /// `ot_fill_*`: `x[k] = value` for `k < len` (the starting scalings).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $fill {
            /// `len` writable values.
            pub x: *mut $real,
            /// How many.
            pub len: u64,
            /// The value.
            pub value: $real,
        }

        /// `ot_potentials_*`: `x[k] = reg ln x[k]` for `k < len` (scalings
        /// to potentials; a zero scaling gives -inf).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $potentials {
            /// `len` values, read then written.
            pub x: *mut $real,
            /// How many.
            pub len: u64,
            /// The entropic regularisation (> 0).
            pub reg: $real,
        }

        /// `ot_tile_scaling_*`: for every pair `t`, bin `i` and split `s`,
        /// `partial[s][t][i] = sum_j op[i][j] x_in[t][j]` over split `s`'s
        /// columns (see [`chunks_of_split`]).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $tile_scaling {
            /// `d * d` values: the Gibbs kernel or its transpose.
            pub op: *const $real,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// `n * d` values: the other side's scalings.
            pub x_in: *const $real,
            /// How many parts the columns are split into (>= 1).
            pub splits: u64,
            /// `splits * n * d` writable values.
            pub partial: *mut $real,
        }

        /// `ot_tile_log_*`: for every pair `t`, bin `i` and split `s`, the
        /// log-sum-exp state of the terms `(p_in[t][j] - c[i][j]) scale`
        /// over split `s`'s columns: the largest term in `part_max` and
        /// the sum of the terms' powers above it in `part_sum` (`-inf` and
        /// 0 when every term is `-inf`). The base of the powers is 2 for
        /// float32 (`scale = log2(e) / reg`) and e for float64
        /// (`scale = 1 / reg`).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $tile_log {
            /// `d * d` values: the cost matrix or its transpose.
            pub c: *const $real,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// The factor of the terms (see above).
            pub scale: $real,
            /// `n * d` values: the other side's potentials.
            pub p_in: *const $real,
            /// How many parts the columns are split into (>= 1).
            pub splits: u64,
            /// `splits * n * d` writable values.
            pub part_max: *mut $real,
            /// `splits * n * d` writable values.
            pub part_sum: *mut $real,
        }

        /// `ot_tile_cost_*`: for every pair `t`, bin `i` and split `s`,
        /// `partial[s][t][i] = sum_j plan_ij (f[t][i] + g[t][j])` over
        /// split `s`'s columns, `plan_ij = base^((f[t][i] + g[t][j] -
        /// c[i][j]) scale)` (0 where a potential is -inf; base and scale as
        /// in the log kernel's arguments): row `i`'s part of pair `t`'s
        /// entropic cost `<plan, c> + reg sum plan ln plan`.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $tile_cost {
            /// `d * d` values: the cost matrix.
            pub c: *const $real,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// The factor of the exponents (see above).
            pub scale: $real,
            /// `n * d` values: the first side's potentials.
            pub f: *const $real,
            /// `n * d` values: the second side's potentials.
            pub g: *const $real,
            /// How many parts the columns are split into (>= 1).
            pub splits: u64,
            /// `splits * n * d` writable values.
            pub partial: *mut $real,
        }

        /// `ot_finish_scaling_*`: for every pair `t` and bin `i`, `s =
        /// sum_s partial[s][t][i]` (in split order), then `x_out[t][i] =
        /// marginal[t][i] / s` (0 where the marginal is 0); with `err` not
        /// null, first `err[t][i] = |x_out[t][i] s - marginal[t][i]|` (the
        /// marginal error of the scalings before the update).
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $finish_scaling {
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// The number of splits.
            pub splits: u64,
            /// `splits * n * d` values.
            pub partial: *const $real,
            /// `n * d` values: this side's histograms.
            pub marginal: *const $real,
            /// `n * d` values, read then written: this side's scalings.
            pub x_out: *mut $real,
            /// `n * d` writable values, or null.
            pub err: *mut $real,
        }

        /// `ot_finish_log_*`: for every pair `t` and bin `i`, the splits'
        /// states merged in split order into `l = logsumexp_j((p_in[t][j] -
        /// c[i][j]) / reg)`, then `p_out[t][i] = reg ln marginal[t][i] -
        /// reg l` (-inf where the marginal is 0); with `err` not null,
        /// first `err[t][i] = |e^(p_out[t][i] / reg + l) - marginal[t][i]|`.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $finish_log {
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// The entropic regularisation (> 0).
            pub reg: $real,
            /// The number of splits.
            pub splits: u64,
            /// `splits * n * d` values.
            pub part_max: *const $real,
            /// `splits * n * d` values.
            pub part_sum: *const $real,
            /// `n * d` values: this side's histograms.
            pub marginal: *const $real,
            /// `n * d` values, read then written: this side's potentials.
            pub p_out: *mut $real,
            /// `n * d` writable values, or null.
            pub err: *mut $real,
        }

        /// `ot_finish_sum_*`: `out[k] = sum_s partial[s][k]` for `k < len`,
        /// in split order.
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $finish_sum {
            /// The number of values per split.
            pub len: u64,
            /// The number of splits.
            pub splits: u64,
            /// `splits * len` values.
            pub partial: *const $real,
            /// `len` writable values.
            pub out: *mut $real,
        }
    };
}

transport_args!(
    f32,
    OtPrepareF32Args,
    OtCheckF32Args,
    OtPairStatsF32Args,
    OtFillF32Args,
    OtPotentialsF32Args,
    OtTileScalingF32Args,
    OtTileLogF32Args,
    OtTileCostF32Args,
    OtFinishScalingF32Args,
    OtFinishLogF32Args,
    OtFinishSumF32Args,
    OtRowsScalingF32Args,
    OtRowsLogF32Args
);
transport_args!(
    f64,
    OtPrepareF64Args,
    OtCheckF64Args,
    OtPairStatsF64Args,
    OtFillF64Args,
    OtPotentialsF64Args,
    OtTileScalingF64Args,
    OtTileLogF64Args,
    OtTileCostF64Args,
    OtFinishScalingF64Args,
    OtFinishLogF64Args,
    OtFinishSumF64Args,
    OtRowsScalingF64Args,
    OtRowsLogF64Args
);

/// Declares the argument structs of the tensor-core scaling kernels, which
/// share their fields.
macro_rules! tensor_scaling_args {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            /// The planes of the Gibbs kernel or of its transpose (the
            /// kernel's matrix-rows layout, `d` rows of `d` columns).
            pub op: *const u32,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// The planes of the other side's scalings (the kernel's vector
            /// layout, `n` rows of `d` columns).
            pub x_in: *const u32,
            /// How many parts the columns are split into (>= 1).
            pub splits: u64,
            /// `splits * n * d` writable values (unused with one split).
            pub partial: *mut f32,
            /// `n * d` values: this side's histograms.
            pub marginal: *const f32,
            /// `n * d` values: this side's scalings, read (for the errors) and
            /// written (with one split).
            pub x_out: *mut f32,
            /// `n * d` values, or null: the marginal errors of the old `x_out`.
            pub err: *mut f32,
            /// The planes of the new `x_out` (the kernel's vector layout;
            /// written with one split).
            pub x_out_planes: *mut u32,
        }
    )*};
}

tensor_scaling_args! {
    /// `ot_wide_scaling_f32`: a float32 scaling-domain half-step by tiles of
    /// [`TRANSPORT_WIDE_BLOCK`] rows and pairs, the columns split in chunks
    /// of [`TRANSPORT_WIDE_CHUNK`], both operands read as their TF32 planes
    /// ([`PLANES_WIDE_ROWS`], [`PLANES_WIDE_PAIRS`]): with one split, the
    /// products and the update (into `x_out` and its planes); with more,
    /// the products' partial sums (`ot_finish_wide_scaling_f32` updates).
    OtWideScalingF32Args;
    /// `ot_wgmma_scaling_f32`: the half-step of `ot_wide_scaling_f32` on
    /// Hopper's warpgroup products (`wgmma`, sm_90a only: the kernel traps
    /// in the modules built for other targets), by tiles of
    /// [`TRANSPORT_WGMMA_ROWS`] rows and [`TRANSPORT_WGMMA_PAIRS`] pairs,
    /// the columns split in chunks of [`TRANSPORT_WGMMA_CHUNK`], the
    /// operands' planes in [`PLANES_WGMMA_ROWS`] and
    /// [`PLANES_WGMMA_PAIRS`].
    OtWgmmaScalingF32Args;
}

/// `ot_finish_wide_scaling_f32`: as `ot_finish_scaling_f32` (the splits'
/// partial sums of the wide kernel, then the update), and the new `x_out`
/// written into its planes too.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OtFinishWideScalingF32Args {
    /// The number of pairs.
    pub n: u64,
    /// The number of bins.
    pub d: u64,
    /// The number of splits.
    pub splits: u64,
    /// `splits * n * d` values.
    pub partial: *const f32,
    /// `n * d` values: this side's histograms.
    pub marginal: *const f32,
    /// `n * d` values, read then written: this side's scalings.
    pub x_out: *mut f32,
    /// `n * d` writable values, or null.
    pub err: *mut f32,
    /// `planes_len(n, d, layout)` writable values: the planes of the new
    /// `x_out`.
    pub x_out_planes: *mut u32,
    /// The planes' layout: [`PLANES_WIDE_PAIRS`] or [`PLANES_WGMMA_PAIRS`].
    pub layout: u32,
}

/// `ot_split_planes_f32`: the tensor-core kernels' operand planes of
/// `rows` × `d` row-major values in `layout` ([`planes_len`]`(rows, d,
/// layout)` values, every one written: zero outside the values).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OtSplitPlanesF32Args {
    /// `rows * d` values.
    pub src: *const f32,
    /// The number of rows (matrix rows or pairs).
    pub rows: u64,
    /// The number of columns.
    pub d: u64,
    /// One of the `PLANES_*` layouts.
    pub layout: u32,
    /// `planes_len(rows, d, layout)` writable values.
    pub out: *mut u32,
}

/// Declares the argument structs of the single-launch scaling kernels:
/// the fields they share, then `$extra`.
macro_rules! single_launch_args {
    ($($(#[$doc:meta])* $real:ty: $args:ident { $($extra:tt)* })*) => {$(
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $args {
            /// `d * d` values: the Gibbs kernel.
            pub rows: *const $real,
            /// `d * d` values: its transpose.
            pub columns: *const $real,
            /// The number of pairs.
            pub n: u64,
            /// The number of bins.
            pub d: u64,
            /// `n * d` values: the first histograms.
            pub a: *const $real,
            /// `n * d` values: the second histograms.
            pub b: *const $real,
            /// `n * d` values: the first scalings, read and written.
            pub f: *mut $real,
            /// `n * d` values: the second scalings, read and written.
            pub g: *mut $real,
            /// How many iterations.
            pub iterations: u64,
            /// One `u32`, 0 at the launch: the grid barrier's counter.
            pub barrier: *mut u32,
            $($extra)*
        }
    )*};
}

single_launch_args! {
    /// `ot_persistent_scaling_f32`: `iterations` scaling-domain iterations
    /// in one cooperative launch.
    f32: OtPersistentScalingF32Args {}
    /// `ot_persistent_scaling_f64`, as the float32 one.
    f64: OtPersistentScalingF64Args {}
    /// `ot_resident_scaling_f32`: `iterations` scaling-domain iterations in
    /// one cooperative launch, each block holding its rows of both matrices
    /// in shared memory for the whole launch.
    f32: OtResidentScalingF32Args {
        /// Matrix rows each block holds (>= 1): block `k` owns rows
        /// `k * rows_per_block ..` up to `d`.
        pub rows_per_block: u64,
    }
    /// `ot_resident_scaling_f64`, as the float32 one.
    f64: OtResidentScalingF64Args {
        /// Matrix rows each block holds (>= 1): block `k` owns rows
        /// `k * rows_per_block ..` up to `d`.
        pub rows_per_block: u64,
    }
}

/// Threads per block of the resident scaling kernels.
pub const TRANSPORT_RESIDENT_THREADS: u32 = 512;
/// The most pairs for which scaling-domain iterations without checks run
/// in one launch with the matrices resident in shared memory
/// (`ot_resident_scaling_*`, when its rows of both matrices and one
/// vector per pair fit a block's shared memory). Measured on an H200 at
/// d = 1024 (float32, 100 iterations): 0.91 ms for one pair, 1.50 ms for
/// 16 and 2.30 ms for 32, against 1.27, 3.14 and 3.47 ms without.
pub const TRANSPORT_RESIDENT_MAX_PAIRS: u64 = 32;

/// The dynamic shared memory of a resident scaling launch, in elements:
/// the `n` vectors of one side, then `rows_per_block` rows of each matrix.
pub const fn resident_shared_elements(n: u64, d: u64, rows_per_block: u64) -> u64 {
    (2 * rows_per_block + n) * d
}

/// The most pairs for which scaling-domain iterations without checks run
/// in one persistent launch (`ot_persistent_scaling_*`). Measured on an
/// H200 at d = 1024 (100 iterations): one launch takes 1.28 ms for n = 1
/// against 1.75 ms in separate launches, 1.64 against 3.21 ms for n = 2
/// and 2.50 against 3.28 ms for n = 4, but 3.93 against 3.17 ms for n = 8
/// and 4.15 against 3.33 ms for n = 16: from eight pairs on, each warp
/// holds one or two groups of eight and waits on its loads, which the
/// separate launches' larger grids hide.
pub const TRANSPORT_PERSISTENT_MAX_PAIRS: u64 = 4;
/// The most iterations one persistent launch runs (its barrier counts
/// stay far inside a `u32`).
pub const TRANSPORT_PERSISTENT_ITERATIONS: u64 = 1000;

impl_kernel_args!(
    OtPrepareF32Args => OtPrepareF32 { m, d, reg, exponentiate, out, out_t },
    OtPrepareF64Args => OtPrepareF64 { m, d, reg, exponentiate, out, out_t },
    OtCheckF32Args => OtCheckF32 { a, b, len, m, m_len, flags },
    OtCheckF64Args => OtCheckF64 { a, b, len, m, m_len, flags },
    OtPairStatsF32Args => OtPairStatsF32 { n, d, partial, f, g, cost, f_centred, g_centred },
    OtPairStatsF64Args => OtPairStatsF64 { n, d, partial, f, g, cost, f_centred, g_centred },
    OtFillF32Args => OtFillF32 { x, len, value },
    OtFillF64Args => OtFillF64 { x, len, value },
    OtPotentialsF32Args => OtPotentialsF32 { x, len, reg },
    OtPotentialsF64Args => OtPotentialsF64 { x, len, reg },
    OtTileScalingF32Args => OtTileScalingF32 { op, n, d, x_in, splits, partial },
    OtTileScalingF64Args => OtTileScalingF64 { op, n, d, x_in, splits, partial },
    OtWideScalingF32Args => OtWideScalingF32 { op, n, d, x_in, splits, partial, marginal, x_out, err, x_out_planes },
    OtWgmmaScalingF32Args => OtWgmmaScalingF32 { op, n, d, x_in, splits, partial, marginal, x_out, err, x_out_planes },
    OtFinishWideScalingF32Args => OtFinishWideScalingF32 { n, d, splits, partial, marginal, x_out, err, x_out_planes, layout },
    OtSplitPlanesF32Args => OtSplitPlanesF32 { src, rows, d, layout, out },
    OtPersistentScalingF32Args => OtPersistentScalingF32 { rows, columns, n, d, a, b, f, g, iterations, barrier },
    OtPersistentScalingF64Args => OtPersistentScalingF64 { rows, columns, n, d, a, b, f, g, iterations, barrier },
    OtResidentScalingF32Args => OtResidentScalingF32 { rows, columns, n, d, a, b, f, g, iterations, barrier, rows_per_block },
    OtResidentScalingF64Args => OtResidentScalingF64 { rows, columns, n, d, a, b, f, g, iterations, barrier, rows_per_block },
    OtTileLogF32Args => OtTileLogF32 { c, n, d, scale, p_in, splits, part_max, part_sum },
    OtTileLogF64Args => OtTileLogF64 { c, n, d, scale, p_in, splits, part_max, part_sum },
    OtTileCostF32Args => OtTileCostF32 { c, n, d, scale, f, g, splits, partial },
    OtTileCostF64Args => OtTileCostF64 { c, n, d, scale, f, g, splits, partial },
    OtFinishScalingF32Args => OtFinishScalingF32 { n, d, splits, partial, marginal, x_out, err },
    OtFinishScalingF64Args => OtFinishScalingF64 { n, d, splits, partial, marginal, x_out, err },
    OtFinishLogF32Args => OtFinishLogF32 { n, d, reg, splits, part_max, part_sum, marginal, p_out, err },
    OtFinishLogF64Args => OtFinishLogF64 { n, d, reg, splits, part_max, part_sum, marginal, p_out, err },
    OtFinishSumF32Args => OtFinishSumF32 { len, splits, partial, out },
    OtFinishSumF64Args => OtFinishSumF64 { len, splits, partial, out },
    OtRowsScalingF32Args => OtRowsScalingF32 { op, n, d, x_in, marginal, x_out, err },
    OtRowsScalingF64Args => OtRowsScalingF64 { op, n, d, x_in, marginal, x_out, err },
    OtRowsLogF32Args => OtRowsLogF32 { c, n, d, reg, scale, p_in, marginal, p_out, err },
    OtRowsLogF64Args => OtRowsLogF64 { c, n, d, reg, scale, p_in, marginal, p_out, err },
);

/// The float types of the Sinkhorn kernels.
pub trait Real:
    Copy
    + PartialOrd
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::Neg<Output = Self>
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// -inf.
    const NEG_INFINITY: Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
}

/// How `e^x` and `ln x` are computed for `T`: the device uses its own
/// instructions for float32; [`Software`] is the float64 code above.
pub trait Math<T> {
    /// `e^x` (`e^-inf = 0`).
    fn exp(x: T) -> T;
    /// `ln x` (`ln 0 = -inf`).
    fn ln(x: T) -> T;
}

/// [`exp_f64`] and [`ln_f64`] (float32 through float64).
pub struct Software;

impl Math<f64> for Software {
    #[inline(always)]
    fn exp(x: f64) -> f64 {
        exp_f64(x)
    }
    #[inline(always)]
    fn ln(x: f64) -> f64 {
        ln_f64(x)
    }
}

impl Math<f32> for Software {
    #[inline(always)]
    fn exp(x: f32) -> f32 {
        exp_f64(x as f64) as f32
    }
    #[inline(always)]
    fn ln(x: f32) -> f32 {
        ln_f64(x as f64) as f32
    }
}

/// The running state of a one-pass log-sum-exp: the largest term `max`
/// and the sum of `e^(term - max)`. The empty state is `(-inf, 0)`; merging
/// is defined on it, so a row of only `-inf` terms gives `-inf`, never NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogSumExp<T> {
    /// The largest term so far (`-inf` when empty).
    pub max: T,
    /// `sum e^(term - max)` (0 when empty).
    pub sum: T,
}

impl<T: Real> LogSumExp<T> {
    /// No terms.
    pub const EMPTY: Self = Self { max: T::NEG_INFINITY, sum: T::ZERO };

    /// Adds one term (`-inf` terms add nothing).
    #[inline(always)]
    pub fn push<M: Math<T>>(self, term: T) -> Self {
        if term == T::NEG_INFINITY {
            self
        } else if term > self.max {
            Self { max: term, sum: self.sum * M::exp(self.max - term) + T::ONE }
        } else {
            Self { max: self.max, sum: self.sum + M::exp(term - self.max) }
        }
    }

    /// The state of both terms' sets together.
    #[inline(always)]
    pub fn merge<M: Math<T>>(self, other: Self) -> Self {
        if other.max == T::NEG_INFINITY {
            self
        } else if self.max == T::NEG_INFINITY {
            other
        } else if self.max >= other.max {
            Self { max: self.max, sum: self.sum + other.sum * M::exp(other.max - self.max) }
        } else {
            Self { max: other.max, sum: other.sum + self.sum * M::exp(self.max - other.max) }
        }
    }

    /// `ln sum e^term` (`-inf` when empty).
    #[inline(always)]
    pub fn value<M: Math<T>>(self) -> T {
        if self.max == T::NEG_INFINITY {
            T::NEG_INFINITY
        } else {
            self.max + M::ln(self.sum)
        }
    }
}

/// The new potential of one bin in the log-domain update:
/// `reg ln marginal - reg lse` (-inf where the marginal is 0).
#[inline(always)]
pub fn log_domain_potential<T: Real, M: Math<T>>(marginal: T, reg: T, lse: T) -> T {
    if marginal > T::ZERO {
        reg * M::ln(marginal) - reg * lse
    } else {
        T::NEG_INFINITY
    }
}

/// One bin's term of the entropic cost: `plan (f + g)` with
/// `plan = e^((f + g - c) / reg)`, 0 where a potential is -inf.
#[inline(always)]
pub fn cost_term<T: Real, M: Math<T>>(f: T, g: T, c: T, reg: T) -> T {
    if f == T::NEG_INFINITY || g == T::NEG_INFINITY {
        T::ZERO
    } else {
        let fg = f + g;
        M::exp((fg - c) / reg) * fg
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    /// Relative error against the standard library, in units of 1e-16.
    fn close(got: f64, want: f64, ulps: f64) -> bool {
        if want.is_infinite() || want == 0.0 {
            return got == want;
        }
        if want < f64::MIN_POSITIVE {
            // Subnormal results keep fewer bits: a few of their units.
            return (got - want).abs() <= 4.0 * f64::from_bits(1);
        }
        ((got - want) / want).abs() <= ulps * 1.1e-16
    }

    /// The tensor-core kernels' operand planes: in every layout, every
    /// (row, column) of every tile and chunk of some shapes at its own
    /// place in the planes (big part below the small one, each plane a
    /// block of its own), the planes holding nothing else; and each lane's
    /// 16-byte (8-byte) read of a wide operand holding what the tensor
    /// cores' layout asks of it.
    #[test]
    fn the_planes_are_the_operands_in_order() {
        let (block, chunk) = (TRANSPORT_WIDE_BLOCK as usize, TRANSPORT_WIDE_CHUNK as usize);
        for layout in [PLANES_WIDE_ROWS, PLANES_WIDE_PAIRS, PLANES_WGMMA_ROWS, PLANES_WGMMA_PAIRS] {
            let (tile, width, plane) = (planes_tile(layout), planes_chunk(layout), planes_plane(layout));
            for (rows, d) in [(1u64, 1u64), (7, 300), (64, 32), (128, 16), (129, 17), (300, 513)] {
                let chunks = d.div_ceil(width);
                let mut filled = vec![false; planes_len(rows, d, layout) as usize];
                for r in 0..rows.div_ceil(tile) * tile {
                    for j in 0..chunks * width {
                        let at = planes_index(r, j, d, layout);
                        let start = planes_offset(r / tile, j / width, chunks, layout);
                        assert!(at >= start && at < start + plane, "({r}, {j}) outside its chunk's big plane");
                        for part in [at, at + plane] {
                            assert!(!std::mem::replace(&mut filled[part as usize], true), "({r}, {j}) shares {part}");
                        }
                    }
                }
                assert!(filled.iter().all(|&f| f), "{rows} × {d}: planes hold unfilled values");
            }
        }
        for step in 0..chunk / 8 {
            for lane in 0..32 {
                let (group, member) = (lane / 4, lane % 4);
                for m in 0..block / 16 {
                    let base = ((step * (block / 16) + m) * 32 + lane) * 4;
                    let r = 16 * m + group;
                    let (lo, hi) = (8 * step + member, 8 * step + member + 4);
                    assert_eq!(
                        [
                            wide_row_slot(r, lo),
                            wide_row_slot(r + 8, lo),
                            wide_row_slot(r, hi),
                            wide_row_slot(r + 8, hi)
                        ],
                        [base, base + 1, base + 2, base + 3]
                    );
                }
                for t in 0..block / 8 {
                    let base = ((step * (block / 8) + t) * 32 + lane) * 2;
                    let q = 8 * t + group;
                    let (lo, hi) = (8 * step + member, 8 * step + member + 4);
                    assert_eq!([wide_pair_slot(q, lo), wide_pair_slot(q, hi)], [base, base + 1]);
                }
            }
        }
    }

    /// The warpgroup kernel's staged planes: each (row, column)'s slot is
    /// where the descriptors' layout (core matrices of 8 rows × 16 bytes,
    /// the leading and stride byte offsets) puts it.
    #[test]
    fn wgmma_slots_follow_the_descriptors_layout() {
        let descriptor = wgmma_descriptor(0x1230);
        assert_eq!(descriptor & 0x3fff, 0x123);
        assert_eq!((descriptor >> 16) & 0x3fff, WGMMA_LEADING_BYTES >> 4);
        assert_eq!((descriptor >> 32) & 0x3fff, WGMMA_STRIDE_BYTES >> 4);
        let chunk = TRANSPORT_WGMMA_CHUNK as usize;
        for rows in [TRANSPORT_WGMMA_ROWS as usize, TRANSPORT_WGMMA_PAIRS as usize] {
            for r in 0..rows {
                for c in 0..chunk {
                    let bytes = (r / 8) as u64 * WGMMA_STRIDE_BYTES
                        + (c / 4) as u64 * WGMMA_LEADING_BYTES
                        + ((r % 8) * 16 + (c % 4) * 4) as u64;
                    assert_eq!(4 * wgmma_slot(r, c) as u64, bytes, "row {r}, column {c}");
                }
            }
        }
    }

    #[test]
    fn exp_and_ln_match_the_standard_library() {
        let mut x = -745.0f64;
        while x < 709.0 {
            assert!(close(exp_f64(x), x.exp(), 4.0), "exp({x}) = {} vs {}", exp_f64(x), x.exp());
            x += 0.0137;
        }
        for &x in &[0.0, -0.0, 1e-300, -1e-12, 1e-12, 0.5, -0.5, 1.0, 700.0] {
            assert!(close(exp_f64(x), x.exp(), 4.0), "exp({x})");
        }
        assert_eq!(exp_f64(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp_f64(f64::INFINITY), f64::INFINITY);
        assert!(exp_f64(f64::NAN).is_nan());
        let mut x = 1e-310f64;
        while x < 1e300 {
            let want = x.ln();
            let got = ln_f64(x);
            assert!(
                (got - want).abs() <= 4.0 * 1.1e-16 * want.abs().max(1e-300) || (got - want).abs() < 1e-300,
                "ln({x}) = {got} vs {want}"
            );
            x *= 1.37;
        }
        for &x in &[1.0, 1.0 + 1e-15, 1.0 - 1e-15, 2.0, 0.5, core::f64::consts::E, 1e-320] {
            let (got, want) = (ln_f64(x), x.ln());
            assert!((got - want).abs() <= 4.0 * 1.1e-16 * want.abs().max(1.0), "ln({x}) = {got} vs {want}");
        }
        assert_eq!(ln_f64(0.0), f64::NEG_INFINITY);
        assert_eq!(ln_f64(f64::INFINITY), f64::INFINITY);
        assert!(ln_f64(-1.0).is_nan() && ln_f64(f64::NAN).is_nan());
    }

    #[test]
    fn log_sum_exp_is_defined_on_the_empty_state() {
        let terms = [-3.0, 0.5, 2.0, -1e3, f64::NEG_INFINITY, 1.5];
        let one_pass = terms.iter().fold(LogSumExp::EMPTY, |s, &t| s.push::<Software>(t)).value::<Software>();
        let two_pass = {
            let m = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + terms.iter().map(|t| (t - m).exp()).sum::<f64>().ln()
        };
        assert!((one_pass - two_pass).abs() < 1e-14);
        // Any split, merged in any order, gives the same value.
        let (left, right) = terms.split_at(3);
        let a = left.iter().fold(LogSumExp::EMPTY, |s, &t| s.push::<Software>(t));
        let b = right.iter().fold(LogSumExp::EMPTY, |s, &t| s.push::<Software>(t));
        assert!((a.merge::<Software>(b).value::<Software>() - two_pass).abs() < 1e-14);
        assert!((b.merge::<Software>(a).value::<Software>() - two_pass).abs() < 1e-14);
        let empty = LogSumExp::<f64>::EMPTY;
        assert_eq!(empty.merge::<Software>(empty).value::<Software>(), f64::NEG_INFINITY);
        assert_eq!(empty.push::<Software>(f64::NEG_INFINITY).value::<Software>(), f64::NEG_INFINITY);
        assert_eq!(a.merge::<Software>(empty), a);
        // A zero marginal pins its potential to -inf; a zero plan entry
        // costs nothing, also next to -inf potentials.
        assert_eq!(log_domain_potential::<f64, Software>(0.0, 0.1, 3.0), f64::NEG_INFINITY);
        assert_eq!(cost_term::<f64, Software>(f64::NEG_INFINITY, 1.0, 0.5, 0.1), 0.0);
        let (f, g, c, reg): (f64, f64, f64, f64) = (0.3, -0.2, 0.4, 0.05);
        let want = ((f + g - c) / reg).exp() * (f + g);
        assert!((cost_term::<f64, Software>(f, g, c, reg) - want).abs() < 1e-15);
    }
}
