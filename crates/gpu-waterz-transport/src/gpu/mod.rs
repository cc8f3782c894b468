//! The Sinkhorn iteration on the GPU: the batch's vectors stay on the
//! device; only the marginal errors (at the checks) and the per-row costs
//! come back.

#[allow(unsafe_code)]
mod launch;

use crate::{check_settings, check_shapes, Config, Domain, Float, Result, Solution};
use gpu_waterz_runtime::{DeviceBuffer, Gpu};
use launch::Kernels;
use ndarray::{Array2, ArrayView2};

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

/// Solves `n` pairs of `d` bins whose histograms `a`, `b` (`n × d`,
/// row-major) and cost matrix `m` (`d × d`) are on the device, writing the
/// potentials into `f` and `g` (`n × d`). The shapes and settings are
/// checked; the values are the caller's to check (see
/// [`crate::check_problem`]): negative or non-finite histograms give
/// meaningless results, never out-of-bounds access.
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
    check_settings(config)?;
    let (nu, du) = (n as u64, d as u64);
    for (what, buffer, len) in [("a", a, n * d), ("b", b, n * d), ("M", m, d * d), ("f", &*f, n * d), ("g", &*g, n * d)]
    {
        if buffer.len() != len {
            return Err(crate::invalid(format!("{what} holds {} values, not {len}", buffer.len())));
        }
    }
    let reg = T::from_f64(config.reg);
    let scaling = config.domain == Domain::Scaling;
    // The rows each half-step reads: the kernel (or M) and its transpose.
    let mut rows = gpu.uninit::<T>(d * d)?;
    let mut columns = gpu.uninit::<T>(d * d)?;
    T::prepare(gpu, m, du, reg, scaling, &mut rows, &mut columns)?;
    let start = if scaling { T::from_f64(1.0 / d as f64) } else { T::ZERO };
    let starting = vec![start; n * d];
    gpu.upload_into(f, 0, &starting)?;
    gpu.upload_into(g, 0, &starting)?;
    let mut err = if config.tol > 0.0 { Some(gpu.uninit::<T>(n * d)?) } else { None };
    let mut iterations = 0;
    let mut marginal_error = None;
    for it in 0..config.num_iter {
        let check = crate::checks_at(config, it);
        let e = if check { err.as_mut() } else { None };
        if scaling {
            T::scaling_update(gpu, &columns, nu, du, f, b, g, e)?;
        } else {
            T::log_update(gpu, &columns, nu, du, reg, f, b, g, e)?;
        }
        if check {
            let errors = gpu.download(err.as_ref().expect("allocated with a tolerance"))?;
            let worst = errors.chunks(d).map(|row| row.iter().map(|e| e.to_f64()).sum::<f64>()).fold(0.0, f64::max);
            marginal_error = Some(worst);
            if worst < config.tol {
                break;
            }
        }
        if scaling {
            T::scaling_update(gpu, &rows, nu, du, g, a, f, None)?;
        } else {
            T::log_update(gpu, &rows, nu, du, reg, g, a, f, None)?;
        }
        iterations = it + 1;
    }
    if scaling {
        T::potentials(gpu, f, nu * du, reg)?;
        T::potentials(gpu, g, nu * du, reg)?;
    }
    let mut partial = gpu.uninit::<T>(n * d)?;
    T::cost(gpu, m, nu, du, reg, f, g, &mut partial)?;
    let partial = gpu.download(&partial)?;
    let cost = partial.chunks(d).map(|row| T::from_f64(row.iter().map(|v| v.to_f64()).sum())).collect();
    Ok(DeviceReport { cost, iterations, marginal_error })
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
