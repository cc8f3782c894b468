//! The Sinkhorn iteration on the GPU: the batch's vectors stay on the
//! device; only the marginal errors (at the checks) and the per-row costs
//! come back.
//!
//! Which kernels run the scaling domain's half-steps, by pair count (the
//! limits are `gpu_waterz_abi::transport`'s, each measured on an H200 and
//! each overridden by an environment variable named below):
//! - up to 32 pairs, when each block's rows of both matrices and the
//!   vectors fit its shared memory (float32 up to about d = 1400): one
//!   cooperative launch per run of iterations between checks, the matrix
//!   rows resident in shared memory (`ot_resident_scaling_*`);
//! - otherwise up to 4 pairs: one cooperative launch per run, the rows read
//!   from global memory (`ot_persistent_scaling_*`);
//! - float32 from 64 pairs: tiles on the tensor cores in three TF32
//!   products per step (float32 accuracy), both operands read as their
//!   TF32 planes (the Gibbs kernel split once per solve, each side's
//!   scalings by the half-step that writes them) and copied into shared
//!   memory by `cp.async`: on compute capability 9.0 Hopper's warpgroup
//!   products (`ot_wgmma_scaling_f32`, 64 × 128 tiles; [`WGMMA_ENV`] turns
//!   them off), elsewhere `mma.sync` (`ot_wide_scaling_f32`, 128 × 128);
//!   the columns split among blocks to fill the waves, the finish kernel
//!   adding the splits' partial sums;
//! - else 64 × 64 tiles (`ot_tile_scaling_*`), or one warp per row for a
//!   single pair (`ot_rows_scaling_*`), the columns split among blocks when
//!   the tiles are too few, replayed from CUDA graphs for long runs.
//!
//! The log domain runs tiles (`ot_tile_log_*`) or rows for one pair.

#[allow(unsafe_code)]
mod launch;

use crate::{
    check_settings, check_shapes, Config, CudaGraphs, Domain, Float, Result, Solution, GRAPH_ITERATIONS,
    GRAPH_MIN_ITERATIONS,
};
use gpu_waterz_abi::transport::{
    TRANSPORT_PERSISTENT_ITERATIONS, TRANSPORT_PERSISTENT_MAX_PAIRS, TRANSPORT_RESIDENT_MAX_PAIRS,
};
use gpu_waterz_runtime::{DeviceBuffer, Gpu, Graph};
use launch::{HalfStep, Kernels, Scratch, SingleLaunch};
use ndarray::{Array2, ArrayView2};

/// Environment variable that turns the CUDA graphs off when `0` and on
/// when `1`, whatever the configuration says (for comparisons;
/// [`Config::cuda_graphs`] is the API's switch).
pub const CUDA_GRAPHS_ENV: &str = "GPU_WATERZ_CUDA_GRAPHS";

/// Environment variable naming the most pairs for which the half-steps use
/// the row kernels instead of the tile kernels (default
/// `gpu_waterz_abi::transport::TRANSPORT_ROWS_MAX_PAIRS`; 0 sends every
/// size to the tiles), read once per process: for comparisons, and for the
/// tests that keep the row kernels checked on sizes they do not serve by
/// default.
pub const ROWS_MAX_PAIRS_ENV: &str = "GPU_WATERZ_OT_ROWS_MAX_PAIRS";

/// Environment variable naming the fewest pairs for which float32
/// scaling-domain half-steps use the wide kernel (128 × 128 tiles on the
/// tensor cores) instead of the 64 × 64 tiles (default
/// `gpu_waterz_abi::transport::TRANSPORT_WIDE_MIN_PAIRS`), read once per
/// process: for comparisons and for the tests that check the wide kernel on
/// small sizes.
pub const WIDE_MIN_PAIRS_ENV: &str = "GPU_WATERZ_OT_WIDE_MIN_PAIRS";

/// Environment variable that keeps the float32 scaling half-steps off
/// Hopper's warpgroup kernel (`ot_wgmma_scaling_f32`) when `0`, on the
/// wide `mma.sync` kernel instead, read once per process: for comparisons
/// and for the tests that keep the wide kernel checked on compute
/// capability 9.0.
pub const WGMMA_ENV: &str = "GPU_WATERZ_OT_WGMMA";

