//! Batched Sinkhorn iterations for entropic optimal transport: `n` pairs
//! of `d`-bin histograms sharing one `d × d` cost matrix. Every half-step
//! is a reduction over the columns `j` of a function of (matrix row `i`,
//! column `j`) and (pair `t`, column `j`), for every (pair, row): a
//! matrix product for the scaling domain, a log-sum-exp for the log
//! domain. It runs as a tiled product does: a block owns a 64 × 64 tile of
//! (rows, pairs), stages 16 columns of the matrix rows and of the pairs'
//! vectors in shared memory at a time, and each thread keeps a 4 × 4
//! corner of the tile in registers, so each staged value is used 64 times.
//! When the tiles are too few to fill the device, the columns are split
//! among blocks and a second kernel merges the splits' partial results
//! in split order (no atomics: the same bits on every run) and applies the
//! half-step's update. The float32 kernels take powers and logarithms in
//! base 2 from the special-function unit, the float64 ones natural ones
//! from `gpu_waterz_abi::transport`'s code.
//!
//! Beside the tiles: many float32 pairs run 128 × 128 tiles on the tensor
//! cores (`ot_wide_scaling_f32`, three TF32 products per step, so that
//! the sums keep float32's accuracy); few pairs run whole iterations in
//! one cooperative launch whose grid waits for itself between half-steps
//! (`ot_persistent_scaling_*`), or, where the rows fit, with each block's
//! rows of both matrices resident in shared memory for the whole launch
//! (`ot_resident_scaling_*`); a single pair runs one warp per row
//! (`ot_rows_*`).

use crate::device::*;
use gpu_waterz_abi::transport::*;

/// Threads per block, as an index type.
const THREADS: usize = TRANSPORT_THREADS as usize;
/// Rows and pairs per tile, as an index type.
const BLOCK: usize = TRANSPORT_BLOCK as usize;
/// Outputs per thread along each side.
const MICRO: usize = TRANSPORT_MICRO as usize;
/// Columns per staged chunk.
const CHUNK: usize = TRANSPORT_CHUNK as usize;
/// Threads along each side of the tile.
const LANES: usize = BLOCK / MICRO;
/// The shared-memory distance between staged columns: 4 elements of
/// padding keep each thread's four rows (pairs) 16-byte aligned, read as
/// one vector, while the staging stores meet at most two to a bank.
const STRIDE: usize = BLOCK + 4;

/// Four consecutive values read as one vector load (shared memory only).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Quad<T>([T; MICRO]);

/// The four values at `p`.
///
/// # Safety
/// `p` is 16-byte aligned and four values there are readable.
#[inline(always)]
unsafe fn load_quad<T: Copy>(p: *const T) -> [T; MICRO] {
    // SAFETY: the caller's.
    unsafe { (*(p as *const Quad<T>)).0 }
}

/// Runs `$body` for every output `($a, $b)` of a thread's corner,
/// written out: the compiler does not unroll these loops in the log-domain
/// tile (they hold calls), and a loop there would put the thread's outputs
/// in local memory.
macro_rules! for_each_output {
    ($a:ident, $b:ident => $body:block) => {
        for_each_output!(@ $a $b $body; (0 0) (0 1) (0 2) (0 3) (1 0) (1 1) (1 2) (1 3)
            (2 0) (2 1) (2 2) (2 3) (3 0) (3 1) (3 2) (3 3))
    };
    (@ $a:ident $b:ident $body:block; $(($ka:literal $kb:literal))*) => {
        $({
            let ($a, $b): (usize, usize) = ($ka, $kb);
            $body
        })*
    };
}
const _: () = assert!(MICRO == 4, "for_each_output! writes out 4 x 4 outputs");

/// The device's float32 `e^x` and `ln x`.
struct Hardware;

impl Math<f32> for Hardware {
    #[inline(always)]
    fn exp(x: f32) -> f32 {
        ex2_approx_f32(x * core::f32::consts::LOG2_E)
    }
    #[inline(always)]
    fn ln(x: f32) -> f32 {
        lg2_approx_f32(x) * core::f32::consts::LN_2
    }
}

/// Powers and logarithms in base 2 by the special-function unit.
struct Base2;

impl Math<f32> for Base2 {
    #[inline(always)]
    fn exp(x: f32) -> f32 {
        ex2_approx_f32(x)
    }
    #[inline(always)]
    fn ln(x: f32) -> f32 {
        lg2_approx_f32(x)
    }
}

/// What the tile kernels need of a float type beyond [`Real`].
trait TileReal: Real {
    /// The powers and logarithms of the log-sum-exp states (base 2 for
    /// float32, e for float64).
    type Power: Math<Self>;
    /// `ln` of that base: a state's natural log-sum-exp is
    /// `(max + log(sum)) LN_BASE`.
    const LN_BASE: Self;
    /// `a * b + c`, rounded once.
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// The larger of `a` and `b`.
    #[inline(always)]
    fn max(a: Self, b: Self) -> Self {
        if a > b {
            a
        } else {
            b
        }
    }
    /// The smaller of `a` and `b`.
    #[inline(always)]
    fn min(a: Self, b: Self) -> Self {
        if a < b {
            a
        } else {
            b
        }
    }
    /// The smallest sum of a chunk's powers above its bound for which the
    /// chunk's largest term is surely kept: 2^-56 in base 2 (float32
    /// keeps 24 bits and its powers reach 2^-126), e^-600 in base e
    /// (float64 keeps 53 bits and its powers reach e^-745).
    const FLOOR: Self;
    /// `self` as held by lane `lane ^ mask`.
    ///
    /// # Safety
    /// All 32 lanes of the warp call it together.
    unsafe fn shuffle_xor(self, mask: u32) -> Self;
}

impl TileReal for f32 {
    const FLOOR: Self = 1.387_778_8e-17;
    #[inline(always)]
    unsafe fn shuffle_xor(self, mask: u32) -> Self {
        // SAFETY: the caller's (all lanes call it).
        f32::from_bits(unsafe { shuffle_xor_u32(self.to_bits(), mask) })
    }
    type Power = Base2;
    const LN_BASE: Self = core::f32::consts::LN_2;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        fma_f32(a, b, c)
    }
}

impl TileReal for f64 {
    const FLOOR: Self = 2.65e-261;
    #[inline(always)]
    unsafe fn shuffle_xor(self, mask: u32) -> Self {
        let bits = self.to_bits();
        // SAFETY: the caller's (all lanes call it).
        let (lo, hi) = unsafe { (shuffle_xor_u32(bits as u32, mask), shuffle_xor_u32((bits >> 32) as u32, mask)) };
        f64::from_bits(lo as u64 | (hi as u64) << 32)
    }
    type Power = Software;
    const LN_BASE: Self = 1.0;
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        fma_f64(a, b, c)
    }
}

/// The absolute value without `std`.
#[inline(always)]
fn abs<T: Real>(x: T) -> T {
    if x < T::ZERO {
        -x
    } else {
        x
    }
}

/// The place of this block and thread in a tile kernel's launch.
struct TilePlace {
    /// The tile's first row and first pair.
    i0: u64,
    q0: u64,
    /// The split and its chunks of columns, `[first, end)`.
    split: u64,
    first: u64,
    end: u64,
    /// The thread's position along the rows and along the pairs.
    ti: usize,
    tq: usize,
}

impl TilePlace {
    #[inline(always)]
    fn new(n: u64, d: u64, splits: u64) -> Self {
        let (row_tile, pair_tile, split) =
            tile_of_block(block_idx_x() as u64, d.div_ceil(BLOCK as u64), n.div_ceil(BLOCK as u64));
        let (first, end) = chunks_of_split(split, splits, d.div_ceil(CHUNK as u64));
        let tid = thread_idx_x() as usize;
        Self {
            i0: row_tile * BLOCK as u64,
            q0: pair_tile * BLOCK as u64,
            split,
            first,
            end,
            ti: tid % LANES,
            tq: tid / LANES,
        }
    }

    /// Row `a` of this thread's corner.
    #[inline(always)]
    fn row(&self, a: usize) -> u64 {
        self.i0 + (self.ti * MICRO + a) as u64
    }

    /// Pair `b` of this thread's corner.
    #[inline(always)]
    fn pair(&self, b: usize) -> u64 {
        self.q0 + (self.tq * MICRO + b) as u64
    }

    /// Writes `values[a][b]` to `out[(split * n + pair) * d + row]` for
    /// the corner's rows and pairs that exist.
    ///
    /// # Safety
    /// `out` holds `splits * n * d` values.
    #[inline(always)]
    unsafe fn write<T: Copy>(&self, n: u64, d: u64, out: *mut T, values: &[[T; MICRO]; MICRO]) {
        for (a, row) in values.iter().enumerate() {
            for (b, &v) in row.iter().enumerate() {
                let (i, q) = (self.row(a), self.pair(b));
                if i < d && q < n {
                    // SAFETY: split < splits, q < n, i < d.
                    unsafe { *out.add(((self.split * n + q) * d + i) as usize) = v };
                }
            }
        }
    }
}

/// Values of one staged chunk each thread reads and stores.
const PER_THREAD: usize = BLOCK * CHUNK / THREADS;

/// This thread's share of columns `[j0, j0 + CHUNK)` of rows `[r0, r0 +
/// BLOCK)` of the row-major `rows × d` matrix `src`, `f` applied (`pad`
/// where the row or column does not exist), read into registers ahead of
/// [`store`].
///
/// # Safety
/// `src` holds `rows * d` values.
#[inline(always)]
unsafe fn fetch<T: Real>(
    src: *const T,
    rows: u64,
    d: u64,
    r0: u64,
    j0: u64,
    pad: T,
    f: impl Fn(T) -> T,
) -> [T; PER_THREAD] {
    // SAFETY: the caller's.
    unsafe { fetch_columns::<T, CHUNK, PER_THREAD>(src, rows, d, r0, j0, pad, f) }
}

/// This thread's share of columns `[j0, j0 + COLS)` of rows `[r0, r0 +
/// PER * THREADS / COLS)` of the row-major `rows × d` matrix `src`, `f`
/// applied (`pad` where the row or column does not exist): value `k` is
/// element `e = k * THREADS + thread` of the chunk, row `e / COLS`, column
/// `e % COLS`.
///
/// # Safety
/// `src` holds `rows * d` values.
#[inline(always)]
unsafe fn fetch_columns<T: Real, const COLS: usize, const PER: usize>(
    src: *const T,
    rows: u64,
    d: u64,
    r0: u64,
    j0: u64,
    pad: T,
    f: impl Fn(T) -> T,
) -> [T; PER] {
    // SAFETY: the caller's.
    unsafe { fetch_elements::<T, PER>(src, rows, d, r0, j0, pad, f, |e| (e / COLS, e % COLS)) }
}

/// This thread's share of a chunk of the row-major `rows × d` matrix `src`
/// from row `r0` and column `j0`, `f` applied (`pad` where the row or
/// column does not exist): value `k` is element `e = k * THREADS + thread`
/// of the chunk, at (row, column) `place(e)` from `(r0, j0)`.
///
/// # Safety
/// `src` holds `rows * d` values.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fetch_elements<T: Real, const PER: usize>(
    src: *const T,
    rows: u64,
    d: u64,
    r0: u64,
    j0: u64,
    pad: T,
    f: impl Fn(T) -> T,
    place: impl Fn(usize) -> (usize, usize),
) -> [T; PER] {
    let tid = thread_idx_x() as usize;
    core::array::from_fn(|k| {
        let (r, j) = place(k * THREADS + tid);
        let (r, j) = (r0 + r as u64, j0 + j as u64);
        // SAFETY: r < rows and j < d when read.
        if r < rows && j < d {
            f(unsafe { *src.add((r * d + j) as usize) })
        } else {
            pad
        }
    })
}

