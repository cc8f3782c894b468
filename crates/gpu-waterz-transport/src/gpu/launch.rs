//! The Sinkhorn kernels' launches: every `unsafe` of this crate. Each safe
//! function checks the buffer lengths its kernels read and write.

use gpu_waterz_abi::transport::*;
use gpu_waterz_abi::Kernel;
use gpu_waterz_runtime::{check_len, DeviceBuffer, DeviceElement, Gpu, LaunchConfig, Result, RuntimeError};

/// Into how many parts a half-step's columns are split: as many as fill
/// one wave of `kernel`'s blocks (the blocks all multiprocessors hold at
/// once) without starting a second, more where that leaves much of the
/// last wave idle ([`splits_for_waves`]), at most one part per chunk of
/// columns.
pub(crate) fn splits(gpu: &Gpu, kernel: Kernel, n: u64, d: u64, shared_bytes: u32) -> Result<u64> {
    let shape =
        TileShape { rows: TRANSPORT_BLOCK, pairs: TRANSPORT_BLOCK, chunk: TRANSPORT_CHUNK, threads: TRANSPORT_THREADS };
    splits_of(gpu, kernel, n, d, shared_bytes, shape)
}

/// A tile kernel's blocks: `rows` matrix rows by `pairs` pairs, the
/// columns in chunks of `chunk`, `threads` threads.
#[derive(Clone, Copy)]
struct TileShape {
    rows: u32,
    pairs: u32,
    chunk: u32,
    threads: u32,
}

/// [`splits`] for a kernel of blocks of `shape`.
fn splits_of(gpu: &Gpu, kernel: Kernel, n: u64, d: u64, shared_bytes: u32, shape: TileShape) -> Result<u64> {
    let tiles = d.div_ceil(shape.rows as u64) * n.div_ceil(shape.pairs as u64);
    let wave =
        gpu.multiprocessor_count() as u64 * gpu.blocks_per_multiprocessor(kernel, shape.threads, shared_bytes)? as u64;
    Ok(splits_for_waves(tiles, wave, d.div_ceil(shape.chunk as u64)))
}

/// Splits of `tiles` tiles over waves of `wave` blocks, at most `chunks`:
/// the fewest, from those that fill one wave (`wave / tiles`), whose
/// blocks fill at least 9/10 of the waves they take (300 pairs of 4096
/// bins are 96 wide tiles: one split leaves 36 of 132 multiprocessors
/// idle, four fill 384 of 396 places), or else that first count.
fn splits_for_waves(tiles: u64, wave: u64, chunks: u64) -> u64 {
    let (tiles, wave, most) = (tiles.max(1), wave.max(1), chunks.max(1));
    let first = (wave / tiles).clamp(1, most);
    let filled = |splits: u64| 10 * tiles * splits >= 9 * (tiles * splits).div_ceil(wave) * wave;
    (first..=most.min(4 * first)).find(|&s| filled(s)).unwrap_or(first)
}

/// The fewest pairs for which float32 scaling half-steps use the wide
/// kernel: [`super::WIDE_MIN_PAIRS_ENV`], read once, or
/// [`TRANSPORT_WIDE_MIN_PAIRS`].
fn wide_min_pairs() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var(super::WIDE_MIN_PAIRS_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(TRANSPORT_WIDE_MIN_PAIRS)
    })
}

/// The dynamic shared memory of a tile kernel for `T`, in bytes.
fn tile_shared_bytes<T>(log: bool) -> u32 {
    let elements = if log { TRANSPORT_LOG_SHARED_ELEMENTS } else { TRANSPORT_SHARED_ELEMENTS };
    elements * std::mem::size_of::<T>() as u32
}

/// The launch of a tile kernel: one block per (row tile, pair tile, split).
fn tile_config<T>(kernel: &'static str, n: u64, d: u64, splits: u64, log: bool) -> Result<LaunchConfig> {
    let blocks = d.div_ceil(TRANSPORT_BLOCK as u64) * n.div_ceil(TRANSPORT_BLOCK as u64) * splits;
    if blocks == 0 || blocks > i32::MAX as u64 || splits == 0 || splits > d.div_ceil(TRANSPORT_CHUNK as u64) {
        return Err(RuntimeError::InvalidLaunch {
            kernel,
            reason: format!("{n} pairs of {d} bins in {splits} splits"),
        });
    }
    Ok(LaunchConfig { blocks: blocks as u32, threads: TRANSPORT_THREADS, shared_bytes: tile_shared_bytes::<T>(log) })
}

/// The most pairs for which the half-steps use the row kernels:
/// [`super::ROWS_MAX_PAIRS_ENV`], read once, or
/// [`TRANSPORT_ROWS_MAX_PAIRS`].
fn rows_max_pairs() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var(super::ROWS_MAX_PAIRS_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(TRANSPORT_ROWS_MAX_PAIRS)
    })
}

/// The launch of a row kernel: whole warps, one per (row, tile of
/// `TRANSPORT_ROW_PAIRS` pairs), up to 16 blocks of 256 threads per
/// multiprocessor (grid-stride beyond).
fn row_config(gpu: &Gpu, n: u64, d: u64) -> LaunchConfig {
    let warps = d * n.div_ceil(TRANSPORT_ROW_PAIRS as u64);
    let blocks = warps.div_ceil(8).clamp(1, gpu.multiprocessor_count() as u64 * 16);
    LaunchConfig { blocks: blocks as u32, threads: 256, shared_bytes: 0 }
}

/// Checks that every buffer is on `gpu` and holds at least its length.
fn check_buffers<T: DeviceElement>(
    gpu: &Gpu,
    kernel: &'static str,
    buffers: &[(&str, &DeviceBuffer<T>, u64)],
) -> Result<()> {
    for &(what, buffer, len) in buffers {
        gpu.check_device(buffer, what)?;
        check_len(kernel, what, buffer, len)?;
    }
    Ok(())
}