/// Environment variable naming the most pairs for which scaling-domain
/// iterations run in one persistent launch between checks (default
/// `gpu_waterz_abi::transport::TRANSPORT_PERSISTENT_MAX_PAIRS`; 0 turns
/// them off), read once per process: for comparisons.
pub const PERSISTENT_MAX_PAIRS_ENV: &str = "GPU_WATERZ_OT_PERSISTENT_MAX_PAIRS";

/// Environment variable naming the most pairs for which scaling-domain
/// iterations run in one launch with the matrices resident in shared
/// memory (default
/// `gpu_waterz_abi::transport::TRANSPORT_RESIDENT_MAX_PAIRS`; 0 turns
/// them off), read once per process: for comparisons and tests.
pub const RESIDENT_MAX_PAIRS_ENV: &str = "GPU_WATERZ_OT_RESIDENT_MAX_PAIRS";

/// The value of the environment variable `name` as a number, read once
/// into `cell`, or `default`.
fn limit_from_env(cell: &'static std::sync::OnceLock<u64>, name: &str, default: u64) -> u64 {
    *cell.get_or_init(|| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default))
}

/// The most pairs for which the scaling iterations run persistently:
/// [`PERSISTENT_MAX_PAIRS_ENV`], read once, or the default.
fn persistent_max_pairs() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    limit_from_env(&LIMIT, PERSISTENT_MAX_PAIRS_ENV, TRANSPORT_PERSISTENT_MAX_PAIRS)
}

/// The most pairs for which the scaling iterations run with the matrices
/// resident: [`RESIDENT_MAX_PAIRS_ENV`], read once, or the default.
fn resident_max_pairs() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    limit_from_env(&LIMIT, RESIDENT_MAX_PAIRS_ENV, TRANSPORT_RESIDENT_MAX_PAIRS)
}

/// The float types with device kernels: float32 and float64.
#[allow(private_bounds)]
pub trait DeviceFloat: Float + Kernels {}
impl DeviceFloat for f32 {}
impl DeviceFloat for f64 {}

/// What [`solve_into`] found besides the potentials it wrote.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeviceReport<T> {
    /// Each pair's entropic cost.
    pub cost: Vec<T>,
    /// The iterations run.
    pub iterations: usize,
    /// The largest second-marginal L1 error at the last check.
    pub marginal_error: Option<f64>,
}

/// Where [`solve_on_device`] writes: the potentials `f`, `g` (`n × d`),
/// each pair's cost (`n`), and, when given, the potentials centred on the
/// mean of their finite values (`n × d` each: the cost's gradients with
/// respect to the histograms).
#[derive(Debug)]
pub struct DeviceOutputs<'a, T> {
    /// The first potentials.
    pub f: &'a mut DeviceBuffer<T>,
    /// The second potentials.
    pub g: &'a mut DeviceBuffer<T>,
    /// Each pair's entropic cost.
    pub cost: &'a mut DeviceBuffer<T>,
    /// `f` and `g` centred, or `None`.
    pub centred: Option<(&'a mut DeviceBuffer<T>, &'a mut DeviceBuffer<T>)>,
}

/// What [`solve_on_device`] found besides what it wrote.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct DeviceRun {
    /// The iterations run.
    pub iterations: usize,
    /// The largest second-marginal L1 error at the last check.
    pub marginal_error: Option<f64>,
}

/// Fails unless every buffer holds its length.
fn check_lengths<T>(buffers: &[(&str, &DeviceBuffer<T>, usize)]) -> Result<()> {
    for &(what, buffer, len) in buffers {
        if buffer.len() != len {
            return Err(crate::invalid(format!("{what} holds {} values, not {len}", buffer.len())));
        }
    }
    Ok(())
}