/// Stores this thread's share of a chunk ([`fetch`]) as `dst[column *
/// STRIDE + row]`.
///
/// # Safety
/// `dst` is shared memory of `CHUNK * STRIDE` values.
#[inline(always)]
unsafe fn store<T: Real>(dst: *mut T, values: &[T; PER_THREAD]) {
    // SAFETY: the caller's.
    unsafe { store_columns::<T, CHUNK, STRIDE, PER_THREAD>(dst, values) }
}

/// Stores this thread's share of a chunk ([`fetch_columns`]) as
/// `dst[column * PITCH + row]`.
///
/// # Safety
/// `dst` is shared memory of `COLS * PITCH` values, and `PITCH` is at
/// least the chunk's rows.
#[inline(always)]
unsafe fn store_columns<T: Real, const COLS: usize, const PITCH: usize, const PER: usize>(
    dst: *mut T,
    values: &[T; PER],
) {
    // SAFETY: the caller's.
    unsafe { store_elements::<T, PITCH, PER>(dst, values, |e| (e / COLS, e % COLS)) }
}

/// Stores this thread's share of a chunk ([`fetch_elements`], the same
/// `place`) as `dst[column * PITCH + row]`.
///
/// # Safety
/// `dst` is shared memory that holds every `column * PITCH + row` that
/// `place` gives for this thread's elements.
#[inline(always)]
unsafe fn store_elements<T: Real, const PITCH: usize, const PER: usize>(
    dst: *mut T,
    values: &[T; PER],
    place: impl Fn(usize) -> (usize, usize),
) {
    let tid = thread_idx_x() as usize;
    for (k, &v) in values.iter().enumerate() {
        let (r, j) = place(k * THREADS + tid);
        // SAFETY: the caller's.
        unsafe { *dst.add(j * PITCH + r) = v };
    }
}

/// This thread's share of a chunk's matrix rows and vectors.
type Fetched<T> = ([T; PER_THREAD], [T; PER_THREAD]);

/// [`for_each_chunk`] with the chunk staged as fetched, in `rows` and
/// `vectors`.
///
/// # Safety
/// As [`for_each_chunk`]'s; `rows` and `vectors` are shared memory of
/// `CHUNK * STRIDE` values each.
#[inline(always)]
unsafe fn for_each_staged_chunk<T: Real>(
    place: &TilePlace,
    rows: *mut T,
    vectors: *mut T,
    fetch: impl Fn(u64) -> Fetched<T>,
    compute: impl FnMut(),
) {
    let put = |next: &Fetched<T>| {
        // SAFETY: the caller's.
        unsafe {
            store(rows, &next.0);
            store(vectors, &next.1);
        }
    };
    // SAFETY: the caller's.
    unsafe { for_each_chunk(place, fetch, put, compute) }
}

/// Runs `compute` once per chunk of this block's split, after `put` has
/// staged this thread's share of the chunk's matrix rows and vectors in
/// shared memory (`fetch(j0)` reads them); the next chunk is read from
/// global memory while this one is computed.
///
/// # Safety
/// All threads of the block call it; `fetch` reads in bounds; `put` writes
/// shared memory that `compute` reads.
#[inline(always)]
unsafe fn for_each_chunk<T: Real>(
    place: &TilePlace,
    fetch: impl Fn(u64) -> Fetched<T>,
    put: impl FnMut(&Fetched<T>),
    compute: impl FnMut(),
) {
    // SAFETY: the caller's.
    unsafe { for_each_chunk_of(place.first, place.end, CHUNK as u64, fetch, put, compute) }
}

/// Runs `compute` once per chunk `[first, end)` of `columns` columns, after
/// `put` has staged this thread's share of the chunk (`fetch(j0)` reads
/// it, `j0` the chunk's first column); the next chunk is read from global
/// memory while this one is computed.
///
/// # Safety
/// All threads of the block call it; `fetch` reads in bounds; `put` writes
/// shared memory that `compute` reads.
#[inline(always)]
unsafe fn for_each_chunk_of<F>(
    first: u64,
    end: u64,
    columns: u64,
    fetch: impl Fn(u64) -> F,
    mut put: impl FnMut(&F),
    mut compute: impl FnMut(),
) {
    if first >= end {
        return;
    }
    let mut next = fetch(first * columns);
    for chunk in first..end {
        put(&next);
        // SAFETY: barriers reached by every thread.
        unsafe { sync_threads() };
        if chunk + 1 < end {
            next = fetch((chunk + 1) * columns);
        }
        compute();
        // SAFETY: every thread; the next chunk overwrites the staged one.
        unsafe { sync_threads() };
    }
}

/// This thread's rows and pairs of staged column `j`.
///
/// # Safety
/// `rows` and `vectors` are the staged chunks; `j < CHUNK`.
#[inline(always)]
unsafe fn staged<T: Real>(rows: *const T, vectors: *const T, j: usize, place: &TilePlace) -> ([T; MICRO], [T; MICRO]) {
    // SAFETY: j * STRIDE + ti * MICRO + 3 < CHUNK * STRIDE, and both are
    // multiples of four elements from a 16-byte aligned start.
    unsafe {
        (load_quad(rows.add(j * STRIDE + place.ti * MICRO)), load_quad(vectors.add(j * STRIDE + place.tq * MICRO)))
    }
}

/// The scaling-domain tile (see `OtTileScalingF32Args`).
///
/// # Safety
/// As the kernels'.
#[inline(always)]
unsafe fn tile_scaling<T: TileReal>(op: *const T, n: u64, d: u64, x_in: *const T, splits: u64, partial: *mut T) {
    let place = TilePlace::new(n, d, splits);
    let rows = dynamic_shared::<T>();
    // SAFETY: the launch's shared memory holds 2 * CHUNK * STRIDE values.
    let vectors = unsafe { rows.add(CHUNK * STRIDE) };
    let mut acc = [[T::ZERO; MICRO]; MICRO];
    // SAFETY: the kernel's bounds; every thread takes part.
    let fetch = |j0| unsafe {
        (fetch(op, d, d, place.i0, j0, T::ZERO, |v| v), fetch(x_in, n, d, place.q0, j0, T::ZERO, |v| v))
    };
    // SAFETY: the staged chunks are read between the helper's barriers.
    unsafe {
        for_each_staged_chunk(&place, rows, vectors, fetch, || {
            for j in 0..CHUNK {
                let (r, p) = staged(rows, vectors, j, &place);
                for a in 0..MICRO {
                    for b in 0..MICRO {
                        acc[a][b] = T::fma(r[a], p[b], acc[a][b]);
                    }
                }
            }
        })
    };
    // SAFETY: `partial` holds splits * n * d values.
    unsafe { place.write(n, d, partial, &acc) };
}

/// Rows and pairs of the wide tile, as an index type.
const WIDE_BLOCK: usize = TRANSPORT_WIDE_BLOCK as usize;
/// Columns per staged chunk of the wide tile.
const WIDE_CHUNK: usize = TRANSPORT_WIDE_CHUNK as usize;
/// Values of one plane of a staged wide chunk (matrix rows or vectors,
/// big or small parts).
const WIDE_PLANE: usize = TRANSPORT_WIDE_PLANE as usize;
/// Chunks in shared memory at once.
const WIDE_STAGES: usize = TRANSPORT_WIDE_STAGES as usize;
/// Values of one stage: the rows' two planes, then the vectors'.
const WIDE_STAGE: usize = 4 * WIDE_PLANE;
/// 16-byte copies each thread makes of each operand's chunk (two planes).
const WIDE_COPIES: usize = 2 * WIDE_PLANE / 4 / THREADS;
const _: () = assert!(
    WIDE_COPIES * 4 * THREADS == 2 * WIDE_PLANE
        && WIDE_PLANE == WIDE_BLOCK * WIDE_CHUNK
        && WIDE_CHUNK == 16
        && WIDE_BLOCK == 128
        && TRANSPORT_WIDE_SHARED_BYTES as usize == WIDE_STAGES * WIDE_STAGE * 4,
    "the wide tile's staging: 128 rows and pairs, chunks of two 8-column steps, four planes per stage"
);

/// Two 32-bit values read from shared memory together (8 bytes).
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Duo([u32; 2]);

/// A float32 value as a TF32 (10-bit mantissa) value rounded to nearest,
/// and what is left: `x ≈ big + small`, both exact in TF32, to about 2^-22
/// of `x`.
#[inline(always)]
fn split_tf32(x: f32) -> (u32, u32) {
    let big = to_tf32(x);
    (big, to_tf32(x - f32::from_bits(big)))
}

/// `x` rounded to TF32 (`cvt.rna.tf32.f32`), as the bits of a float32.
#[inline(always)]
fn to_tf32(x: f32) -> u32 {
    let out: u32;
    // SAFETY: a register conversion.
    unsafe {
        core::arch::asm!(
            "cvt.rna.tf32.f32 {o}, {x};",
            o = out(reg32) out,
            x = in(reg32) x.to_bits(),
            options(pure, nomem, nostack)
        )
    };
    out
}