/// The errors' address after checking it (null without).
fn err_pointer<T: DeviceElement>(
    gpu: &Gpu,
    kernel: &'static str,
    err: Option<&mut DeviceBuffer<T>>,
    len: u64,
) -> Result<*mut T> {
    match err {
        Some(e) => {
            check_buffers(gpu, kernel, &[("err", &*e, len)])?;
            Ok(e.as_mut_ptr())
        }
        None => Ok(std::ptr::null_mut()),
    }
}

/// Which half of a scaling iteration: the first writes `g` from `f`
/// through the Gibbs kernel's transpose (`columns`), the second `f` from
/// `g` through the Gibbs kernel (`rows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HalfStep {
    /// `g` from `f`.
    First,
    /// `f` from `g`.
    Second,
}

/// The tensor-core kernel's operands as their TF32 planes (`planes_len`):
/// the Gibbs kernel's and its transpose's, split once per solve, and each
/// side's scalings, split as the half-step that writes them writes them;
/// in the warpgroup kernel's layouts when it runs, else the wide one's.
pub(crate) struct WidePlanes {
    wgmma: bool,
    rows: DeviceBuffer<u32>,
    columns: DeviceBuffer<u32>,
    f: DeviceBuffer<u32>,
    g: DeviceBuffer<u32>,
}

impl WidePlanes {
    /// The layouts of the matrix planes and of the vector planes.
    fn layouts(&self) -> (u32, u32) {
        layouts_of(self.wgmma)
    }
}

/// The layouts of the matrix planes and of the vector planes of the
/// warpgroup kernel (`wgmma`) or of the wide one.
fn layouts_of(wgmma: bool) -> (u32, u32) {
    if wgmma {
        (PLANES_WGMMA_ROWS, PLANES_WGMMA_PAIRS)
    } else {
        (PLANES_WIDE_ROWS, PLANES_WIDE_PAIRS)
    }
}

/// Whether the warpgroup kernel may serve: not when
/// [`super::WGMMA_ENV`] is `0` (read once).
fn wgmma_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var(super::WGMMA_ENV).map_or(true, |v| v != "0"))
}

/// The working memory of one half-step: `splits` partial results per
/// (pair, bin), twice for the log domain's states, and the wide kernel's
/// planes when the scaling half-steps use it.
pub(crate) struct Scratch<T> {
    splits: u64,
    /// Whether the scaling half-steps use the wide kernel (its splits).
    wide: bool,
    first: DeviceBuffer<T>,
    second: Option<DeviceBuffer<T>>,
    planes: Option<WidePlanes>,
}

impl<T: Kernels> Scratch<T> {
    /// Scratch for `n` pairs of `d` bins; `log` for the log domain's
    /// states (its split is the log kernel's), else the 64 × 64 scaling
    /// tile's (which the cost kernel shares).
    pub(crate) fn new(gpu: &Gpu, n: u64, d: u64, log: bool) -> Result<Self> {
        let kernel = if log { T::TILE_LOG } else { T::TILE_SCALING };
        let splits = splits(gpu, kernel, n, d, tile_shared_bytes::<T>(log))?;
        Self::with_splits(gpu, n, d, splits, false, log)
    }

    /// Scratch for the scaling half-steps of `n` pairs of `d` bins: the
    /// wide kernel's for float32 from [`wide_min_pairs`] pairs on, else
    /// as [`Scratch::new`].
    /// The tensor-core kernels need their shared memory (96 KiB) and
    /// compute capability 8.0 (`cp.async`); a device without either takes
    /// the 64 × 64 tiles. On compute capability 9.0 (the sm_90a module) the
    /// warpgroup kernel serves, unless [`super::WGMMA_ENV`] is `0`.
    pub(crate) fn for_scaling(gpu: &Gpu, n: u64, d: u64) -> Result<Self> {
        let (Some(wide), Some(warpgroup)) = (T::WIDE_SCALING, T::WGMMA_SCALING) else {
            return Self::new(gpu, n, d, false);
        };
        if n < wide_min_pairs() || n <= rows_max_pairs() || gpu.compute_capability()?.0 < 8 {
            return Self::new(gpu, n, d, false);
        }
        let wgmma = wgmma_allowed() && gpu.sm90a_kernels()?;
        let (kernel, shared, shape) = if wgmma {
            let shape = TileShape {
                rows: TRANSPORT_WGMMA_ROWS,
                pairs: TRANSPORT_WGMMA_PAIRS,
                chunk: TRANSPORT_WGMMA_CHUNK,
                threads: TRANSPORT_WGMMA_THREADS,
            };
            (warpgroup, TRANSPORT_WGMMA_SHARED_BYTES, shape)
        } else {
            let shape = TileShape {
                rows: TRANSPORT_WIDE_BLOCK,
                pairs: TRANSPORT_WIDE_BLOCK,
                chunk: TRANSPORT_WIDE_CHUNK,
                threads: TRANSPORT_THREADS,
            };
            (wide, TRANSPORT_WIDE_SHARED_BYTES, shape)
        };
        if gpu.max_shared_bytes_per_block()? < shared {
            return Self::new(gpu, n, d, false);
        }
        gpu.allow_shared_bytes(kernel, shared)?;
        let splits = splits_of(gpu, kernel, n, d, shared, shape)?;
        let mut scratch = Self::with_splits(gpu, n, d, splits, true, false)?;
        let (matrix_layout, vector_layout) = layouts_of(wgmma);
        let (matrix, vectors) = (planes_len(d, d, matrix_layout) as usize, planes_len(n, d, vector_layout) as usize);
        scratch.planes = Some(WidePlanes {
            wgmma,
            rows: gpu.uninit(matrix)?,
            columns: gpu.uninit(matrix)?,
            f: gpu.uninit(vectors)?,
            g: gpu.uninit(vectors)?,
        });
        Ok(scratch)
    }