/// Solves `n` pairs of `d` bins whose histograms `a`, `b` (`n × d`,
/// row-major) and cost matrix `m` (`d × d`) are on the device, writing the
/// potentials into `f` and `g` (`n × d`). The shapes and settings are
/// checked; the values are the caller's to check (see
/// [`crate::check_problem`], or [`solve_on_device`], which checks them on
/// the device): negative or non-finite histograms give meaningless results,
/// never out-of-bounds access.
#[allow(clippy::too_many_arguments)]
pub fn solve_into<T: DeviceFloat>(
    gpu: &Gpu,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    m: &DeviceBuffer<T>,
    (n, d): (usize, usize),
    config: &Config,
    f: &mut DeviceBuffer<T>,
    g: &mut DeviceBuffer<T>,
) -> Result<DeviceReport<T>> {
    check_shapes((n, d), (n, d), (d, d))?;
    let mut cost = gpu.uninit::<T>(n.max(1))?;
    let outputs = DeviceOutputs { f, g, cost: &mut cost, centred: None };
    let run = solve_checked(gpu, a, b, m, (n, d), config, outputs, false)?;
    let cost = gpu.download_prefix(&cost, n)?;
    Ok(DeviceReport { cost, iterations: run.iterations, marginal_error: run.marginal_error })
}

/// As [`solve_into`], with everything left on the device and the values
/// checked there too: `a` and `b` must be finite and >= 0, `m` finite
/// (checked by a kernel that runs with the iterations; its flags are read
/// once, at the end, with the other results, so a bad input costs the run
/// but no extra synchronisation). Writes the costs (and on request the
/// centred potentials) into `outputs`.
pub fn solve_on_device<T: DeviceFloat>(
    gpu: &Gpu,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    m: &DeviceBuffer<T>,
    shape: (usize, usize),
    config: &Config,
    outputs: DeviceOutputs<'_, T>,
) -> Result<DeviceRun> {
    solve_checked(gpu, a, b, m, shape, config, outputs, true)
}

/// [`solve_into`] and [`solve_on_device`]: the iterations, the costs per
/// pair and the centring on the device, and with `check_values` the
/// values' check.
#[allow(clippy::too_many_arguments)]
fn solve_checked<T: DeviceFloat>(
    gpu: &Gpu,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    m: &DeviceBuffer<T>,
    (n, d): (usize, usize),
    config: &Config,
    outputs: DeviceOutputs<'_, T>,
    check_values: bool,
) -> Result<DeviceRun> {
    check_shapes((n, d), (n, d), (d, d))?;
    check_settings(config)?;
    let DeviceOutputs { f, g, cost, centred } = outputs;
    let (nu, du) = (n as u64, d as u64);
    check_lengths(&[("a", a, n * d), ("b", b, n * d), ("M", m, d * d), ("f", &*f, n * d), ("g", &*g, n * d)])?;
    check_lengths(&[("cost", &*cost, n.max(1))])?;
    if let Some((fc, gc)) = &centred {
        check_lengths(&[("f_centred", &**fc, n * d), ("g_centred", &**gc, n * d)])?;
    }
    let flags = if check_values {
        let mut flags = gpu.zeros::<u32>(1)?;
        T::check(gpu, a, b, m, &mut flags)?;
        Some(flags)
    } else {
        None
    };
    let run = iterate(gpu, a, b, m, (n, d), config, f, g)?;
    let mut scratch = Scratch::<T>::new(gpu, nu, du, false)?;
    let mut partial = gpu.uninit::<T>(n * d)?;
    let reg = T::from_f64(config.reg);
    T::cost(gpu, m, nu, du, reg, f, g, &mut partial, &mut scratch)?;
    T::pair_stats(gpu, nu, du, &partial, f, g, cost, centred)?;
    if let Some(flags) = flags {
        let flags = gpu.download(&flags)?[0];
        for (bit, what) in [
            (1, "a must hold finite values >= 0 (histograms)"),
            (2, "b must hold finite values >= 0 (histograms)"),
            (4, "M must be finite"),
        ] {
            if flags & bit != 0 {
                return Err(crate::invalid(what));
            }
        }
    }
    Ok(run)
}