/// `acc += a b` on the tensor cores: one warp's 16 × 8 × 8 product in TF32
/// with float32 accumulation (`mma.sync.aligned.m16n8k8`). Lane `l` holds
/// `a` rows `l / 4` and `l / 4 + 8`, columns `l % 4` and `l % 4 + 4` (in
/// that order: (r, c), (r + 8, c), (r, c + 4), (r + 8, c + 4)); `b` rows
/// `l % 4` and `l % 4 + 4` of column `l / 4`; `acc` row `l / 4` then `l /
/// 4 + 8`, columns `2 (l % 4)` and `2 (l % 4) + 1`.
///
/// # Safety
/// Every lane of the warp runs it together.
#[inline(always)]
unsafe fn mma_tf32(acc: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
    let (mut c0, mut c1, mut c2, mut c3) = (acc[0].to_bits(), acc[1].to_bits(), acc[2].to_bits(), acc[3].to_bits());
    // SAFETY: the caller's (a warp-wide instruction).
    unsafe {
        core::arch::asm!(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{c0}, {c1}, {c2}, {c3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            c0 = inout(reg32) c0,
            c1 = inout(reg32) c1,
            c2 = inout(reg32) c2,
            c3 = inout(reg32) c3,
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            b0 = in(reg32) b[0],
            b1 = in(reg32) b[1],
            options(nostack, nomem)
        )
    };
    *acc = [f32::from_bits(c0), f32::from_bits(c1), f32::from_bits(c2), f32::from_bits(c3)];
}

/// Matrix rows (outputs along `i`) per warp of the tensor-core tile.
const TC_WARP_ROWS: usize = 64;
/// Pairs per warp of the tensor-core tile.
const TC_WARP_PAIRS: usize = 32;
/// 16-row operands per warp.
const TC_M: usize = TC_WARP_ROWS / 16;
/// 8-pair operands per warp.
const TC_N: usize = TC_WARP_PAIRS / 8;
const _: () = assert!(
    (WIDE_BLOCK / TC_WARP_ROWS) * (WIDE_BLOCK / TC_WARP_PAIRS) * 32 == THREADS && WIDE_CHUNK % 8 == 0,
    "eight warps of 64 x 32 cover the wide tile"
);

/// The wide scaling-domain half-step on the tensor cores (see
/// `OtWideScalingF32Args`): a block owns 128 rows × 128 pairs, its eight
/// warps 64 rows × 32 pairs each, as 4 × 4 products of 16 × 8 outputs over
/// 8 columns at a time. Both operands come split into their two TF32 parts
/// (`x ≈ big + small`), already in the order the tensor cores take them
/// (the operator's planes once per solve, the vectors' by the half-step
/// that wrote them), so that staging a chunk is one contiguous copy per
/// operand, made by `cp.async` [`WIDE_STAGES`] - 1 chunks ahead while the
/// tensor cores work; a product is `big big + big small + small big` (the
/// "3xTF32" scheme): float32's precision, at the tensor cores' rate. With
/// one split the block updates its outputs (and their planes) itself; with
/// more, each writes its partial sums and `ot_finish_wide_scaling_f32`
/// updates.
///
/// # Safety
/// As the kernel's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn wide_scaling(
    op: *const u32,
    n: u64,
    d: u64,
    x_in: *const u32,
    splits: u64,
    partial: *mut f32,
    marginal: *const f32,
    x_out: *mut f32,
    err: *mut f32,
    x_out_planes: *mut u32,
) {
    let chunks = d.div_ceil(WIDE_CHUNK as u64);
    let (row_tile, pair_tile, split) =
        tile_of_block(block_idx_x() as u64, d.div_ceil(WIDE_BLOCK as u64), n.div_ceil(WIDE_BLOCK as u64));
    let (first, end) = chunks_of_split(split, splits, chunks);
    let (i0, q0) = (row_tile * WIDE_BLOCK as u64, pair_tile * WIDE_BLOCK as u64);
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let warp_rows = warp % (WIDE_BLOCK / TC_WARP_ROWS) * TC_WARP_ROWS;
    let warp_pairs = warp / (WIDE_BLOCK / TC_WARP_ROWS) * TC_WARP_PAIRS;
    let (group, member) = (lane / 4, lane % 4);
    let shared = dynamic_shared::<u32>();
    // SAFETY: the planes hold every chunk of this block's row and pair
    // tiles (`planes_len`).
    let (rows_from, pairs_from) = unsafe {
        (
            op.add(planes_offset(row_tile, 0, chunks, PLANES_WIDE_ROWS) as usize),
            x_in.add(planes_offset(pair_tile, 0, chunks, PLANES_WIDE_PAIRS) as usize),
        )
    };
    // Starts copying chunk `chunk` (of the tile) into stage `stage`: the
    // rows' two planes, then the vectors' two, each thread 16 bytes at a
    // time, consecutive threads consecutive pieces.
    let stage_copy = |chunk: u64, stage: usize| {
        let offset = chunk as usize * 2 * WIDE_PLANE;
        for k in 0..WIDE_COPIES {
            let at = (k * THREADS + tid) * 4;
            // SAFETY: `at + 4 <= 2 * WIDE_PLANE` (WIDE_COPIES); the
            // chunk's planes lie in the operands (above) and the stage's
            // four planes in the launch's shared memory; 16-byte aligned
            // (multiples of four values from aligned starts).
            unsafe {
                let to = shared.add(stage * WIDE_STAGE);
                copy_async_16(to.add(at), rows_from.add(offset + at));
                copy_async_16(to.add(2 * WIDE_PLANE + at), pairs_from.add(offset + at));
            }
        }
    };
    let mut acc = [[[0.0f32; 4]; TC_N]; TC_M];
    // A staged operand: `N` values of `plane` from `slot` (aligned to `N`
    // values: the slots of a lane's operand start there).
    // SAFETY: (the reads below) slots of operands inside the plane.
    let quad = |plane: *const u32, slot: usize| unsafe { load_quad(plane.add(slot)) };
    let duo = |plane: *const u32, slot: usize| unsafe { (*(plane.add(slot) as *const Duo)).0 };
    // Loops over the warp's operands are written out (`unrolled!`): a loop
    // the compiler leaves rolled would index the arrays below at run time
    // and move them to local memory.
    const _: () = assert!(TC_M == 4 && TC_N == 4, "the loops below run over 4 x 4 operands");
    // The pipeline: the first WIDE_STAGES - 1 chunks are copied ahead;
    // then, per chunk, the thread waits for its own copies of it, the
    // barrier for everyone's (and for every warp to be done with the stage
    // the next copy overwrites, the one computed last), the copy of the
    // chunk WIDE_STAGES - 1 ahead starts, and the tensor cores work on this
    // one. Every thread commits one group per chunk, empty past the end,
    // so that the count of pending groups means the same chunk everywhere.
    const _: () = assert!(WIDE_STAGES >= 2, "one stage computed while the next is copied");
    for ahead in 0..WIDE_STAGES as u64 - 1 {
        if first + ahead < end {
            stage_copy(first + ahead, ahead as usize);
        }
        // SAFETY: a commit.
        unsafe { commit_copies() };
    }
    for chunk in first..end {
        let at = (chunk - first) as usize;
        // SAFETY: every thread reaches both in the same iteration.
        unsafe {
            wait_copies::<{ TRANSPORT_WIDE_STAGES - 2 }>();
            sync_threads();
        }
        let next = chunk + WIDE_STAGES as u64 - 1;
        if next < end {
            stage_copy(next, (at + WIDE_STAGES - 1) % WIDE_STAGES);
        }
        // SAFETY: a commit.
        unsafe { commit_copies() };
        // SAFETY: the stage's four planes lie in the launch's shared memory.
        let (rows_big, rows_small, pairs_big, pairs_small) = unsafe {
            let stage = shared.add(at % WIDE_STAGES * WIDE_STAGE);
            (stage, stage.add(WIDE_PLANE), stage.add(2 * WIDE_PLANE), stage.add(3 * WIDE_PLANE))
        };
        // The tensor cores' own accumulation rounds towards zero: the
        // chunk's sums are taken apart from the running ones, which float32
        // additions (to nearest) then carry.
        let mut sums = [[[0.0f32; 4]; TC_N]; TC_M];
        for step in 0..WIDE_CHUNK / 8 {
            let mut a_big = [[0u32; 4]; TC_M];
            let mut a_small = [[0u32; 4]; TC_M];
            unrolled!(m in [0 1 2 3] => {
                let slot = ((step * (WIDE_BLOCK / 16) + (warp_rows / 16 + m)) * 32 + lane) * 4;
                a_big[m] = quad(rows_big, slot);
                a_small[m] = quad(rows_small, slot);
            });
            unrolled!(t in [0 1 2 3] => {
                let slot = ((step * (WIDE_BLOCK / 8) + (warp_pairs / 8 + t)) * 32 + lane) * 2;
                let (b, s) = (duo(pairs_big, slot), duo(pairs_small, slot));
                unrolled!(m in [0 1 2 3] => {
                    // SAFETY: every lane of the warp runs them together.
                    unsafe {
                        mma_tf32(&mut sums[m][t], a_small[m], b);
                        mma_tf32(&mut sums[m][t], a_big[m], s);
                        mma_tf32(&mut sums[m][t], a_big[m], b);
                    }
                });
            });
        }
        unrolled!(m in [0 1 2 3] => {
            unrolled!(t in [0 1 2 3] => {
                unrolled!(slot in [0 1 2 3] => {
                    acc[m][t][slot] += sums[m][t][slot];
                });
            });
        });
    }
    // Output (m, t, slot) of this thread: its row and pair.
    let row = |m: usize, slot: usize| i0 + (warp_rows + 16 * m + group + 8 * (slot / 2)) as u64;
    let pair = |t: usize, slot: usize| q0 + (warp_pairs + 8 * t + 2 * member + slot % 2) as u64;
    if splits > 1 {
        unrolled!(m in [0 1 2 3] => {
            unrolled!(t in [0 1 2 3] => {
                unrolled!(slot in [0 1 2 3] => {
                    let (i, q) = (row(m, slot), pair(t, slot));
                    if i < d && q < n {
                        // SAFETY: split < splits, q < n, i < d: `partial`
                        // holds splits * n * d values.
                        unsafe { *partial.add(((split * n + q) * d + i) as usize) = acc[m][t][slot] };
                    }
                });
            });
        });
        return;
    }
    // The update of every output, its loads issued together first and
    // without branches (the compiler cannot move a load past a store that
    // may alias it, nor out of a branch): a value outside the vectors
    // reads the first one, and is not used.
    let inside = |m: usize, t: usize, slot: usize| row(m, slot) < d && pair(t, slot) < n;
    let at = |m: usize, t: usize, slot: usize| {
        if inside(m, t, slot) {
            (pair(t, slot) * d + row(m, slot)) as usize
        } else {
            0
        }
    };
    let mut wanted = [[[0.0f32; 4]; TC_N]; TC_M];
    unrolled!(m in [0 1 2 3] => {
        unrolled!(t in [0 1 2 3] => {
            unrolled!(slot in [0 1 2 3] => {
                // SAFETY: `at` lies in the n * d vectors.
                wanted[m][t][slot] = unsafe { *marginal.add(at(m, t, slot)) };
            });
        });
    });
    if !err.is_null() {
        let mut old = [[[0.0f32; 4]; TC_N]; TC_M];
        unrolled!(m in [0 1 2 3] => {
            unrolled!(t in [0 1 2 3] => {
                unrolled!(slot in [0 1 2 3] => {
                    // SAFETY: `at` lies in the n * d vectors.
                    old[m][t][slot] = unsafe { *x_out.add(at(m, t, slot)) };
                });
            });
        });
        unrolled!(m in [0 1 2 3] => {
            unrolled!(t in [0 1 2 3] => {
                unrolled!(slot in [0 1 2 3] => {
                    if inside(m, t, slot) {
                        let error = scaling_error(old[m][t][slot], acc[m][t][slot], wanted[m][t][slot]);
                        // SAFETY: inside the vectors; `err` holds n * d values.
                        unsafe { *err.add(at(m, t, slot)) = error };
                    }
                });
            });
        });
    }
    unrolled!(m in [0 1 2 3] => {
        unrolled!(t in [0 1 2 3] => {
            unrolled!(slot in [0 1 2 3] => {
                if inside(m, t, slot) {
                    let value = new_scaling(wanted[m][t][slot], acc[m][t][slot]);
                    // SAFETY: inside the vectors and their planes.
                    unsafe {
                        *x_out.add(at(m, t, slot)) = value;
                        put_planes(x_out_planes, pair(t, slot), row(m, slot), d, value, PLANES_WIDE_PAIRS);
                    }
                }
            });
        });
    });
}

/// Writes `value`'s two TF32 parts where pair `q`, bin `i` lies in vector
/// planes of `d` columns in `layout` (`planes_index`).
///
/// # Safety
/// `planes` holds `planes_len(n, d, layout)` values for some `n > q`; `i <
/// d`.
#[inline(always)]
pub(crate) unsafe fn put_planes(planes: *mut u32, q: u64, i: u64, d: u64, value: f32, layout: u32) {
    let (big, small) = split_tf32(value);
    let at = planes_index(q, i, d, layout) as usize;
    let plane = planes_plane(layout) as usize;
    // SAFETY: the caller's: the big part's index and the small part's, a
    // plane further, lie in the planes.
    unsafe {
        *planes.add(at) = big;
        *planes.add(at + plane) = small;
    }
}