    fn with_splits(gpu: &Gpu, n: u64, d: u64, splits: u64, wide: bool, log: bool) -> Result<Self> {
        let len = (splits * n * d).max(1) as usize;
        let second = if log { Some(gpu.uninit::<T>(len)?) } else { None };
        Ok(Self { splits, wide, first: gpu.uninit::<T>(len)?, second, planes: None })
    }

    /// Splits the operands of the tensor-core half-steps into their
    /// planes: the Gibbs kernel (`rows`), its transpose (`columns`) and
    /// both sides' scalings (`n × d`; `g`'s too, for the zeros of its
    /// padding, which the half-steps never write). Nothing without those
    /// kernels.
    pub(crate) fn split_operands(
        &mut self,
        gpu: &Gpu,
        (n, d): (u64, u64),
        rows: &DeviceBuffer<T>,
        columns: &DeviceBuffer<T>,
        f: &DeviceBuffer<T>,
        g: &DeviceBuffer<T>,
    ) -> Result<()> {
        if let Some(planes) = &mut self.planes {
            let (layout, _) = planes.layouts();
            T::split_planes(gpu, rows, d, d, layout, &mut planes.rows)?;
            T::split_planes(gpu, columns, d, d, layout, &mut planes.columns)?;
        }
        self.split_scalings(gpu, (n, d), f, g)
    }

    /// Splits both sides' scalings into their planes again (after
    /// something other than a tensor-core half-step wrote them). Nothing
    /// without those kernels.
    pub(crate) fn split_scalings(
        &mut self,
        gpu: &Gpu,
        (n, d): (u64, u64),
        f: &DeviceBuffer<T>,
        g: &DeviceBuffer<T>,
    ) -> Result<()> {
        if let Some(planes) = &mut self.planes {
            let (_, layout) = planes.layouts();
            T::split_planes(gpu, f, n, d, layout, &mut planes.f)?;
            T::split_planes(gpu, g, n, d, layout, &mut planes.g)?;
        }
        Ok(())
    }
}

/// The wide scaling kernel of a float type, where it has one.
pub(crate) trait WideScaling: Sized + DeviceElement {
    /// `ot_wide_scaling_f32` for float32; none for float64 (8 × 8 float64
    /// accumulators do not fit the registers).
    const WIDE_SCALING: Option<Kernel>;
    /// `ot_wgmma_scaling_f32` for float32 (run only from the sm_90a
    /// module); none for float64.
    const WGMMA_SCALING: Option<Kernel>;
    /// The tensor-core kernels' planes of `rows × d` values into `out` in
    /// `layout` (`ot_split_planes_f32`).
    fn split_planes(
        gpu: &Gpu,
        src: &DeviceBuffer<Self>,
        rows: u64,
        d: u64,
        layout: u32,
        out: &mut DeviceBuffer<u32>,
    ) -> Result<()>;
    /// A scaling half-step by the wide kernel from the planes in `scratch`
    /// (the wide kernel's): `x_out = marginal / (op x_in)` and its planes,
    /// the errors of the old `x_out` into `err` on request, `op` and
    /// `x_in` being the Gibbs kernel's transpose and `f` for the first
    /// half, the kernel and `g` for the second; with more than one split,
    /// the finish kernel updates.
    #[allow(clippy::too_many_arguments)]
    fn wide_update(
        gpu: &Gpu,
        n: u64,
        d: u64,
        marginal: &DeviceBuffer<Self>,
        x_out: &mut DeviceBuffer<Self>,
        err: *mut Self,
        scratch: &mut Scratch<Self>,
        half: HalfStep,
    ) -> Result<()>;
}

impl WideScaling for f32 {
    const WIDE_SCALING: Option<Kernel> = Some(<OtWideScalingF32Args as gpu_waterz_abi::KernelArgs>::KERNEL);
    const WGMMA_SCALING: Option<Kernel> = Some(<OtWgmmaScalingF32Args as gpu_waterz_abi::KernelArgs>::KERNEL);

    fn split_planes(
        gpu: &Gpu,
        src: &DeviceBuffer<f32>,
        rows: u64,
        d: u64,
        layout: u32,
        out: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        const SPLIT: &str = "ot_split_planes_f32";
        check_buffers(gpu, SPLIT, &[("src", src, rows * d)])?;
        let len = planes_len(rows, d, layout);
        check_buffers(gpu, SPLIT, &[("out", &*out, len)])?;
        let args = OtSplitPlanesF32Args { src: src.as_ptr(), rows, d, layout, out: out.as_mut_ptr() };
        // SAFETY: `src` holds rows * d values and `out` the planes' length
        // (checked).
        unsafe { gpu.launch(gpu.grid_stride_config(len / 2), args) }
    }