/// The Sinkhorn iterations, from the starting potentials (or scalings)
/// to the potentials in `f` and `g`.
#[allow(clippy::too_many_arguments)]
fn iterate<T: DeviceFloat>(
    gpu: &Gpu,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    m: &DeviceBuffer<T>,
    (n, d): (usize, usize),
    config: &Config,
    f: &mut DeviceBuffer<T>,
    g: &mut DeviceBuffer<T>,
) -> Result<DeviceRun> {
    let (nu, du) = (n as u64, d as u64);
    let reg = T::from_f64(config.reg);
    let scaling = config.domain == Domain::Scaling;
    // The rows each half-step reads: the kernel (or M) and its transpose.
    let mut rows = gpu.uninit::<T>(d * d)?;
    let mut columns = gpu.uninit::<T>(d * d)?;
    T::prepare(gpu, m, du, reg, scaling, &mut rows, &mut columns)?;
    let start = if scaling { T::from_f64(1.0 / d as f64) } else { T::ZERO };
    T::fill(gpu, f, nu * du, start)?;
    T::fill(gpu, g, nu * du, start)?;
    let mut err = if config.tol > 0.0 { Some(gpu.uninit::<T>(n * d)?) } else { None };
    let mut scratch =
        if scaling { Scratch::<T>::for_scaling(gpu, nu, du)? } else { Scratch::<T>::new(gpu, nu, du, true)? };
    // The tensor-core kernels' operands, split into their TF32 parts
    // (nothing for other kernels).
    scratch.split_operands(gpu, (nu, du), &rows, &columns, f, g)?;
    // The half-steps: `g` from `f` (with the marginal errors when `err` is
    // given), then `f` from `g`.
    let first_half = |f: &DeviceBuffer<T>,
                      g: &mut DeviceBuffer<T>,
                      err: Option<&mut DeviceBuffer<T>>,
                      scratch: &mut Scratch<T>|
     -> gpu_waterz_runtime::Result<()> {
        if scaling {
            T::scaling_update(gpu, &columns, nu, du, f, b, g, err, scratch, HalfStep::First)
        } else {
            T::log_update(gpu, &columns, nu, du, reg, f, b, g, err, scratch)
        }
    };
    let second_half =
        |g: &DeviceBuffer<T>, f: &mut DeviceBuffer<T>, scratch: &mut Scratch<T>| -> gpu_waterz_runtime::Result<()> {
            if scaling {
                T::scaling_update(gpu, &rows, nu, du, g, a, f, None, scratch, HalfStep::Second)
            } else {
                T::log_update(gpu, &rows, nu, du, reg, g, a, f, None, scratch)
            }
        };
    let mut iterations = 0;
    let mut marginal_error = None;
    // Runs of iterations without checks replay graphs, one per run length.
    let mut graphs: Vec<(usize, Graph)> = Vec::new();
    // GPU_WATERZ_CUDA_GRAPHS=0 turns the graphs off, to compare.
    let graphs_setting = match std::env::var(CUDA_GRAPHS_ENV).as_deref() {
        Ok("0") => CudaGraphs::Off,
        Ok("1") => CudaGraphs::On,
        _ => config.graphs,
    };
    let use_graphs = match graphs_setting {
        CudaGraphs::On => true,
        CudaGraphs::Off => false,
        _ => config.num_iter >= GRAPH_MIN_ITERATIONS,
    };
    // Few pairs in the scaling domain: the iterations between checks run
    // in one persistent launch each, with the matrices resident in shared
    // memory where they fit. A kernel that refuses (the rows do not fit, or
    // the device refuses cooperative launches or holds too few blocks at
    // once) is refused before anything is queued and not tried again; an
    // earlier kernel's error returns at the next launch.
    let mut single_launches: Vec<SingleLaunch> = [
        (scaling && nu <= resident_max_pairs()).then_some(SingleLaunch::Resident),
        (scaling && nu <= persistent_max_pairs()).then_some(SingleLaunch::Persistent),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut it = 0;
    while it < config.num_iter {
        let unchecked =
            |most: usize| (it..config.num_iter.min(it + most)).take_while(|&i| !crate::checks_at(config, i)).count();
        let run = unchecked(TRANSPORT_PERSISTENT_ITERATIONS as usize);
        if run >= 1 {
            while let Some(&kernel) = single_launches.first() {
                let launched =
                    T::single_launch_scaling(kernel, gpu, &rows, &columns, nu, du, a, b, f, g, run as u64).is_ok();
                if launched {
                    break;
                }
                single_launches.remove(0);
            }
            if !single_launches.is_empty() {
                // The single launches wrote `f` and `g` without the
                // tensor-core kernels' planes (where the limits, set by the
                // environment, let both serve one size).
                scratch.split_scalings(gpu, (nu, du), f, g)?;
                it += run;
                iterations = it;
                continue;
            }
        }
        let run = unchecked(GRAPH_ITERATIONS);
        if use_graphs && run >= 2 {
            if !graphs.iter().any(|(len, _)| *len == run) {
                let graph = gpu.capture(|| {
                    for _ in 0..run {
                        first_half(f, g, None, &mut scratch)?;
                        second_half(g, f, &mut scratch)?;
                    }
                    Ok(())
                })?;
                graphs.push((run, graph));
            }
            graphs.iter().find(|(len, _)| *len == run).expect("captured above").1.launch()?;
            it += run;
            iterations = it;
            continue;
        }
        let check = crate::checks_at(config, it);
        first_half(f, g, if check { err.as_mut() } else { None }, &mut scratch)?;
        if check {
            let errors = gpu.download(err.as_ref().expect("allocated with a tolerance"))?;
            let worst = errors.chunks(d).map(|row| row.iter().map(|e| e.to_f64()).sum::<f64>()).fold(0.0, f64::max);
            marginal_error = Some(worst);
            if worst < config.tol {
                break;
            }
        }
        second_half(g, f, &mut scratch)?;
        it += 1;
        iterations = it;
    }
    drop(graphs);
    if scaling {
        T::potentials(gpu, f, nu * du, reg)?;
        T::potentials(gpu, g, nu * du, reg)?;
    }
    Ok(DeviceRun { iterations, marginal_error })
}

/// As [`solve_into`], with new buffers for the potentials.
pub fn solve<T: DeviceFloat>(
    gpu: &Gpu,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    m: &DeviceBuffer<T>,
    shape: (usize, usize),
    config: &Config,
) -> Result<(DeviceReport<T>, DeviceBuffer<T>, DeviceBuffer<T>)> {
    let (n, d) = shape;
    let len = n.checked_mul(d).ok_or_else(|| crate::invalid("n × d overflows"))?;
    let mut f = gpu.uninit::<T>(len.max(1))?;
    let mut g = gpu.uninit::<T>(len.max(1))?;
    if len == 0 {
        check_shapes(shape, shape, (d, d))?;
    }
    let report = solve_into(gpu, a, b, m, shape, config, &mut f, &mut g)?;
    Ok((report, f, g))
}

/// Solves host arrays on the GPU (checked as [`crate::check_problem`]
/// does), returning host results.
pub fn solve_host<T: DeviceFloat>(
    gpu: &Gpu,
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    m: ArrayView2<'_, T>,
    config: &Config,
) -> Result<Solution<T>> {
    crate::check_problem(a, b, m, config)?;
    let (n, d) = a.dim();
    let upload = |x: ArrayView2<'_, T>| -> Result<DeviceBuffer<T>> {
        let x = x.as_standard_layout();
        Ok(gpu.upload(x.as_slice().expect("standard layout"))?)
    };
    let (a, b, m) = (upload(a)?, upload(b)?, upload(m)?);
    let (report, f, g) = solve(gpu, &a, &b, &m, (n, d), config)?;
    let to_host = |x: &DeviceBuffer<T>| -> Result<Array2<T>> {
        Ok(Array2::from_shape_vec((n, d), gpu.download(x)?).expect("n × d values"))
    };
    Ok(Solution {
        cost: report.cost,
        f: to_host(&f)?,
        g: to_host(&g)?,
        iterations: report.iterations,
        marginal_error: report.marginal_error,
    })
}
