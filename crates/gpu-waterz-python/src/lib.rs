//! The native half of the Python package `gpu_waterz`: the pipeline
//! ([`gpu_waterz::Agglomeration`], whichever backend it chose) as an
//! iterator of per-threshold results, CUDA volumes that torch and cupy take
//! without a copy, and the metrics. `python/gpu_waterz/__init__.py` turns
//! these into waterz's generator.
#![deny(unsafe_code)]

mod blockwise;
#[allow(unsafe_code)]
mod cuda;
mod greyscale;
mod ndimage;
mod pipeline;
mod results;
mod transport;

use numpy::PyReadonlyArray3;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A `ValueError` with `e`'s message.
pub(crate) fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The facade's error as Python's: device and driver failures are
/// `RuntimeError`s, bad input and unsupported settings `ValueError`s.
pub(crate) fn to_py_err(e: gpu_waterz::Error) -> PyErr {
    use gpu_waterz::ErrorKind;
    match e.kind() {
        ErrorKind::NoGpu | ErrorKind::OutOfMemory | ErrorKind::Gpu => PyRuntimeError::new_err(e.to_string()),
        _ => value_error(e),
    }
}

/// waterz's metrics of a segmentation against ground truth (0 ignored).
#[pyfunction]
fn evaluate<'py>(
    py: Python<'py>,
    segmentation: PyReadonlyArray3<'py, u64>,
    gt: PyReadonlyArray3<'py, u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let (s, g) = (segmentation.as_array(), gt.as_array());
    let m = py.detach(|| gpu_waterz_eval::evaluate(s, g)).map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("voi_split", m.voi_split)?;
    d.set_item("voi_merge", m.voi_merge)?;
    d.set_item("rand_split", m.rand_split)?;
    d.set_item("rand_merge", m.rand_merge)?;
    Ok(d)
}

/// Returns the device memory gpu-waterz's pool keeps for later calls to the
/// driver, on every device it has opened.
#[pyfunction]
fn empty_cache(py: Python<'_>) -> PyResult<()> {
    py.detach(gpu_waterz_runtime::Gpu::trim_opened_pools).map_err(|e| to_py_err(gpu_waterz::Error::from(e)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pipeline::Agglomeration>()?;
    m.add_class::<cuda::CudaVolume>()?;
    m.add_function(wrap_pyfunction!(pipeline::agglomerate, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(empty_cache, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::grey_morphology, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::grey_filter_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::grey_filter_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::binary_filter_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::binary_filter_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::binary_fill_holes_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::binary_fill_holes_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::distance_transform_edt, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::distance_transform_edt_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::distance_transform_edt_indices_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::distance_transform_indices, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::distance_transform_cdt_gpu, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::distance_transform_cdt_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndimage::takes_chamfer, m)?)?;
    m.add_function(wrap_pyfunction!(greyscale::grey_watershed, m)?)?;
    m.add_function(wrap_pyfunction!(greyscale::grey_watershed_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(transport::sinkhorn_f32, m)?)?;
    m.add_function(wrap_pyfunction!(transport::sinkhorn_f64, m)?)?;
    m.add_function(wrap_pyfunction!(transport::sinkhorn_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_local_plateaus, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_settle, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_basins_packed, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_edges_packed, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_edges_implicit_packed, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_labels_packed, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_fragment_ids, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_local_plateaus_implicit, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_merge, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_steps, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_check_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::implicit_cell_affinities, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::blockwise_decode, m)?)?;
    m.add_function(wrap_pyfunction!(blockwise::decode_bytes, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