    fn wide_update(
        gpu: &Gpu,
        n: u64,
        d: u64,
        marginal: &DeviceBuffer<f32>,
        x_out: &mut DeviceBuffer<f32>,
        err: *mut f32,
        scratch: &mut Scratch<f32>,
        half: HalfStep,
    ) -> Result<()> {
        let Scratch { splits, wide, first: partial, planes, .. } = scratch;
        let (nd, splits) = (n * d, *splits);
        let wgmma = planes.as_ref().is_some_and(|p| p.wgmma);
        let (kernel, rows_tile, pairs_tile, chunk) = if wgmma {
            ("ot_wgmma_scaling_f32", TRANSPORT_WGMMA_ROWS, TRANSPORT_WGMMA_PAIRS, TRANSPORT_WGMMA_CHUNK)
        } else {
            ("ot_wide_scaling_f32", TRANSPORT_WIDE_BLOCK, TRANSPORT_WIDE_BLOCK, TRANSPORT_WIDE_CHUNK)
        };
        let blocks = d.div_ceil(rows_tile as u64) * n.div_ceil(pairs_tile as u64) * splits;
        let planes = match planes {
            Some(planes)
                if *wide
                    && blocks > 0
                    && blocks <= i32::MAX as u64
                    && splits > 0
                    && splits <= d.div_ceil(chunk as u64) =>
            {
                planes
            }
            _ => {
                return Err(RuntimeError::InvalidLaunch {
                    kernel,
                    reason: format!("{n} pairs of {d} bins in {splits} splits"),
                })
            }
        };
        let (matrix_layout, vector_layout) = planes.layouts();
        let (op, x_in, x_out_planes) = match half {
            HalfStep::First => (&planes.columns, &planes.f, &mut planes.g),
            HalfStep::Second => (&planes.rows, &planes.g, &mut planes.f),
        };
        let vector_len = planes_len(n, d, vector_layout);
        check_buffers(
            gpu,
            kernel,
            &[
                ("op", op, planes_len(d, d, matrix_layout)),
                ("x_in", x_in, vector_len),
                ("x_out_planes", &*x_out_planes, vector_len),
            ],
        )?;
        check_buffers(
            gpu,
            kernel,
            &[("partial", &*partial, splits * nd), ("marginal", marginal, nd), ("x_out", &*x_out, nd)],
        )?;
        let (op, x_in) = (op.as_ptr(), x_in.as_ptr());
        let (partial_at, x_out_at, planes_at) = (partial.as_mut_ptr(), x_out.as_mut_ptr(), x_out_planes.as_mut_ptr());
        let (threads, shared_bytes) = if wgmma {
            (TRANSPORT_WGMMA_THREADS, TRANSPORT_WGMMA_SHARED_BYTES)
        } else {
            (TRANSPORT_THREADS, TRANSPORT_WIDE_SHARED_BYTES)
        };
        let config = LaunchConfig { blocks: blocks as u32, threads, shared_bytes };
        // The two kernels' argument structs have the same fields.
        macro_rules! args {
            ($args:ident) => {
                $args {
                    op,
                    n,
                    d,
                    x_in,
                    splits,
                    partial: partial_at,
                    marginal: marginal.as_ptr(),
                    x_out: x_out_at,
                    err,
                    x_out_planes: planes_at,
                }
            };
        }
        // One block per (row tile, pair tile, split) of the kernel's tiles,
        // 1 <= splits <= its chunks, its threads and its shared memory
        // (allowed when the scratch was made; the warpgroup kernel only on a
        // device whose module is the sm_90a one: `Scratch::for_scaling`).
        // The planes are `ot_split_planes_f32`'s or a half-step's: zero
        // outside the values.
        // SAFETY: the planes (kernel's layouts), `marginal`, `x_out`,
        // `partial` and `err` hold what the kernels read and write (checked
        // here and by the caller); the launch shape above.
        unsafe {
            if wgmma {
                gpu.launch(config, args!(OtWgmmaScalingF32Args))?
            } else {
                gpu.launch(config, args!(OtWideScalingF32Args))?
            }
        };
        if splits == 1 {
            return Ok(());
        }
        let finish = OtFinishWideScalingF32Args {
            n,
            d,
            splits,
            partial: partial_at,
            marginal: marginal.as_ptr(),
            x_out: x_out_at,
            err,
            x_out_planes: planes_at,
            layout: vector_layout,
        };
        // SAFETY: `partial` holds splits * n * d values, `marginal` and
        // `x_out` n * d, `err` n * d or is null, `x_out_planes` the
        // vectors' planes in `vector_layout` (checked).
        unsafe { gpu.launch(gpu.grid_stride_config(nd), finish) }
    }
}

impl WideScaling for f64 {
    const WIDE_SCALING: Option<Kernel> = None;
    const WGMMA_SCALING: Option<Kernel> = None;

    fn split_planes(
        _gpu: &Gpu,
        _src: &DeviceBuffer<f64>,
        _rows: u64,
        _d: u64,
        _layout: u32,
        _out: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        Err(RuntimeError::InvalidLaunch { kernel: "ot_split_planes", reason: "no float64 kernel".into() })
    }

    fn wide_update(
        _gpu: &Gpu,
        _n: u64,
        _d: u64,
        _marginal: &DeviceBuffer<f64>,
        _x_out: &mut DeviceBuffer<f64>,
        _err: *mut f64,
        _scratch: &mut Scratch<f64>,
        _half: HalfStep,
    ) -> Result<()> {
        Err(RuntimeError::InvalidLaunch { kernel: "ot_wide_scaling", reason: "no float64 kernel".into() })
    }
}

/// Which single-launch scaling kernel runs a run of iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SingleLaunch {
    /// `ot_persistent_scaling_*`: the rows read from global memory.
    Persistent,
    /// `ot_resident_scaling_*`: each block's rows of both matrices resident
    /// in shared memory; refused (an error before anything is queued) when
    /// they and the vectors do not fit.
    Resident,
}

/// Whole scaling-domain iterations in one cooperative launch, for few
/// pairs.
pub(crate) trait SingleLaunchScaling: Sized + DeviceElement {
    /// `iterations` iterations (`g = b / (columns f)`, then `f = a / (rows
    /// g)`) in one launch of `kernel`.
    #[allow(clippy::too_many_arguments)]
    fn single_launch_scaling(
        kernel: SingleLaunch,
        gpu: &Gpu,
        rows: &DeviceBuffer<Self>,
        columns: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        f: &mut DeviceBuffer<Self>,
        g: &mut DeviceBuffer<Self>,
        iterations: u64,
    ) -> Result<()>;
}

