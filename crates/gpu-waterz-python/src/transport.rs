//! `gpu_waterz.transport`'s native side: batched Sinkhorn on host arrays
//! (GPU or CPU) and on CUDA memory that torch or cupy owns.

use crate::cuda::borrow_floats;
use gpu_waterz::Gpu;
use gpu_waterz_transport::{gpu as on_gpu, Config, Domain, ErrorKind, Solution, TransportError};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

fn transport_err(e: TransportError) -> PyErr {
    match e.kind() {
        ErrorKind::InvalidInput => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn config(reg: f64, num_iter: usize, tol: f64, log_domain: bool) -> Config {
    Config::new(reg).num_iter(num_iter).tol(tol).domain(if log_domain { Domain::Log } else { Domain::Scaling })
}

/// Cost, potentials, iterations, marginal error and the backend that ran.
type HostResult<'py, T> =
    (Bound<'py, PyArray1<T>>, Bound<'py, PyArray2<T>>, Bound<'py, PyArray2<T>>, usize, Option<f64>, &'static str);

fn solve_host<'py, T: on_gpu::DeviceFloat + numpy::Element>(
    py: Python<'py>,
    a: PyReadonlyArray2<'py, T>,
    b: PyReadonlyArray2<'py, T>,
    m: PyReadonlyArray2<'py, T>,
    config: Config,
    backend: &str,
    ordinal: usize,
) -> PyResult<HostResult<'py, T>> {
    let gpu = match backend {
        "cpu" => None,
        "gpu" => Some(Gpu::new(ordinal).map_err(|e| PyRuntimeError::new_err(e.to_string()))?),
        "auto" => Gpu::new(ordinal).ok(),
        other => return Err(PyValueError::new_err(format!("backend must be 'auto', 'cpu' or 'gpu', not {other:?}"))),
    };
    let (a, b, m) = (a.as_array(), b.as_array(), m.as_array());
    let (solution, ran): (Solution<T>, &'static str) = py
        .detach(|| match &gpu {
            Some(g) => on_gpu::solve_host(g, a, b, m, &config).map(|s| (s, "gpu")),
            None => gpu_waterz_transport::solve_cpu(a, b, m, &config).map(|s| (s, "cpu")),
        })
        .map_err(transport_err)?;
    Ok((
        solution.cost.into_pyarray(py),
        solution.f.into_pyarray(py),
        solution.g.into_pyarray(py),
        solution.iterations,
        solution.marginal_error,
        ran,
    ))
}

/// Sinkhorn on float64 host arrays `a`, `b` (`n × d`), `m` (`d × d`).
#[pyfunction]
#[pyo3(signature = (a, b, m, reg, num_iter, tol, log_domain, backend, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sinkhorn_f64<'py>(
    py: Python<'py>,
    a: PyReadonlyArray2<'py, f64>,
    b: PyReadonlyArray2<'py, f64>,
    m: PyReadonlyArray2<'py, f64>,
    reg: f64,
    num_iter: usize,
    tol: f64,
    log_domain: bool,
    backend: &str,
    ordinal: usize,
) -> PyResult<HostResult<'py, f64>> {
    solve_host(py, a, b, m, config(reg, num_iter, tol, log_domain), backend, ordinal)
}

/// Sinkhorn on float32 host arrays.
#[pyfunction]
#[pyo3(signature = (a, b, m, reg, num_iter, tol, log_domain, backend, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sinkhorn_f32<'py>(
    py: Python<'py>,
    a: PyReadonlyArray2<'py, f32>,
    b: PyReadonlyArray2<'py, f32>,
    m: PyReadonlyArray2<'py, f32>,
    reg: f64,
    num_iter: usize,
    tol: f64,
    log_domain: bool,
    backend: &str,
    ordinal: usize,
) -> PyResult<HostResult<'py, f32>> {
    solve_host(py, a, b, m, config(reg, num_iter, tol, log_domain), backend, ordinal)
}

fn solve_cuda<T: on_gpu::DeviceFloat>(
    gpu: &Gpu,
    pointers: [u64; 8],
    (n, d): (usize, usize),
    config: &Config,
) -> PyResult<(usize, Option<f64>)> {
    let [a, b, m, f, g, cost, f_centred, g_centred] = pointers;
    // Shapes and settings before the memory is borrowed (an empty tensor
    // has no allocation to borrow).
    gpu_waterz_transport::check_shapes((n, d), (n, d), (d, d)).map_err(transport_err)?;
    gpu_waterz_transport::check_settings(config).map_err(transport_err)?;
    let nd = n.checked_mul(d).ok_or_else(|| PyValueError::new_err("n × d overflows"))?;
    let borrow = |address: u64, len: usize| borrow_floats::<T>(gpu, address, len);
    let (a, b, m) = (borrow(a, nd)?, borrow(b, nd)?, borrow(m, d * d)?);
    let (mut f, mut g, mut cost) = (borrow(f, nd)?, borrow(g, nd)?, borrow(cost, n)?);
    let (mut f_centred, mut g_centred) = (borrow(f_centred, nd)?, borrow(g_centred, nd)?);
    let outputs = on_gpu::DeviceOutputs {
        f: &mut f,
        g: &mut g,
        cost: &mut cost,
        centred: Some((&mut f_centred, &mut g_centred)),
    };
    let run = on_gpu::solve_on_device(gpu, &a, &b, &m, (n, d), config, outputs).map_err(transport_err)?;
    Ok((run.iterations, run.marginal_error))
}

/// Sinkhorn on CUDA memory: `a`, `b` (`n × d`), `m` (`d × d`) read in
/// place and checked on the device (finite, histograms >= 0); the
/// potentials written into `f`, `g` (`n × d`), the costs into `cost` (`n`)
/// and the potentials centred on their finite values' mean into
/// `f_centred`, `g_centred` (`n × d`), all allocated by the caller,
/// C-contiguous `dtype` (`"f4"` or `"f8"`) on device `ordinal`; returns
/// the iterations and the marginal error. `pointers` lists `a, b, m, f, g,
/// cost, f_centred, g_centred`.
#[pyfunction]
#[pyo3(signature = (pointers, n, d, dtype, ordinal, reg, num_iter, tol, log_domain))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sinkhorn_cuda(
    py: Python<'_>,
    pointers: [u64; 8],
    n: usize,
    d: usize,
    dtype: &str,
    ordinal: usize,
    reg: f64,
    num_iter: usize,
    tol: f64,
    log_domain: bool,
) -> PyResult<(usize, Option<f64>)> {
    let gpu = Gpu::new(ordinal).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let config = config(reg, num_iter, tol, log_domain);
    py.detach(|| match dtype {
        "f4" => solve_cuda::<f32>(&gpu, pointers, (n, d), &config),
        "f8" => solve_cuda::<f64>(&gpu, pointers, (n, d), &config),
        other => Err(PyValueError::new_err(format!("CUDA tensors must be float32 or float64, not {other}"))),
    })
}