/// The log-domain tile (see `OtTileLogF32Args`). Per chunk of columns,
/// every term `p - r` of an output is at most `hi - lo`, the largest staged
/// vector value of its pair less the smallest staged row value of its row,
/// and `2^(p - r - (hi - lo)) = 2^(p - hi) 2^(lo - r)`: the powers are
/// taken once per staged value, not per term, and the chunk's sums are a
/// product of the two staged power matrices, one multiply-add per term. A
/// bound far above the chunk's largest term would lose that term to
/// underflow; a sum below `T::FLOOR` is the sign of it (the largest term
/// is at least the sum over `CHUNK`), and then that output's chunk is taken
/// again exactly from the staged values: its largest term, then the powers
/// above it.
///
/// # Safety
/// As the kernels'.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_log<T: TileReal>(
    c: *const T,
    n: u64,
    d: u64,
    scale: T,
    p_in: *const T,
    splits: u64,
    part_max: *mut T,
    part_sum: *mut T,
) {
    let place = TilePlace::new(n, d, splits);
    let rows = dynamic_shared::<T>();
    // SAFETY: the launch's shared memory holds TRANSPORT_LOG_SHARED_ELEMENTS
    // values: four staged arrays of CHUNK * STRIDE, then two bounds of BLOCK.
    let (vectors, row_powers, vector_powers, row_bounds, pair_bounds) = unsafe {
        (
            rows.add(CHUNK * STRIDE),
            rows.add(2 * CHUNK * STRIDE),
            rows.add(3 * CHUNK * STRIDE),
            rows.add(4 * CHUNK * STRIDE),
            rows.add(4 * CHUNK * STRIDE + BLOCK),
        )
    };
    let tid = thread_idx_x() as usize;
    let mut max = [[T::NEG_INFINITY; MICRO]; MICRO];
    let mut sum = [[T::ZERO; MICRO]; MICRO];
    // SAFETY: the kernel's bounds; every thread takes part.
    let fetch = |j0| unsafe {
        (
            fetch(c, d, d, place.i0, j0, T::ZERO, |v| v * scale),
            fetch(p_in, n, d, place.q0, j0, T::NEG_INFINITY, |v| v * scale),
        )
    };
    // Each staged row's (pair's) CHUNK columns are held by the 16 lanes of
    // a half warp: their smallest (largest) value by shuffles, then the
    // powers above it.
    let put = |next: &Fetched<T>| {
        for k in 0..PER_THREAD {
            let (r, p) = (next.0[k], next.1[k]);
            let (mut lo, mut hi) = (r, p);
            for step in 0..4 {
                // SAFETY: every lane of the warp runs this (no lane skips a chunk).
                unsafe {
                    lo = T::min(lo, lo.shuffle_xor(8 >> step));
                    hi = T::max(hi, hi.shuffle_xor(8 >> step));
                }
            }
            let hi_shift = if hi > T::NEG_INFINITY { hi } else { T::ZERO };
            let e = k * THREADS + tid;
            let (row, column) = (e / CHUNK, e % CHUNK);
            let at = column * STRIDE + row;
            // SAFETY: at < CHUNK * STRIDE, row < BLOCK.
            unsafe {
                *rows.add(at) = r;
                *vectors.add(at) = p;
                *row_powers.add(at) = T::Power::exp(lo - r);
                *vector_powers.add(at) = T::Power::exp(p - hi_shift);
                if column == 0 {
                    *row_bounds.add(row) = lo;
                    *pair_bounds.add(row) = hi;
                }
            }
        }
    };
    // SAFETY: the staged chunks are read between the helper's barriers.
    unsafe {
        for_each_chunk(&place, fetch, put, || {
            let mut part = [[T::ZERO; MICRO]; MICRO];
            for j in 0..CHUNK {
                let (r, p) = staged(row_powers, vector_powers, j, &place);
                for a in 0..MICRO {
                    for b in 0..MICRO {
                        part[a][b] = T::fma(r[a], p[b], part[a][b]);
                    }
                }
            }
            let lo: [T; MICRO] = load_quad(row_bounds.add(place.ti * MICRO));
            let hi: [T; MICRO] = load_quad(pair_bounds.add(place.tq * MICRO));
            let mut top = [[T::ZERO; MICRO]; MICRO];
            for_each_output!(a, b => {
                top[a][b] = hi[b] - lo[a];
                if hi[b] > T::NEG_INFINITY && part[a][b] < T::FLOOR {
                    let rows_at = rows.add(place.ti * MICRO + a);
                    let vectors_at = vectors.add(place.tq * MICRO + b);
                    (top[a][b], part[a][b]) = exact_term_sum(rows_at, vectors_at);
                }
            });
            // The chunk's state (bound or largest term, sum above it) merged
            // into the running one, without branches; a pair whose values
            // are all -inf adds nothing.
            for_each_output!(a, b => {
                let big = T::max(max[a][b], top[a][b]);
                let merged =
                    sum[a][b] * T::Power::exp(max[a][b] - big) + part[a][b] * T::Power::exp(top[a][b] - big);
                let keep = hi[b] > T::NEG_INFINITY;
                sum[a][b] = if keep { merged } else { sum[a][b] };
                max[a][b] = if keep { big } else { max[a][b] };
            });
        })
    };
    // SAFETY: both outputs hold splits * n * d values.
    unsafe {
        place.write(n, d, part_max, &max);
        place.write(n, d, part_sum, &sum);
    }
}

/// One output of a staged log-domain chunk taken exactly: its largest
/// term `vectors[j] - rows[j]` over the chunk's columns `j` (at distance
/// `STRIDE`), and the sum of its terms' powers above it. Kept out of line:
/// it is the rare path, and inlined sixteen times it would cost the common
/// one its registers.
///
/// # Safety
/// `rows` and `vectors` point to one row and one pair of the staged
/// chunks, read between barriers; some `vectors[j]` is finite.
#[inline(never)]
unsafe fn exact_term_sum<T: TileReal>(rows: *const T, vectors: *const T) -> (T, T) {
    // SAFETY: j * STRIDE stays inside the staged chunks.
    let term = |j: usize| unsafe { *vectors.add(j * STRIDE) - *rows.add(j * STRIDE) };
    let mut top = T::NEG_INFINITY;
    for j in 0..CHUNK {
        top = T::max(top, term(j));
    }
    let mut sum = T::ZERO;
    for j in 0..CHUNK {
        sum = sum + T::Power::exp(term(j) - top);
    }
    (top, sum)
}

/// The cost tile (see `OtTileCostF32Args`).
///
/// # Safety
/// As the kernels'.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_cost<T: TileReal>(
    c: *const T,
    n: u64,
    d: u64,
    scale: T,
    f: *const T,
    g: *const T,
    splits: u64,
    partial: *mut T,
) {
    let place = TilePlace::new(n, d, splits);
    let rows = dynamic_shared::<T>();
    // SAFETY: the launch's shared memory holds 2 * CHUNK * STRIDE values.
    let vectors = unsafe { rows.add(CHUNK * STRIDE) };
    // This thread's first potentials, -inf where the pair or row does not exist.
    let fi: [[T; MICRO]; MICRO] = core::array::from_fn(|a| {
        core::array::from_fn(|b| {
            let (i, q) = (place.row(a), place.pair(b));
            // SAFETY: q < n, i < d.
            if i < d && q < n {
                unsafe { *f.add((q * d + i) as usize) }
            } else {
                T::NEG_INFINITY
            }
        })
    });
    let mut acc = [[T::ZERO; MICRO]; MICRO];
    // SAFETY: the kernel's bounds; every thread takes part.
    let fetch = |j0| unsafe {
        (fetch(c, d, d, place.i0, j0, T::ZERO, |v| v), fetch(g, n, d, place.q0, j0, T::NEG_INFINITY, |v| v))
    };
    // SAFETY: the staged chunks are read between the helper's barriers.
    unsafe {
        for_each_staged_chunk(&place, rows, vectors, fetch, || {
            for j in 0..CHUNK {
                let (r, p) = staged(rows, vectors, j, &place);
                for a in 0..MICRO {
                    for b in 0..MICRO {
                        let fg = fi[a][b] + p[b];
                        if fg > T::NEG_INFINITY {
                            acc[a][b] = T::fma(T::Power::exp((fg - r[a]) * scale), fg, acc[a][b]);
                        }
                    }
                }
            }
        })
    };
    // SAFETY: `partial` holds splits * n * d values.
    unsafe { place.write(n, d, partial, &acc) };
}

/// The scaling-domain update of value `k` given `s = (op x_in)[k]`: the
/// error of the old scaling on request, then `x_out[k] = marginal[k] / s`
/// (0 where the marginal is 0).
///
/// # Safety
/// `k` lies in `marginal`, `x_out` and (when not null) `err`.
#[inline(always)]
unsafe fn scaling_epilogue<T: Real>(k: usize, s: T, marginal: *const T, x_out: *mut T, err: *mut T) {
    // SAFETY: the caller's.
    unsafe {
        let m = *marginal.add(k);
        if !err.is_null() {
            *err.add(k) = scaling_error(*x_out.add(k), s, m);
        }
        *x_out.add(k) = new_scaling(m, s);
    }
}

/// The new scaling of a value whose marginal is `m` and whose product with
/// the other side's scalings is `s`: `m / s`, 0 where the marginal is 0.
#[inline(always)]
pub(crate) fn new_scaling<T: Real>(m: T, s: T) -> T {
    if m > T::ZERO {
        m / s
    } else {
        T::ZERO
    }
}

/// The marginal error of the old scaling `old`: `|old s - m|`.
#[inline(always)]
pub(crate) fn scaling_error<T: Real>(old: T, s: T, m: T) -> T {
    abs(old * s - m)
}

/// The log-domain update of value `k` given its log-sum-exp state (in the
/// base of `T::Power`): the error of the old potential on request, then
/// the new potential.
///
/// # Safety
/// `k` lies in `marginal`, `p_out` and (when not null) `err`.
#[inline(always)]
unsafe fn log_epilogue<T: TileReal, M: Math<T>>(
    k: usize,
    state: LogSumExp<T>,
    reg: T,
    marginal: *const T,
    p_out: *mut T,
    err: *mut T,
) {
    let lse =
        if state.max == T::NEG_INFINITY { T::NEG_INFINITY } else { (state.max + T::Power::ln(state.sum)) * T::LN_BASE };
    // SAFETY: the caller's.
    unsafe {
        let m = *marginal.add(k);
        if !err.is_null() {
            let old = *p_out.add(k);
            let plan = if old == T::NEG_INFINITY || lse == T::NEG_INFINITY { T::ZERO } else { M::exp(old / reg + lse) };
            *err.add(k) = abs(plan - m);
        }
        *p_out.add(k) = log_domain_potential::<T, M>(m, reg, lse);
    }
}

/// The scaling-domain update of one (pair, bin) from its splits (see
/// `OtFinishScalingF32Args`).
///
/// # Safety
/// As the kernels'; `k < n * d`.
#[inline(always)]
unsafe fn finish_scaling<T: Real>(
    k: usize,
    len: usize,
    splits: u64,
    partial: *const T,
    marginal: *const T,
    x_out: *mut T,
    err: *mut T,
) {
    let mut s = T::ZERO;
    // UNROLL splits at a time, their loads issued together.
    let mut base = 0;
    while base < splits as usize {
        // SAFETY: split * len + k < splits * len where read.
        let parts: [T; UNROLL] = core::array::from_fn(|u| {
            if base + u < splits as usize {
                unsafe { *partial.add((base + u) * len + k) }
            } else {
                T::ZERO
            }
        });
        for part in parts {
            s = s + part;
        }
        base += UNROLL;
    }
    // SAFETY: k < n * d.
    unsafe { scaling_epilogue(k, s, marginal, x_out, err) }
}