/// The launch both single-launch scaling kernels share: the buffers
/// checked, the iteration count bounded, a zeroed barrier of this launch
/// only, then `$args { …, $($extra)* }` launched cooperatively on
/// `$config` (whose blocks the caller has bounded by the device).
macro_rules! cooperative_scaling_launch {
    ($gpu:ident, $name:expr, $args:ident, $config:expr, ($rows:ident, $columns:ident, $n:ident, $d:ident, $a:ident, $b:ident, $f:ident, $g:ident, $iterations:ident) $($extra:tt)*) => {{
        let (nd, dd) = ($n * $d, $d * $d);
        check_buffers(
            $gpu,
            $name,
            &[("rows", $rows, dd), ("columns", $columns, dd), ("a", $a, nd), ("b", $b, nd), ("f", &*$f, nd), ("g", &*$g, nd)],
        )?;
        let config: LaunchConfig = $config;
        if $iterations > TRANSPORT_PERSISTENT_ITERATIONS || 2 * $iterations * config.blocks as u64 > u32::MAX as u64 {
            return Err(RuntimeError::InvalidLaunch {
                kernel: $name,
                reason: format!("{} iterations on {} blocks", $iterations, config.blocks),
            });
        }
        let mut barrier = $gpu.zeros::<u32>(1)?;
        let args = $args {
            rows: $rows.as_ptr(),
            columns: $columns.as_ptr(),
            n: $n,
            d: $d,
            a: $a.as_ptr(),
            b: $b.as_ptr(),
            f: $f.as_mut_ptr(),
            g: $g.as_mut_ptr(),
            iterations: $iterations,
            barrier: barrier.as_mut_ptr(),
            $($extra)*
        };
        // `barrier` is a zeroed u32 of this launch only (freed after the
        // kernel in stream order); the shape and shared memory are the
        // caller's (documented there).
        // SAFETY: the matrices hold d * d values, the vectors n * d
        // (checked); launched cooperatively; 2 * iterations * blocks fits a
        // u32; the barrier and the launch shape as said above.
        unsafe { $gpu.launch_cooperative(config, args) }
    }};
}

macro_rules! single_launch_scaling {
    ($($real:ty, $args:ident, $resident:ident;)*) => {$(
        impl SingleLaunchScaling for $real {
            fn single_launch_scaling(
                kernel: SingleLaunch,
                gpu: &Gpu,
                rows: &DeviceBuffer<Self>,
                columns: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                a: &DeviceBuffer<Self>,
                b: &DeviceBuffer<Self>,
                f: &mut DeviceBuffer<Self>,
                g: &mut DeviceBuffer<Self>,
                iterations: u64,
            ) -> Result<()> {
                if kernel == SingleLaunch::Persistent {
                    let kernel = <$args as gpu_waterz_abi::KernelArgs>::KERNEL;
                    let most = gpu.cooperative_blocks(kernel, 256, 0)? as u64;
                    // Whole warps, at most the blocks the device holds at once.
                    let blocks = (d * n.div_ceil(TRANSPORT_ROW_PAIRS as u64)).div_ceil(8).clamp(1, most.max(1));
                    let config = LaunchConfig { blocks: blocks as u32, threads: 256, shared_bytes: 0 };
                    return cooperative_scaling_launch!(
                        gpu, stringify!($args), $args, config, (rows, columns, n, d, a, b, f, g, iterations)
                    );
                }
                const NAME: &str = stringify!($resident);
                let refuse = |reason: String| Err(RuntimeError::InvalidLaunch { kernel: NAME, reason });
                let kernel = <$resident as gpu_waterz_abi::KernelArgs>::KERNEL;
                // One block per multiprocessor, each owning an equal share
                // of the rows (the last one fewer): every block's first row
                // (k * rows_per_block, k < blocks = ceil(d / rows_per_block))
                // lies below d.
                let rows_per_block = d.div_ceil(gpu.multiprocessor_count().max(1) as u64).max(1);
                let blocks = d.div_ceil(rows_per_block);
                let bytes = resident_shared_elements(n, d, rows_per_block) * std::mem::size_of::<$real>() as u64;
                let limit = gpu.max_shared_bytes_per_block()? as u64;
                if bytes > limit {
                    return refuse(format!("{bytes} bytes of shared memory per block, the device allows {limit}"));
                }
                // Shared memory beyond the default, allowed up to the
                // device's limit (one value for every thread: a limit set
                // per launch could be lowered by another thread between
                // this thread's setting and its launch).
                gpu.allow_shared_bytes(kernel, limit as u32)?;
                let most = gpu.cooperative_blocks(kernel, TRANSPORT_RESIDENT_THREADS, bytes as u32)? as u64;
                if blocks > most {
                    return refuse(format!("{blocks} blocks ({most} fit at once)"));
                }
                let config =
                    LaunchConfig { blocks: blocks as u32, threads: TRANSPORT_RESIDENT_THREADS, shared_bytes: bytes as u32 };
                cooperative_scaling_launch!(
                    gpu, NAME, $resident, config, (rows, columns, n, d, a, b, f, g, iterations) rows_per_block,
                )
            }
        }
    )*};
}

single_launch_scaling! {
    f32, OtPersistentScalingF32Args, OtResidentScalingF32Args;
    f64, OtPersistentScalingF64Args, OtResidentScalingF64Args;
}