/// The log-domain update of one (pair, bin) from its splits (see
/// `OtFinishLogF32Args`).
///
/// # Safety
/// As the kernels'; `k < n * d`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn finish_log<T: TileReal, M: Math<T>>(
    k: usize,
    len: usize,
    reg: T,
    splits: u64,
    part_max: *const T,
    part_sum: *const T,
    marginal: *const T,
    p_out: *mut T,
    err: *mut T,
) {
    let mut state = LogSumExp::<T>::EMPTY;
    // UNROLL splits at a time, their loads issued together.
    let mut base = 0;
    while base < splits as usize {
        // SAFETY: split * len + k < splits * len where read.
        let parts: [LogSumExp<T>; UNROLL] = core::array::from_fn(|u| {
            if base + u < splits as usize {
                let at = (base + u) * len + k;
                unsafe { LogSumExp { max: *part_max.add(at), sum: *part_sum.add(at) } }
            } else {
                LogSumExp::EMPTY
            }
        });
        for part in parts {
            state = state.merge::<T::Power>(part);
        }
        base += UNROLL;
    }
    // SAFETY: k < n * d.
    unsafe { log_epilogue::<T, M>(k, state, reg, marginal, p_out, err) }
}

/// Pairs per warp of the row kernels, as an index type.
const ROW_PAIRS: usize = TRANSPORT_ROW_PAIRS as usize;
/// Columns each lane of a row kernel loads at once.
const UNROLL: usize = 4;
const _: () = assert!(ROW_PAIRS == 8 && UNROLL == 4, "the row kernels write out 8 pairs and 4 columns");

/// Calls `f(row, first_pair, lane)` for every (row, tile of `ROW_PAIRS`
/// pairs) this warp owns; warp-uniform, so `f` may use warp shuffles.
#[inline(always)]
fn for_each_row_of_warp(d: u64, n: u64, mut f: impl FnMut(usize, usize, usize)) {
    let lane = (thread_idx_x() & 31) as usize;
    let warps_per_block = (block_dim_x() / 32) as u64;
    let mut w = block_idx_x() as u64 * warps_per_block + (thread_idx_x() / 32) as u64;
    let works = d * n.div_ceil(ROW_PAIRS as u64);
    while w < works {
        f((w % d) as usize, (w / d) as usize * ROW_PAIRS, lane);
        w += grid_dim_x() as u64 * warps_per_block;
    }
}

/// `values[lane]` for `lane < ROW_PAIRS` without indexing by a register
/// (which would put the array in local memory).
#[inline(always)]
fn pick<T: Copy>(values: &[T; ROW_PAIRS], lane: usize) -> T {
    let mut v = values[0];
    for (q, &x) in values.iter().enumerate().skip(1) {
        if lane == q {
            v = x;
        }
    }
    v
}

/// The products of matrix row `row` (`d` values) with the vectors of
/// pairs `first ..` up to `first + ROW_PAIRS` and `n` (rows of `d` values
/// at `x`), summed over the warp: every lane holds all of them. `WHOLE`:
/// `d` is a multiple of `32 U`, so that no column needs a bounds check.
///
/// # Safety
/// The whole warp calls it with the same arguments (warp-uniform); `row`
/// holds `d` readable values and `x` `n * d`; `WHOLE` only when `32 U`
/// divides `d`.
#[inline(always)]
unsafe fn row_products<T: TileReal, const U: usize, const WHOLE: bool>(
    row: *const T,
    x: *const T,
    first: usize,
    n: usize,
    d: usize,
    lane: usize,
) -> [T; ROW_PAIRS] {
    let mut acc = [T::ZERO; ROW_PAIRS];
    let inside = |column: usize| WHOLE || column < d;
    // U columns per lane at a time, their loads issued together.
    let mut base = 0;
    while base < d {
        let columns: [usize; U] = core::array::from_fn(|u| base + lane + 32 * u);
        // SAFETY: column < d where read.
        let k: [T; U] =
            core::array::from_fn(|u| if inside(columns[u]) { unsafe { *row.add(columns[u]) } } else { T::ZERO });
        unrolled!(q in [0 1 2 3 4 5 6 7] => {
            if first + q < n {
                for u in 0..U {
                    if inside(columns[u]) {
                        // SAFETY: pair first + q < n, column < d.
                        acc[q] = T::fma(k[u], unsafe { *x.add((first + q) * d + columns[u]) }, acc[q]);
                    }
                }
            }
        });
        base += 32 * U;
    }
    unrolled!(q in [0 1 2 3 4 5 6 7] => {
        unrolled!(step in [0 1 2 3 4] => {
            // SAFETY: the whole warp runs this (the caller's).
            acc[q] = acc[q] + unsafe { acc[q].shuffle_xor(16 >> step) };
        });
    });
    acc
}

/// The scaling-domain row kernel (see `OtRowsScalingF32Args`).
///
/// # Safety
/// As the kernel's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_scaling<T: TileReal, const U: usize>(
    op: *const T,
    n: u64,
    d: u64,
    x_in: *const T,
    marginal: *const T,
    x_out: *mut T,
    err: *mut T,
) {
    let (n_us, d_us) = (n as usize, d as usize);
    for_each_row_of_warp(d, n, |i, first, lane| {
        // SAFETY: row i < d of the d * d matrix; the work is warp-uniform.
        let acc = unsafe { row_products::<T, U, false>(op.add(i * d_us), x_in, first, n_us, d_us, lane) };
        let s = pick(&acc, lane);
        if lane < ROW_PAIRS && first + lane < n_us {
            // SAFETY: pair first + lane < n, bin i < d.
            unsafe { scaling_epilogue((first + lane) * d_us + i, s, marginal, x_out, err) };
        }
    });
}

/// Copies `len` values from global memory at `from` to shared memory at
/// `to`, the block's threads striding over them, eight loads in flight
/// per thread.
///
/// # Safety
/// Every thread of the block calls it with the same arguments; `from`
/// holds `len` readable values and `to` `len` writable ones.
#[inline(always)]
unsafe fn copy_to_shared<T: Real>(from: *const T, to: *mut T, len: usize) {
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut base = 0;
    while base < len {
        let at: [usize; 8] = core::array::from_fn(|u| base + tid + threads * u);
        // SAFETY: at[u] < len where read and written.
        let values: [T; 8] = core::array::from_fn(|u| if at[u] < len { unsafe { *from.add(at[u]) } } else { T::ZERO });
        for u in 0..8 {
            if at[u] < len {
                // SAFETY: as above.
                unsafe { *to.add(at[u]) = values[u] };
            }
        }
        base += 8 * threads;
    }
}

/// Writes `v` to the sixteen bytes at `p` (any state space), as one
/// vector store.
///
/// # Safety
/// `p` is 16-byte aligned and writable.
#[inline(always)]
unsafe fn store_16_bytes(p: *mut u32, v: [u32; 4]) {
    // SAFETY: the caller's.
    unsafe {
        core::arch::asm!(
            "st.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
            a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3],
            p = in(reg64) p,
            options(nostack, preserves_flags)
        );
    }
}

/// Copies `len` values as [`copy_to_shared`] does, sixteen bytes per
/// access and eight accesses in flight per thread (the last values
/// singly): for the vectors each resident half-step stages.
///
/// # Safety
/// As [`copy_to_shared`]; `from` and `to` are 16-byte aligned.
#[inline(always)]
unsafe fn copy_to_shared_wide<T: Real>(from: *const T, to: *mut T, len: usize) {
    let per_unit = 16 / core::mem::size_of::<T>();
    let units = len / per_unit;
    let (source, target) = (from as *const u32, to as *mut u32);
    let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut base = 0;
    while base < units {
        let mut values = [[0u32; 4]; 8];
        unrolled!(u in [0 1 2 3 4 5 6 7] => {
            let at = base + tid + threads * u;
            if at < units {
                // SAFETY: unit at < units lies in the source (16-byte
                // aligned, the caller's).
                values[u] = unsafe { load_16_bytes(source.add(4 * at)) };
            }
        });
        unrolled!(u in [0 1 2 3 4 5 6 7] => {
            let at = base + tid + threads * u;
            if at < units {
                // SAFETY: as above, in the target.
                unsafe { store_16_bytes(target.add(4 * at), values[u]) };
            }
        });
        base += 8 * threads;
    }
    let tail = units * per_unit + tid;
    if tail < len {
        // SAFETY: tail < len; fewer than `per_unit` values remain.
        unsafe { *to.add(tail) = *from.add(tail) };
    }
}

/// One scaling-domain half-step of a resident block: `x_out = marginal /
/// (op x_in)` on the block's `own` rows, whose matrix rows `own_op` holds
/// in shared memory from global row `first_row` on; `x_in` passes through
/// the block's shared `vectors`. `WHOLE` as [`row_products`]'.
///
/// # Safety
/// Every thread of the block calls it with the same arguments, no thread
/// still reading `vectors`; `own_op` holds `own * d` values, `vectors`
/// room for `n * d`; `x_in`, `marginal` and `x_out` hold `n * d`; `x_in`
/// and `vectors` are 16-byte aligned; rows `first_row .. first_row + own`
/// lie below `d`; `WHOLE` only when `32 U` divides `d`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn resident_half_step<T: TileReal, const U: usize, const WHOLE: bool>(
    own_op: *const T,
    vectors: *mut T,
    first_row: usize,
    own: usize,
    n: usize,
    d: usize,
    x_in: *const T,
    marginal: *const T,
    x_out: *mut T,
) {
    // SAFETY: the caller's; the barrier orders the copy before the reads.
    unsafe {
        copy_to_shared_wide(x_in, vectors, n * d);
        sync_threads();
    }
    let lane = (thread_idx_x() & 31) as usize;
    let warps = (block_dim_x() / 32) as usize;
    let mut w = (thread_idx_x() / 32) as usize;
    let works = own * n.div_ceil(ROW_PAIRS);
    while w < works {
        let (r, first) = (w % own, w / own * ROW_PAIRS);
        // SAFETY: local row r < own of `own_op`; the work is warp-uniform;
        // WHOLE as the caller's.
        let acc = unsafe { row_products::<T, U, WHOLE>(own_op.add(r * d), vectors, first, n, d, lane) };
        let s = pick(&acc, lane);
        if lane < ROW_PAIRS && first + lane < n {
            // SAFETY: pair first + lane < n, bin first_row + r < d.
            unsafe { scaling_epilogue((first + lane) * d + first_row + r, s, marginal, x_out, core::ptr::null_mut()) };
        }
        w += warps;
    }
}

/// `iterations` resident scaling iterations (see `ot_resident_scaling_*`)
/// on a block whose shared memory holds the vectors and then its rows of
/// `columns` and `rows`.
///
/// # Safety
/// As the kernels'; `WHOLE` only when `32 U` divides `d`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn resident_iterations<T: TileReal, const U: usize, const WHOLE: bool>(
    shared: *mut T,
    first_row: usize,
    own: usize,
    per: usize,
    n: usize,
    d: usize,
    a: *const T,
    b: *const T,
    f: *mut T,
    g: *mut T,
    iterations: u64,
    barrier: *mut u32,
) {
    // SAFETY: the caller's: the shared memory holds (n + 2 per) d values,
    // the vectors first (16-byte aligned, as f and g are); every thread of
    // the grid takes part in each half-step and barrier.
    unsafe {
        let (vectors, own_columns, own_rows) = (shared, shared.add(n * d), shared.add((n + per) * d));
        let mut round = 0;
        for _ in 0..iterations {
            resident_half_step::<T, U, WHOLE>(own_columns, vectors, first_row, own, n, d, f, b, g);
            round += 1;
            grid_barrier(barrier, round);
            resident_half_step::<T, U, WHOLE>(own_rows, vectors, first_row, own, n, d, g, a, f);
            round += 1;
            grid_barrier(barrier, round);
        }
    }
}