/// The kernels of one float type.
pub(crate) trait Kernels: Sized + DeviceElement + WideScaling + SingleLaunchScaling {
    /// The scaling-domain tile kernel.
    const TILE_SCALING: Kernel;
    /// The log-domain tile kernel.
    const TILE_LOG: Kernel;
    /// `out = f(m)`, `out_t` its transpose (`ot_prepare_*`).
    fn prepare(
        gpu: &Gpu,
        m: &DeviceBuffer<Self>,
        d: u64,
        reg: Self,
        exponentiate: bool,
        out: &mut DeviceBuffer<Self>,
        out_t: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
    /// A scaling-domain half-step, `half` of its iteration
    /// (`ot_rows_scaling_*` for one pair; else `ot_wide_scaling_f32` from
    /// the wide scratch's planes, or `ot_tile_scaling_*` then
    /// `ot_finish_scaling_*`).
    #[allow(clippy::too_many_arguments)]
    fn scaling_update(
        gpu: &Gpu,
        op: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        x_in: &DeviceBuffer<Self>,
        marginal: &DeviceBuffer<Self>,
        x_out: &mut DeviceBuffer<Self>,
        err: Option<&mut DeviceBuffer<Self>>,
        scratch: &mut Scratch<Self>,
        half: HalfStep,
    ) -> Result<()>;
    /// A log-domain half-step (`ot_tile_log_*`, then `ot_finish_log_*`).
    #[allow(clippy::too_many_arguments)]
    fn log_update(
        gpu: &Gpu,
        c: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        reg: Self,
        p_in: &DeviceBuffer<Self>,
        marginal: &DeviceBuffer<Self>,
        p_out: &mut DeviceBuffer<Self>,
        err: Option<&mut DeviceBuffer<Self>>,
        scratch: &mut Scratch<Self>,
    ) -> Result<()>;
    /// Flags bad histograms and cost matrices into `flags[0]`
    /// (`ot_check_*`).
    fn check(
        gpu: &Gpu,
        a: &DeviceBuffer<Self>,
        b: &DeviceBuffer<Self>,
        m: &DeviceBuffer<Self>,
        flags: &mut DeviceBuffer<u32>,
    ) -> Result<()>;
    /// Each pair's cost from its rows' parts, and the centred potentials
    /// when asked for (`ot_pair_stats_*`).
    #[allow(clippy::too_many_arguments)]
    fn pair_stats(
        gpu: &Gpu,
        n: u64,
        d: u64,
        partial: &DeviceBuffer<Self>,
        f: &DeviceBuffer<Self>,
        g: &DeviceBuffer<Self>,
        cost: &mut DeviceBuffer<Self>,
        centred: Option<(&mut DeviceBuffer<Self>, &mut DeviceBuffer<Self>)>,
    ) -> Result<()>;
    /// `x[k] = value` for `k < len` (`ot_fill_*`).
    fn fill(gpu: &Gpu, x: &mut DeviceBuffer<Self>, len: u64, value: Self) -> Result<()>;
    /// Scalings to potentials in place (`ot_potentials_*`).
    fn potentials(gpu: &Gpu, x: &mut DeviceBuffer<Self>, len: u64, reg: Self) -> Result<()>;
    /// Each (pair, row)'s part of the entropic cost (`ot_tile_cost_*`, then
    /// `ot_finish_sum_*`).
    #[allow(clippy::too_many_arguments)]
    fn cost(
        gpu: &Gpu,
        c: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        reg: Self,
        f: &DeviceBuffer<Self>,
        g: &DeviceBuffer<Self>,
        partial: &mut DeviceBuffer<Self>,
        scratch: &mut Scratch<Self>,
    ) -> Result<()>;
}

/// The factor of the log-domain terms: `log2(e) / reg` for float32 (whose
/// kernels take powers of 2), `1 / reg` for float64.
trait TermScale: Sized {
    fn term_scale(reg: Self) -> Self;
}

impl TermScale for f32 {
    fn term_scale(reg: f32) -> f32 {
        std::f32::consts::LOG2_E / reg
    }
}

impl TermScale for f64 {
    fn term_scale(reg: f64) -> f64 {
        1.0 / reg
    }
}

macro_rules! kernels {
    ($real:ty, $prepare:ident, $check:ident, $pair_stats:ident, $fill:ident, $potentials:ident, $tile_scaling:ident, $tile_log:ident, $tile_cost:ident,
     $finish_scaling:ident, $finish_log:ident, $finish_sum:ident, $rows_scaling:ident, $rows_log:ident) => {
        impl Kernels for $real {
            const TILE_SCALING: Kernel = <$tile_scaling as gpu_waterz_abi::KernelArgs>::KERNEL;
            const TILE_LOG: Kernel = <$tile_log as gpu_waterz_abi::KernelArgs>::KERNEL;

            fn prepare(
                gpu: &Gpu,
                m: &DeviceBuffer<Self>,
                d: u64,
                reg: Self,
                exponentiate: bool,
                out: &mut DeviceBuffer<Self>,
                out_t: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                let dd = d * d;
                check_buffers(gpu, stringify!($prepare), &[("m", m, dd), ("out", &*out, dd), ("out_t", &*out_t, dd)])?;
                let args = $prepare {
                    m: m.as_ptr(),
                    d,
                    reg,
                    exponentiate: exponentiate as u32,
                    out: out.as_mut_ptr(),
                    out_t: out_t.as_mut_ptr(),
                };
                // SAFETY: the three buffers hold d * d values (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(dd), args) }
            }

            fn scaling_update(
                gpu: &Gpu,
                op: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                x_in: &DeviceBuffer<Self>,
                marginal: &DeviceBuffer<Self>,
                x_out: &mut DeviceBuffer<Self>,
                err: Option<&mut DeviceBuffer<Self>>,
                scratch: &mut Scratch<Self>,
                half: HalfStep,
            ) -> Result<()> {
                const TILE: &str = stringify!($tile_scaling);
                const FINISH: &str = stringify!($finish_scaling);
                let (nd, splits) = (n * d, scratch.splits);
                if n <= rows_max_pairs() {
                    const ROWS: &str = stringify!($rows_scaling);
                    check_buffers(
                        gpu,
                        ROWS,
                        &[("op", op, d * d), ("x_in", x_in, nd), ("marginal", marginal, nd), ("x_out", &*x_out, nd)],
                    )?;
                    let err = err_pointer(gpu, ROWS, err, nd)?;
                    let args = $rows_scaling {
                        op: op.as_ptr(),
                        n,
                        d,
                        x_in: x_in.as_ptr(),
                        marginal: marginal.as_ptr(),
                        x_out: x_out.as_mut_ptr(),
                        err,
                    };
                    // SAFETY: `op` holds d * d values, the vectors n * d,
                    // `err` n * d or is null (checked); whole warps.
                    return unsafe { gpu.launch(row_config(gpu, n, d), args) };
                }
                check_buffers(gpu, FINISH, &[("marginal", marginal, nd), ("x_out", &*x_out, nd)])?;
                let err = err_pointer(gpu, FINISH, err, nd)?;
                if scratch.wide {
                    // The wide kernel reads `op` and `x_in` as their planes
                    // (`Scratch::split_operands`, then each half-step).
                    return Self::wide_update(gpu, n, d, marginal, x_out, err, scratch, half);
                }
                check_buffers(
                    gpu,
                    TILE,
                    &[("op", op, d * d), ("x_in", x_in, nd), ("partial", &scratch.first, splits * nd)],
                )?;
                let config = tile_config::<Self>(TILE, n, d, splits, false)?;
                let tile = $tile_scaling {
                    op: op.as_ptr(),
                    n,
                    d,
                    x_in: x_in.as_ptr(),
                    splits,
                    partial: scratch.first.as_mut_ptr(),
                };
                // One block per (row tile, pair tile, split), 1 <= splits
                // <= the chunks, TRANSPORT_THREADS threads and the shared
                // memory for Self (tile_config).
                // SAFETY: `op` holds d * d values, `x_in` n * d, `partial`
                // splits * n * d (checked); the launch shape above.
                unsafe { gpu.launch(config, tile)? };
                let finish = $finish_scaling {
                    n,
                    d,
                    splits,
                    partial: scratch.first.as_ptr(),
                    marginal: marginal.as_ptr(),
                    x_out: x_out.as_mut_ptr(),
                    err,
                };
                // SAFETY: `partial` holds splits * n * d values, `marginal`
                // and `x_out` n * d, `err` n * d or is null (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(nd), finish) }
            }

            fn log_update(
                gpu: &Gpu,
                c: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                reg: Self,
                p_in: &DeviceBuffer<Self>,
                marginal: &DeviceBuffer<Self>,
                p_out: &mut DeviceBuffer<Self>,
                err: Option<&mut DeviceBuffer<Self>>,
                scratch: &mut Scratch<Self>,
            ) -> Result<()> {
                const TILE: &str = stringify!($tile_log);
                const FINISH: &str = stringify!($finish_log);
                let (nd, splits) = (n * d, scratch.splits);
                if n <= rows_max_pairs() {
                    const ROWS: &str = stringify!($rows_log);
                    check_buffers(
                        gpu,
                        ROWS,
                        &[("c", c, d * d), ("p_in", p_in, nd), ("marginal", marginal, nd), ("p_out", &*p_out, nd)],
                    )?;
                    let err = err_pointer(gpu, ROWS, err, nd)?;
                    let args = $rows_log {
                        c: c.as_ptr(),
                        n,
                        d,
                        reg,
                        scale: <$real as TermScale>::term_scale(reg),
                        p_in: p_in.as_ptr(),
                        marginal: marginal.as_ptr(),
                        p_out: p_out.as_mut_ptr(),
                        err,
                    };
                    // SAFETY: as for the scaling domain's row kernel.
                    return unsafe { gpu.launch(row_config(gpu, n, d), args) };
                }
                let Some(second) = scratch.second.as_mut() else {
                    return Err(RuntimeError::InvalidLaunch { kernel: TILE, reason: "scratch without states".into() });
                };
                check_buffers(
                    gpu,
                    TILE,
                    &[
                        ("c", c, d * d),
                        ("p_in", p_in, nd),
                        ("part_max", &scratch.first, splits * nd),
                        ("part_sum", &*second, splits * nd),
                    ],
                )?;
                check_buffers(gpu, FINISH, &[("marginal", marginal, nd), ("p_out", &*p_out, nd)])?;
                let err = err_pointer(gpu, FINISH, err, nd)?;
                let config = tile_config::<Self>(TILE, n, d, splits, true)?;
                let tile = $tile_log {
                    c: c.as_ptr(),
                    n,
                    d,
                    scale: <$real as TermScale>::term_scale(reg),
                    p_in: p_in.as_ptr(),
                    splits,
                    part_max: scratch.first.as_mut_ptr(),
                    part_sum: second.as_mut_ptr(),
                };
                // SAFETY: as in `scaling_update`, with both state buffers
                // of splits * n * d values (checked).
                unsafe { gpu.launch(config, tile)? };
                let finish = $finish_log {
                    n,
                    d,
                    reg,
                    splits,
                    part_max: scratch.first.as_ptr(),
                    part_sum: second.as_ptr(),
                    marginal: marginal.as_ptr(),
                    p_out: p_out.as_mut_ptr(),
                    err,
                };
                // SAFETY: both state buffers hold splits * n * d values,
                // `marginal` and `p_out` n * d, `err` n * d or is null (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(nd), finish) }
            }

            fn check(
                gpu: &Gpu,
                a: &DeviceBuffer<Self>,
                b: &DeviceBuffer<Self>,
                m: &DeviceBuffer<Self>,
                flags: &mut DeviceBuffer<u32>,
            ) -> Result<()> {
                const K: &str = stringify!($check);
                check_buffers(gpu, K, &[("a", a, 0), ("b", b, a.len() as u64), ("m", m, 0)])?;
                gpu.check_device(flags, "flags")?;
                check_len(K, "flags", flags, 1)?;
                let (len, m_len) = (a.len() as u64, m.len() as u64);
                let args =
                    $check { a: a.as_ptr(), b: b.as_ptr(), len, m: m.as_ptr(), m_len, flags: flags.as_mut_ptr() };
                // SAFETY: `a` and `b` hold `len` values, `m` `m_len`, `flags`
                // one word (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(len.max(m_len)), args) }
            }

            fn pair_stats(
                gpu: &Gpu,
                n: u64,
                d: u64,
                partial: &DeviceBuffer<Self>,
                f: &DeviceBuffer<Self>,
                g: &DeviceBuffer<Self>,
                cost: &mut DeviceBuffer<Self>,
                centred: Option<(&mut DeviceBuffer<Self>, &mut DeviceBuffer<Self>)>,
            ) -> Result<()> {
                const K: &str = stringify!($pair_stats);
                let nd = n * d;
                check_buffers(gpu, K, &[("partial", partial, nd), ("f", f, nd), ("g", g, nd), ("cost", &*cost, n)])?;
                let (f_centred, g_centred) = match centred {
                    Some((fc, gc)) => {
                        check_buffers(gpu, K, &[("f_centred", &*fc, nd), ("g_centred", &*gc, nd)])?;
                        (fc.as_mut_ptr(), gc.as_mut_ptr())
                    }
                    None => (std::ptr::null_mut(), std::ptr::null_mut()),
                };
                if n == 0 {
                    return Ok(());
                }
                let args = $pair_stats {
                    n,
                    d,
                    partial: partial.as_ptr(),
                    f: f.as_ptr(),
                    g: g.as_ptr(),
                    cost: cost.as_mut_ptr(),
                    f_centred,
                    g_centred,
                };
                let config = LaunchConfig {
                    blocks: n.min(gpu.multiprocessor_count() as u64 * 8) as u32,
                    threads: TRANSPORT_THREADS,
                    shared_bytes: TRANSPORT_THREADS * 5 * 8,
                };
                // SAFETY: `partial`, `f`, `g` hold n * d values, `cost` n,
                // the centred outputs n * d or are null (checked); the launch
                // has TRANSPORT_THREADS threads and 5 float64 per thread of
                // shared memory.
                unsafe { gpu.launch(config, args) }
            }

            fn fill(gpu: &Gpu, x: &mut DeviceBuffer<Self>, len: u64, value: Self) -> Result<()> {
                check_buffers(gpu, stringify!($fill), &[("x", &*x, len)])?;
                let args = $fill { x: x.as_mut_ptr(), len, value };
                // SAFETY: `x` holds `len` values (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(len), args) }
            }

            fn potentials(gpu: &Gpu, x: &mut DeviceBuffer<Self>, len: u64, reg: Self) -> Result<()> {
                check_buffers(gpu, stringify!($potentials), &[("x", &*x, len)])?;
                let args = $potentials { x: x.as_mut_ptr(), len, reg };
                // SAFETY: `x` holds `len` values (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(len), args) }
            }

            fn cost(
                gpu: &Gpu,
                c: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                reg: Self,
                f: &DeviceBuffer<Self>,
                g: &DeviceBuffer<Self>,
                partial: &mut DeviceBuffer<Self>,
                scratch: &mut Scratch<Self>,
            ) -> Result<()> {
                const TILE: &str = stringify!($tile_cost);
                let (nd, splits) = (n * d, scratch.splits);
                check_buffers(
                    gpu,
                    TILE,
                    &[("c", c, d * d), ("f", f, nd), ("g", g, nd), ("partial", &scratch.first, splits * nd)],
                )?;
                check_buffers(gpu, stringify!($finish_sum), &[("out", &*partial, nd)])?;
                let config = tile_config::<Self>(TILE, n, d, splits, false)?;
                let tile = $tile_cost {
                    c: c.as_ptr(),
                    n,
                    d,
                    scale: <$real as TermScale>::term_scale(reg),
                    f: f.as_ptr(),
                    g: g.as_ptr(),
                    splits,
                    partial: scratch.first.as_mut_ptr(),
                };
                // SAFETY: as in `scaling_update` (checked above).
                unsafe { gpu.launch(config, tile)? };
                let finish =
                    $finish_sum { len: nd, splits, partial: scratch.first.as_ptr(), out: partial.as_mut_ptr() };
                // SAFETY: the scratch holds splits * n * d values, `partial` n * d (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(nd), finish) }
            }
        }
    };
}

kernels!(
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
kernels!(
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

#[cfg(test)]
mod tests {
    use super::splits_for_waves;

    #[test]
    fn splits_fill_the_waves() {
        // 1024 pairs of 1024 bins in wide tiles on 132 multiprocessors: two
        // splits (128 of 132 places); 300 pairs of 4096 bins: four (384 of
        // 396); many tiles: one; never more than the chunks.
        assert_eq!(splits_for_waves(64, 132, 64), 2);
        assert_eq!(splits_for_waves(96, 132, 256), 4);
        assert_eq!(splits_for_waves(256, 132, 64), 1);
        assert_eq!(splits_for_waves(2000, 132, 64), 1);
        assert_eq!(splits_for_waves(96, 132, 2), 1);
        assert_eq!(splits_for_waves(1, 132, 3), 3);
        assert_eq!(splits_for_waves(0, 0, 0), 1);
        for tiles in 1..300 {
            for chunks in 1..20 {
                let s = splits_for_waves(tiles, 132, chunks);
                assert!((1..=chunks).contains(&s), "{tiles} tiles, {chunks} chunks: {s}");
            }
        }
    }
}