/// The log-domain row kernel (see `OtRowsLogF32Args`).
///
/// # Safety
/// As the kernel's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_log<T: TileReal, M: Math<T>>(
    c: *const T,
    n: u64,
    d: u64,
    reg: T,
    scale: T,
    p_in: *const T,
    marginal: *const T,
    p_out: *mut T,
    err: *mut T,
) {
    let (n_us, d_us) = (n as usize, d as usize);
    for_each_row_of_warp(d, n, |i, first, lane| {
        let mut states = [LogSumExp::<T>::EMPTY; ROW_PAIRS];
        // UNROLL columns per lane at a time, their loads issued together.
        let mut base = 0;
        while base < d_us {
            let columns: [usize; UNROLL] = core::array::from_fn(|u| base + lane + 32 * u);
            // SAFETY: i, j < d where read.
            let cost: [T; UNROLL] = core::array::from_fn(|u| {
                if columns[u] < d_us {
                    unsafe { *c.add(i * d_us + columns[u]) * scale }
                } else {
                    T::ZERO
                }
            });
            unrolled!(q in [0 1 2 3 4 5 6 7] => {
                if first + q < n_us {
                    // SAFETY: pair first + q < n, column < d where read.
                    let p: [T; UNROLL] = core::array::from_fn(|u| {
                        if columns[u] < d_us {
                            unsafe { *p_in.add((first + q) * d_us + columns[u]) }
                        } else {
                            T::NEG_INFINITY
                        }
                    });
                    unrolled!(u in [0 1 2 3] => {
                        if p[u] > T::NEG_INFINITY {
                            states[q] = states[q].push::<T::Power>(p[u] * scale - cost[u]);
                        }
                    });
                }
            });
            base += 32 * UNROLL;
        }
        unrolled!(q in [0 1 2 3 4 5 6 7] => {
            unrolled!(step in [0 1 2 3 4] => {
                let mask = 16 >> step;
                // SAFETY: the whole warp runs this (warp-uniform work).
                let other = unsafe {
                    LogSumExp { max: states[q].max.shuffle_xor(mask), sum: states[q].sum.shuffle_xor(mask) }
                };
                states[q] = states[q].merge::<T::Power>(other);
            });
        });
        let state = pick(&states, lane);
        if lane < ROW_PAIRS && first + lane < n_us {
            // SAFETY: pair first + lane < n, bin i < d.
            unsafe { log_epilogue::<T, M>((first + lane) * d_us + i, state, reg, marginal, p_out, err) };
        }
    });
}

/// Values summed per thread of a pair-statistics block: the cost, the
/// finite `f` and their count, the finite `g` and their count.
const STATS: usize = 5;

/// The pair statistics (see `OtPairStatsF32Args`).
///
/// # Safety
/// As the kernel's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pair_stats<T: Real + ViaF64>(
    n: u64,
    d: u64,
    partial: *const T,
    f: *const T,
    g: *const T,
    cost: *mut T,
    f_centred: *mut T,
    g_centred: *mut T,
) {
    let tid = thread_idx_x() as usize;
    let shared = dynamic_shared::<f64>();
    let d_us = d as usize;
    let mut t = block_idx_x() as usize;
    while t < n as usize {
        let mut sums = [0.0f64; STATS];
        let mut i = tid;
        while i < d_us {
            // SAFETY: t < n, i < d.
            unsafe {
                let k = t * d_us + i;
                sums[0] += (*partial.add(k)).to_f64();
                let (fv, gv) = (*f.add(k), *g.add(k));
                if fv > T::NEG_INFINITY {
                    sums[1] += fv.to_f64();
                    sums[2] += 1.0;
                }
                if gv > T::NEG_INFINITY {
                    sums[3] += gv.to_f64();
                    sums[4] += 1.0;
                }
            }
            i += THREADS;
        }
        // SAFETY: indices below STATS * THREADS (the launched shared
        // memory); barriers reached by every thread of the block.
        unsafe {
            for (s, v) in sums.iter().enumerate() {
                *shared.add(s * THREADS + tid) = *v;
            }
            sync_threads();
            let mut stride = THREADS / 2;
            while stride > 0 {
                if tid < stride {
                    for s in 0..STATS {
                        *shared.add(s * THREADS + tid) += *shared.add(s * THREADS + tid + stride);
                    }
                }
                sync_threads();
                stride /= 2;
            }
            let total: [f64; STATS] = core::array::from_fn(|s| *shared.add(s * THREADS));
            if tid == 0 {
                *cost.add(t) = T::from_f64(total[0]);
            }
            if !f_centred.is_null() {
                let f_mean = T::from_f64(if total[2] > 0.0 { total[1] / total[2] } else { 0.0 });
                let g_mean = T::from_f64(if total[4] > 0.0 { total[3] / total[4] } else { 0.0 });
                let mut i = tid;
                while i < d_us {
                    let k = t * d_us + i;
                    *f_centred.add(k) = *f.add(k) - f_mean;
                    *g_centred.add(k) = *g.add(k) - g_mean;
                    i += THREADS;
                }
            }
            // The next pair reuses the shared memory.
            sync_threads();
        }
        t += grid_dim_x() as usize;
    }
}

/// Declares the float32 and float64 kernels.
macro_rules! transport_kernels {
    ($($real:ty, $math:ty: $prepare:ident $prepare_args:ident, $check:ident $check_args:ident,
       $pair_stats:ident $pair_stats_args:ident, $fill:ident $fill_args:ident,
       $potentials:ident $potentials_args:ident,
       $tile_scaling:ident $tile_scaling_args:ident, $tile_log:ident $tile_log_args:ident,
       $tile_cost:ident $tile_cost_args:ident, $finish_scaling:ident $finish_scaling_args:ident,
       $finish_log:ident $finish_log_args:ident, $finish_sum:ident $finish_sum_args:ident,
       $rows_scaling:ident $rows_scaling_args:ident, $rows_log:ident $rows_log_args:ident;)*) => {$(
        kernel! {
            /// A scaling-domain half-step for few pairs: `x_out = marginal /
            /// (op x_in)` bin by bin (0 where the marginal is 0), with the
            /// marginal error of the old `x_out` on request.
            ///
            /// # Safety
            /// `op` holds `d * d` values; `x_in`, `marginal` and `x_out` `n *
            /// d`; `err` `n * d` or null; launched with whole warps.
            ///
            /// # Parameters
            /// - `op`: the Gibbs kernel (or its transpose); `n`, `d`: pairs and bins;
            /// - `x_in`: the other side's scalings; `marginal`: this side's histograms;
            /// - `x_out`: this side's scalings (read, then written); `err`: errors or null.
            ///
            /// # Thread mapping
            /// A warp per (row, `TRANSPORT_ROW_PAIRS` pairs), grid-stride over
            /// them; its lanes stride over the row's columns, then sum by
            /// shuffles, and lane `q` updates pair `q`.
            pub unsafe extern "ptx-kernel" fn $rows_scaling(
                op: *const $real,
                n: u64,
                d: u64,
                x_in: *const $real,
                marginal: *const $real,
                x_out: *mut $real,
                err: *mut $real,
            ) as $rows_scaling_args {
                // SAFETY: the kernel's contract.
                unsafe { rows_scaling::<$real, UNROLL>(op, n, d, x_in, marginal, x_out, err) }
            }
        }

        kernel! {
            /// A log-domain half-step for few pairs: `p_out = reg ln marginal
            /// - reg logsumexp((p_in - c) / reg)` bin by bin (-inf where the
            /// marginal is 0), the log-sum-exp in one pass per lane merged by
            /// shuffles from the empty state, with the marginal error of the
            /// old `p_out` on request.
            ///
            /// # Safety
            /// As `ot_rows_scaling_*`, with `c` the cost matrix (or its
            /// transpose), `reg > 0` and `scale` the terms' factor.
            ///
            /// # Parameters
            /// - `c`: the cost rows; `n`, `d`: pairs and bins; `reg`, `scale`: the regularisation and factor;
            /// - `p_in`: the other side's potentials; `marginal`: this side's histograms;
            /// - `p_out`: this side's potentials (read, then written); `err`: errors or null.
            ///
            /// # Thread mapping
            /// As `ot_rows_scaling_*`.
            pub unsafe extern "ptx-kernel" fn $rows_log(
                c: *const $real,
                n: u64,
                d: u64,
                reg: $real,
                scale: $real,
                p_in: *const $real,
                marginal: *const $real,
                p_out: *mut $real,
                err: *mut $real,
            ) as $rows_log_args {
                // SAFETY: the kernel's contract.
                unsafe { rows_log::<$real, $math>(c, n, d, reg, scale, p_in, marginal, p_out, err) }
            }
        }

        kernel! {
            /// Copies a `d × d` matrix and its transpose, exponentiated as
            /// `e^(-x / reg)` (the Gibbs kernel, in float64 arithmetic) when
            /// `exponentiate` is 1.
            ///
            /// # Safety
            /// `m`, `out` and `out_t` hold `d * d` values; `d * d` fits u64.
            ///
            /// # Parameters
            /// - `m`, `d`: the matrix; `reg`: the regularisation;
            /// - `exponentiate`: 1 for the Gibbs kernel, 0 for a copy;
            /// - `out`, `out_t`: the result and its transpose.
            ///
            /// # Thread mapping
            /// Grid-stride loop over the `d * d` entries.
            pub unsafe extern "ptx-kernel" fn $prepare(
                m: *const $real,
                d: u64,
                reg: $real,
                exponentiate: u32,
                out: *mut $real,
                out_t: *mut $real,
            ) as $prepare_args {
                let du = d as usize;
                // SAFETY: k < d * d, so i, j < d.
                grid_stride(d * d, |k| unsafe {
                    let (i, j) = (k as usize / du, k as usize % du);
                    let x = *m.add(k as usize);
                    let v = if exponentiate == 1 { exp_f64(-(x as f64) / reg as f64) as $real } else { x };
                    *out.add(k as usize) = v;
                    *out_t.add(j * du + i) = v;
                });
            }
        }

        kernel! {
            /// Flags histograms that are negative or not finite and cost
            /// matrices that are not finite (see `OtCheckF32Args`).
            ///
            /// # Safety
            /// `a` and `b` hold `len` values, `m` `m_len`; `flags` is one
            /// writable word.
            ///
            /// # Parameters
            /// - `a`, `b`, `len`: the histograms; `m`, `m_len`: the cost matrix;
            /// - `flags`: bit 0 for `a`, 1 for `b`, 2 for `m`, set when bad.
            ///
            /// # Thread mapping
            /// Warp-aligned grid-stride loops; one atomic OR per warp that
            /// found something.
            pub unsafe extern "ptx-kernel" fn $check(
                a: *const $real,
                b: *const $real,
                len: u64,
                m: *const $real,
                m_len: u64,
                flags: *mut u32,
            ) as $check_args {
                let histogram_bad = |x: $real| !(x >= 0.0 && x < <$real>::INFINITY);
                let lane = thread_idx_x() & 31;
                warp_uniform_stride(len.max(m_len), |k, _| {
                    // SAFETY: k < len or k < m_len where read.
                    let (bad_a, bad_b, bad_m) = unsafe {
                        (
                            k < len && histogram_bad(*a.add(k as usize)),
                            k < len && histogram_bad(*b.add(k as usize)),
                            k < m_len && !(*m.add(k as usize)).is_finite(),
                        )
                    };
                    // SAFETY: every lane of the warp takes part (warp_uniform_stride).
                    let found = unsafe {
                        (ballot(bad_a) != 0) as u32 | ((ballot(bad_b) != 0) as u32) << 1 | ((ballot(bad_m) != 0) as u32) << 2
                    };
                    if lane == 0 && found != 0 {
                        // SAFETY: `flags` is one writable word.
                        unsafe { atomic_or_u32(flags, found) };
                    }
                });
            }
        }

        kernel! {
            /// Each pair's cost from its rows' parts, and the potentials
            /// centred on their finite values' mean (see
            /// `OtPairStatsF32Args`).
            ///
            /// # Safety
            /// `partial`, `f` and `g` hold `n * d` values, `cost` `n`;
            /// `f_centred` and `g_centred` `n * d` each, or `f_centred` is
            /// null; launched with `TRANSPORT_THREADS` threads and
            /// `TRANSPORT_THREADS * 5` float64 values of shared memory.
            ///
            /// # Parameters
            /// - `n`, `d`: pairs and bins; `partial`: the rows' parts; `f`, `g`: the potentials;
            /// - `cost`: the costs; `f_centred`, `g_centred`: the centred potentials, or null.
            ///
            /// # Thread mapping
            /// A block per pair (grid-stride over pairs); its threads stride
            /// over the bins, then reduce in a fixed tree.
            pub unsafe extern "ptx-kernel" fn $pair_stats(
                n: u64,
                d: u64,
                partial: *const $real,
                f: *const $real,
                g: *const $real,
                cost: *mut $real,
                f_centred: *mut $real,
                g_centred: *mut $real,
            ) as $pair_stats_args {
                // SAFETY: the kernel's contract.
                unsafe { pair_stats::<$real>(n, d, partial, f, g, cost, f_centred, g_centred) }
            }
        }

        kernel! {
            /// Sets every value to `value`.
            ///
            /// # Safety
            /// `x` holds `len` values.
            ///
            /// # Parameters
            /// - `x`, `len`: the values; `value`: what they become.
            ///
            /// # Thread mapping
            /// Grid-stride loop, one value per iteration.
            pub unsafe extern "ptx-kernel" fn $fill(x: *mut $real, len: u64, value: $real) as $fill_args {
                // SAFETY: k < len.
                grid_stride(len, |k| unsafe { *x.add(k as usize) = value });
            }
        }

        kernel! {
            /// Scalings to potentials in place: `x = reg ln x` (-inf for 0).
            ///
            /// # Safety
            /// `x` holds `len` values.
            ///
            /// # Parameters
            /// - `x`, `len`: the values; `reg`: the regularisation.
            ///
            /// # Thread mapping
            /// Grid-stride loop, one value per iteration.
            pub unsafe extern "ptx-kernel" fn $potentials(x: *mut $real, len: u64, reg: $real) as $potentials_args {
                // SAFETY: k < len.
                grid_stride(len, |k| unsafe {
                    let v = x.add(k as usize);
                    *v = reg * <$math as Math<$real>>::ln(*v);
                });
            }
        }

        kernel! {
            /// Each split's part of `op x_in` for every (pair, bin): the
            /// matrix product of a scaling-domain half-step.
            ///
            /// # Safety
            /// `op` holds `d * d` values, `x_in` `n * d`, `partial` `splits *
            /// n * d`; `splits` is between 1 and the number of column chunks;
            /// launched with `TRANSPORT_THREADS` threads,
            /// `TRANSPORT_SHARED_ELEMENTS` values of shared memory, and one
            /// block per (row tile, pair tile, split).
            ///
            /// # Parameters
            /// - `op`: the Gibbs kernel (or its transpose); `n`, `d`: pairs and bins;
            /// - `x_in`: the other side's scalings; `splits`, `partial`: the partial sums.
            ///
            /// # Thread mapping
            /// A block per (64 rows, 64 pairs, split) (`tile_of_block`); its
            /// 256 threads own 4 × 4 outputs each, rows `4 ti + a` and pairs
            /// `4 tq + b` of the tile.
            pub unsafe extern "ptx-kernel" fn $tile_scaling(
                op: *const $real,
                n: u64,
                d: u64,
                x_in: *const $real,
                splits: u64,
                partial: *mut $real,
            ) as $tile_scaling_args {
                // SAFETY: the kernel's contract.
                unsafe { tile_scaling::<$real>(op, n, d, x_in, splits, partial) }
            }
        }

        kernel! {
            /// Each split's log-sum-exp state of `(p_in - c) / reg` for every
            /// (pair, bin): the reduction of a log-domain half-step.
            ///
            /// # Safety
            /// As `ot_tile_scaling_*`, with `c` the cost matrix (or its
            /// transpose), `p_in` `n * d` values, `part_max` and `part_sum`
            /// `splits * n * d` each, `scale > 0`.
            ///
            /// # Parameters
            /// - `c`: the cost rows; `n`, `d`: pairs and bins; `scale`: the terms' factor;
            /// - `p_in`: the other side's potentials; `splits`, `part_max`, `part_sum`: the states.
            ///
            /// # Thread mapping
            /// As `ot_tile_scaling_*`.
            pub unsafe extern "ptx-kernel" fn $tile_log(
                c: *const $real,
                n: u64,
                d: u64,
                scale: $real,
                p_in: *const $real,
                splits: u64,
                part_max: *mut $real,
                part_sum: *mut $real,
            ) as $tile_log_args {
                // SAFETY: the kernel's contract.
                unsafe { tile_log::<$real>(c, n, d, scale, p_in, splits, part_max, part_sum) }
            }
        }

        kernel! {
            /// Each split's part of every (pair, row)'s entropic cost.
            ///
            /// # Safety
            /// As `ot_tile_scaling_*`, with `c` the cost matrix, `f` and `g`
            /// `n * d` values, `partial` `splits * n * d`, `scale > 0`.
            ///
            /// # Parameters
            /// - `c`: the cost matrix; `n`, `d`: pairs and bins; `scale`: the exponents' factor;
            /// - `f`, `g`: the potentials; `splits`, `partial`: the partial sums.
            ///
            /// # Thread mapping
            /// As `ot_tile_scaling_*`.
            pub unsafe extern "ptx-kernel" fn $tile_cost(
                c: *const $real,
                n: u64,
                d: u64,
                scale: $real,
                f: *const $real,
                g: *const $real,
                splits: u64,
                partial: *mut $real,
            ) as $tile_cost_args {
                // SAFETY: the kernel's contract.
                unsafe { tile_cost::<$real>(c, n, d, scale, f, g, splits, partial) }
            }
        }

        kernel! {
            /// The scaling-domain update from the splits' partial sums:
            /// `x_out = marginal / s` bin by bin (0 where the marginal is 0),
            /// with the marginal error of the old `x_out` on request.
            ///
            /// # Safety
            /// `partial` holds `splits * n * d` values; `marginal` and
            /// `x_out` `n * d`; `err` `n * d` or null.
            ///
            /// # Parameters
            /// - `n`, `d`: pairs and bins; `splits`, `partial`: the partial sums;
            /// - `marginal`: this side's histograms; `x_out`: its scalings (read, then written);
            /// - `err`: errors or null.
            ///
            /// # Thread mapping
            /// Grid-stride loop over the `n * d` (pair, bin) values.
            pub unsafe extern "ptx-kernel" fn $finish_scaling(
                n: u64,
                d: u64,
                splits: u64,
                partial: *const $real,
                marginal: *const $real,
                x_out: *mut $real,
                err: *mut $real,
            ) as $finish_scaling_args {
                let len = (n * d) as usize;
                // SAFETY: k < n * d; the kernel's contract.
                grid_stride(n * d, |k| unsafe {
                    finish_scaling::<$real>(k as usize, len, splits, partial, marginal, x_out, err)
                });
            }
        }

        kernel! {
            /// The log-domain update from the splits' states: `p_out = reg
            /// ln marginal - reg logsumexp` bin by bin (-inf where the
            /// marginal is 0), with the marginal error of the old `p_out` on
            /// request.
            ///
            /// # Safety
            /// `part_max` and `part_sum` hold `splits * n * d` values;
            /// `marginal` and `p_out` `n * d`; `err` `n * d` or null; `reg > 0`.
            ///
            /// # Parameters
            /// - `n`, `d`: pairs and bins; `reg`: the regularisation;
            /// - `splits`, `part_max`, `part_sum`: the states;
            /// - `marginal`: this side's histograms; `p_out`: its potentials (read, then written);
            /// - `err`: errors or null.
            ///
            /// # Thread mapping
            /// Grid-stride loop over the `n * d` (pair, bin) values.
            pub unsafe extern "ptx-kernel" fn $finish_log(
                n: u64,
                d: u64,
                reg: $real,
                splits: u64,
                part_max: *const $real,
                part_sum: *const $real,
                marginal: *const $real,
                p_out: *mut $real,
                err: *mut $real,
            ) as $finish_log_args {
                let len = (n * d) as usize;
                // SAFETY: k < n * d; the kernel's contract.
                grid_stride(n * d, |k| unsafe {
                    finish_log::<$real, $math>(k as usize, len, reg, splits, part_max, part_sum, marginal, p_out, err)
                });
            }
        }

        kernel! {
            /// Sums the splits' partial values, in split order.
            ///
            /// # Safety
            /// `partial` holds `splits * len` values, `out` `len`.
            ///
            /// # Parameters
            /// - `len`: values per split; `splits`, `partial`: the parts; `out`: the sums.
            ///
            /// # Thread mapping
            /// Grid-stride loop over the `len` values.
            pub unsafe extern "ptx-kernel" fn $finish_sum(
                len: u64,
                splits: u64,
                partial: *const $real,
                out: *mut $real,
            ) as $finish_sum_args {
                // SAFETY: split * len + k < splits * len; k < len.
                grid_stride(len, |k| unsafe {
                    let mut s: $real = 0.0;
                    for split in 0..splits {
                        s += *partial.add((split * len + k) as usize);
                    }
                    *out.add(k as usize) = s;
                });
            }
        }
    )*};
}

transport_kernels! {
    f32, Hardware: ot_prepare_f32 OtPrepareF32Args, ot_check_f32 OtCheckF32Args,
        ot_pair_stats_f32 OtPairStatsF32Args, ot_fill_f32 OtFillF32Args, ot_potentials_f32 OtPotentialsF32Args,
        ot_tile_scaling_f32 OtTileScalingF32Args, ot_tile_log_f32 OtTileLogF32Args,
        ot_tile_cost_f32 OtTileCostF32Args, ot_finish_scaling_f32 OtFinishScalingF32Args,
        ot_finish_log_f32 OtFinishLogF32Args, ot_finish_sum_f32 OtFinishSumF32Args,
        ot_rows_scaling_f32 OtRowsScalingF32Args, ot_rows_log_f32 OtRowsLogF32Args;
    f64, Software: ot_prepare_f64 OtPrepareF64Args, ot_check_f64 OtCheckF64Args,
        ot_pair_stats_f64 OtPairStatsF64Args, ot_fill_f64 OtFillF64Args, ot_potentials_f64 OtPotentialsF64Args,
        ot_tile_scaling_f64 OtTileScalingF64Args, ot_tile_log_f64 OtTileLogF64Args,
        ot_tile_cost_f64 OtTileCostF64Args, ot_finish_scaling_f64 OtFinishScalingF64Args,
        ot_finish_log_f64 OtFinishLogF64Args, ot_finish_sum_f64 OtFinishSumF64Args,
        ot_rows_scaling_f64 OtRowsScalingF64Args, ot_rows_log_f64 OtRowsLogF64Args;
}

kernel! {
    /// A scaling-domain half-step for many pairs in float32, on the tensor
    /// cores, by tiles of 128 × 128 outputs, both operands read as their
    /// TF32 planes: with one split, `x_out = marginal / (op x_in)` pair by
    /// pair (0 where the marginal is 0) and its planes, with the marginal
    /// error of the old `x_out` on request; with more, the splits' partial
    /// sums, which `ot_finish_wide_scaling_f32` turns into that update.
    ///
    /// # Safety
    /// `op` holds `planes_len(d, d, PLANES_WIDE_ROWS)` values, `x_in` and
    /// `x_out_planes` `planes_len(n, d, PLANES_WIDE_PAIRS)`,
    /// every plane value outside the matrix or the vectors zero in `op`
    /// and `x_in`; `marginal` and `x_out` `n * d`, `err` `n * d` or is
    /// null, `partial` `splits * n * d` (written only with more than one
    /// split); `1 <= splits <= ceil(d / TRANSPORT_WIDE_CHUNK)`; launched
    /// with `TRANSPORT_THREADS` threads, `TRANSPORT_WIDE_SHARED_BYTES` of
    /// shared memory, and one block per (row tile, pair tile, split) of
    /// `TRANSPORT_WIDE_BLOCK`; compute capability 8.0 or later.
    ///
    /// # Parameters
    /// - `op`: the Gibbs kernel's (or its transpose's) planes; `n`, `d`: pairs and bins;
    /// - `x_in`: the other side's scalings' planes; `splits`, `partial`: the partial sums;
    /// - `marginal`: this side's histograms; `x_out`: its scalings (read, then written);
    /// - `err`: errors or null; `x_out_planes`: the new scalings' planes.
    ///
    /// # Thread mapping
    /// A block per (128 rows, 128 pairs, split) (`tile_of_block`); warp `w`
    /// of its 8 owns rows `64 (w % 2)` to `64 (w % 2) + 63` and pairs `32
    /// (w / 2)` to `32 (w / 2) + 31` of the tile, lane `l` of it the
    /// outputs of the tensor cores' accumulator layout (rows `l / 4` and
    /// `l / 4 + 8`, pairs `2 (l % 4)` and `2 (l % 4) + 1` of each 16 × 8
    /// product); every thread copies 16-byte pieces `k 256 + tid` of each
    /// staged chunk.
    pub unsafe extern "ptx-kernel" fn ot_wide_scaling_f32(
        op: *const u32,
        n: u64,
        d: u64,
        x_in: *const u32,
        splits: u64,
        partial: *mut f32,
        marginal: *const f32,
        x_out: *mut f32,
        err: *mut f32,
        x_out_planes: *mut u32,
    ) as OtWideScalingF32Args {
        // SAFETY: the kernel's contract.
        unsafe { wide_scaling(op, n, d, x_in, splits, partial, marginal, x_out, err, x_out_planes) }
    }
}

kernel! {
    /// The update after a tensor-core kernel's splits: as
    /// `ot_finish_scaling_f32`, and each new scaling's two TF32 parts into
    /// `x_out_planes` in `layout`.
    ///
    /// # Safety
    /// `partial` holds `splits * n * d` values, `marginal` and `x_out` `n *
    /// d`, `err` `n * d` or is null, `x_out_planes` `planes_len(n, d,
    /// layout)`.
    ///
    /// # Parameters
    /// - `n`, `d`: pairs and bins; `splits`, `partial`: the partial sums;
    /// - `marginal`: this side's histograms; `x_out`: its scalings (read, then written);
    /// - `err`: errors or null; `x_out_planes`, `layout`: the new scalings' planes.
    ///
    /// # Thread mapping
    /// Grid-stride over the `n * d` values, one thread per (pair, bin).
    pub unsafe extern "ptx-kernel" fn ot_finish_wide_scaling_f32(
        n: u64,
        d: u64,
        splits: u64,
        partial: *const f32,
        marginal: *const f32,
        x_out: *mut f32,
        err: *mut f32,
        x_out_planes: *mut u32,
        layout: u32,
    ) as OtFinishWideScalingF32Args {
        if d == 0 {
            return;
        }
        let len = n * d;
        grid_stride(len, |k| {
            // SAFETY: k < n * d; the buffers' lengths are the kernel's
            // contract, and (pair k / d, bin k % d) lies in the planes.
            unsafe {
                finish_scaling(k as usize, len as usize, splits, partial, marginal, x_out, err);
                put_planes(x_out_planes, k / d, k % d, d, *x_out.add(k as usize), layout);
            }
        });
    }
}

kernel! {
    /// The tensor-core kernels' operand planes of `rows` × `d` row-major
    /// values in `layout`: every value's two TF32 parts (`x ≈ big +
    /// small`) where `planes_index` puts them, zero outside the values.
    ///
    /// # Safety
    /// `src` holds `rows * d` values and `out` `planes_len(rows, d,
    /// layout)`.
    ///
    /// # Parameters
    /// - `src`: the values; `rows`, `d`: their shape;
    /// - `layout`: one of the `PLANES_*` layouts; `out`: the planes.
    ///
    /// # Thread mapping
    /// Grid-stride over the planes' (row, column) places, tiles and chunks
    /// padded: one thread per place, writing both parts.
    pub unsafe extern "ptx-kernel" fn ot_split_planes_f32(
        src: *const f32,
        rows: u64,
        d: u64,
        layout: u32,
        out: *mut u32,
    ) as OtSplitPlanesF32Args {
        let (tile, chunk) = (planes_tile(layout), planes_chunk(layout));
        let width = d.div_ceil(chunk) * chunk;
        let places = rows.div_ceil(tile) * tile * width;
        let plane = planes_plane(layout) as usize;
        grid_stride(places, |k| {
            let (r, j) = (k / width, k % width);
            // SAFETY: r < rows and j < d index `src`.
            let value = if r < rows && j < d { unsafe { *src.add((r * d + j) as usize) } } else { 0.0 };
            let (big, small) = split_tf32(value);
            let at = planes_index(r, j, d, layout) as usize;
            // SAFETY: every padded place's parts lie in the planes.
            unsafe {
                *out.add(at) = big;
                *out.add(at + plane) = small;
            }
        });
    }
}

/// Declares the persistent scaling kernels of each float type.
macro_rules! persistent_kernels {
    ($($real:ty, $unroll:literal: $name:ident $args:ident;)*) => {$(
        kernel! {
            /// `iterations` whole scaling-domain iterations in one launch,
            /// for few pairs: `g = b / (columns f)`, then `f = a / (rows
            /// g)`, each half-step as `ot_rows_scaling_*` does it, the grid
            /// waiting for itself between them.
            ///
            /// # Safety
            /// `rows` and `columns` hold `d * d` values; `a`, `b`, `f` and
            /// `g` `n * d`; `barrier` one `u32`, 0 at the launch and used by
            /// it alone; launched cooperatively (every block resident) with
            /// whole warps; `2 * iterations * blocks` fits a `u32`.
            ///
            /// # Parameters
            /// - `rows`, `columns`: the Gibbs kernel and its transpose; `n`, `d`: pairs and bins;
            /// - `a`, `b`: the histograms; `f`, `g`: the scalings (read, then written);
            /// - `iterations`: how many; `barrier`: the grid barrier's counter.
            ///
            /// # Thread mapping
            /// As `ot_rows_scaling_*`, for each half-step: a warp per (row,
            /// `TRANSPORT_ROW_PAIRS` pairs), grid-stride over them (float32
            /// lanes load 8 columns at a time, not 4).
            pub unsafe extern "ptx-kernel" fn $name(
                rows: *const $real,
                columns: *const $real,
                n: u64,
                d: u64,
                a: *const $real,
                b: *const $real,
                f: *mut $real,
                g: *mut $real,
                iterations: u64,
                barrier: *mut u32,
            ) as $args {
                let mut round = 0;
                for _ in 0..iterations {
                    // SAFETY: the kernel's contract; every thread of the
                    // grid takes part in each half-step and barrier.
                    unsafe {
                        rows_scaling::<$real, $unroll>(columns, n, d, f, b, g, core::ptr::null_mut());
                        round += 1;
                        grid_barrier(barrier, round);
                        rows_scaling::<$real, $unroll>(rows, n, d, g, a, f, core::ptr::null_mut());
                        round += 1;
                        grid_barrier(barrier, round);
                    }
                }
            }
        }
    )*};
}

// Columns each lane loads at once: float32 twice the row kernels' (half
// the rounds of loads per row); float64 as many (8 would not fit the
// registers).
persistent_kernels! {
    f32, 8: ot_persistent_scaling_f32 OtPersistentScalingF32Args;
    f64, 4: ot_persistent_scaling_f64 OtPersistentScalingF64Args;
}

/// Declares the resident scaling kernels of each float type.
macro_rules! resident_kernels {
    ($($real:ty, $unroll:literal: $name:ident $args:ident;)*) => {$(
        kernel! {
            /// `iterations` whole scaling-domain iterations in one launch,
            /// as `ot_persistent_scaling_*` runs them, with each block's
            /// rows of both matrices copied to shared memory once and each
            /// half-step's input vectors staged there: the half-steps read
            /// only the vectors from global memory.
            ///
            /// # Safety
            /// `rows` and `columns` hold `d * d` values; `a`, `b`, `f` and
            /// `g` `n * d`; `barrier` one `u32`, 0 at the launch and used by
            /// it alone; `rows_per_block >= 1` and every block's first row
            /// `block * rows_per_block` below `d`; launched cooperatively
            /// (every block resident) with whole warps and
            /// `resident_shared_elements(n, d, rows_per_block)` values of
            /// dynamic shared memory; `2 * iterations * blocks` fits a
            /// `u32`.
            ///
            /// # Parameters
            /// - `rows`, `columns`: the Gibbs kernel and its transpose; `n`, `d`: pairs and bins;
            /// - `a`, `b`: the histograms; `f`, `g`: the scalings (read, then written);
            /// - `iterations`: how many; `barrier`: the grid barrier's counter;
            /// - `rows_per_block`: the rows each block owns.
            ///
            /// # Thread mapping
            /// Block `k` owns rows `k * rows_per_block ..` (up to `d`); its
            /// warps stride over (owned row, `TRANSPORT_ROW_PAIRS` pairs),
            /// lanes over the row's columns as in `ot_rows_scaling_*`.
            pub unsafe extern "ptx-kernel" fn $name(
                rows: *const $real,
                columns: *const $real,
                n: u64,
                d: u64,
                a: *const $real,
                b: *const $real,
                f: *mut $real,
                g: *mut $real,
                iterations: u64,
                barrier: *mut u32,
                rows_per_block: u64,
            ) as $args {
                let (n, d, per) = (n as usize, d as usize, rows_per_block as usize);
                let first_row = block_idx_x() as usize * per;
                let own = per.min(d - first_row);
                let shared = dynamic_shared::<$real>();
                // Shared memory holds (n + 2 per) d values, the vectors
                // first (the dynamic shared memory and the buffers are
                // 16-byte aligned); the owned rows lie in both matrices.
                // SAFETY: the kernel's contract, as said above; every thread
                // of the grid takes part in each copy, half-step and barrier.
                unsafe {
                    copy_to_shared(columns.add(first_row * d), shared.add(n * d), own * d);
                    copy_to_shared(rows.add(first_row * d), shared.add((n + per) * d), own * d);
                    if d % (32 * $unroll) == 0 {
                        resident_iterations::<$real, $unroll, true>(
                            shared, first_row, own, per, n, d, a, b, f, g, iterations, barrier,
                        );
                    } else {
                        resident_iterations::<$real, $unroll, false>(
                            shared, first_row, own, per, n, d, a, b, f, g, iterations, barrier,
                        );
                    }
                }
            }
        }
    )*};
}

// Columns each lane reads at once, as the persistent kernels'.
resident_kernels! {
    f32, 8: ot_resident_scaling_f32 OtResidentScalingF32Args;
    f64, 4: ot_resident_scaling_f64 OtResidentScalingF64Args;
}
