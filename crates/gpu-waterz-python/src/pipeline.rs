//! `agglomerate`: the facade's pipeline, driven threshold by threshold.

use crate::cuda::{borrow_affinities, CudaVolume};
use crate::results::result_tuple;
use crate::{to_py_err, value_error};
use gpu_waterz::{AffinityGraph, Backend, Config, Dims3, Gpu, ScoringFunction};
use numpy::{IntoPyArray, PyReadonlyArray3, PyReadonlyArray4};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A running agglomeration: `next_threshold()` gives one result tuple per
/// threshold, then `None`.
#[pyclass(module = "gpu_waterz._native")]
pub(crate) struct Agglomeration {
    run: gpu_waterz::Agglomeration,
    /// Segmentations stay on the device (CUDA affinities came in).
    on_device: bool,
    shape: (usize, usize, usize),
}

#[pymethods]
impl Agglomeration {
    /// The backend that runs: `"cpu"` or `"gpu"`.
    #[getter]
    fn backend(&self) -> String {
        self.run.backend().to_string()
    }

    /// What the input made this run do differently from stock waterz (see
    /// `gpu_waterz::Agglomeration::warnings`).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.run.warnings().to_vec()
    }

    fn next_threshold<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let run = &mut self.run;
        if !self.on_device {
            let result = py.detach(|| run.next_threshold()).map_err(to_py_err)?;
            let Some(r) = result else { return Ok(None) };
            let segmentation = r.segmentation.into_pyarray(py).into_any();
            return result_tuple(py, r.threshold, segmentation, r.metrics, r.merge_history, r.region_graph).map(Some);
        }
        let result = py.detach(|| run.next_threshold_device()).map_err(to_py_err)?;
        let Some(r) = result else { return Ok(None) };
        let gpu = self.run.gpu().expect("device results come from the GPU backend").clone();
        let volume = Bound::new(py, CudaVolume::new(r.segmentation, gpu, self.shape))?.into_any();
        result_tuple(py, r.threshold, volume, r.metrics, r.merge_history, r.region_graph).map(Some)
    }
}

/// The backend named `name` (`"auto"`, `"cpu"` or `"gpu"`; `ordinal` for the GPU).
fn backend(name: &str, ordinal: usize) -> PyResult<Backend> {
    match name {
        "auto" => Ok(Backend::Auto),
        "cpu" => Ok(Backend::Cpu),
        "gpu" => Backend::gpu(ordinal).map_err(to_py_err),
        other => Err(value_error(format!("backend must be 'auto', 'cpu' or 'gpu', not {other:?}"))),
    }
}

/// Starts an agglomeration. `affs_f32` or `affs_u8` holds host affinities
/// `(3, z, y, x)` (C order), or `cuda_affs` describes CUDA ones as
/// `(address, dtype, (z, y, x))` on device `ordinal`; thresholds are
/// ascending and unique.
#[pyfunction]
#[pyo3(signature = (affs_f32, affs_u8, cuda_affs, backend_name, ordinal, thresholds, gt, fragments, aff_threshold_low, aff_threshold_high, scoring_function, discretize_queue, merge_history, region_graph, epsilon))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn agglomerate(
    py: Python<'_>,
    affs_f32: Option<PyReadonlyArray4<'_, f32>>,
    affs_u8: Option<PyReadonlyArray4<'_, u8>>,
    cuda_affs: Option<(u64, String, (u64, u64, u64))>,
    backend_name: &str,
    ordinal: usize,
    thresholds: Vec<f64>,
    gt: Option<PyReadonlyArray3<'_, u64>>,
    fragments: Option<PyReadonlyArray3<'_, u64>>,
    aff_threshold_low: f64,
    aff_threshold_high: f64,
    scoring_function: &str,
    discretize_queue: u64,
    merge_history: bool,
    region_graph: bool,
    epsilon: f64,
) -> PyResult<Agglomeration> {
    let mut config = Config::new(&thresholds)
        .watershed_thresholds(aff_threshold_low, aff_threshold_high)
        .scoring(scoring_function.parse::<ScoringFunction>().map_err(value_error)?)
        .discretize_queue(discretize_queue)
        .merge_history(merge_history)
        .region_graph(region_graph)
        .epsilon(epsilon);
    if let Some(g) = gt {
        config = config.ground_truth(g.as_array().to_owned());
    }
    if let Some(f) = fragments {
        config = config.fragments(f.as_array().to_owned());
    }
    match (&affs_f32, &affs_u8, cuda_affs) {
        (None, None, Some((address, dtype, (z, y, x)))) => {
            let gpu = match backend(backend_name, ordinal)? {
                Backend::Gpu(gpu) => gpu,
                Backend::Auto => Gpu::new(ordinal).map_err(|e| to_py_err(e.into()))?,
                _ => return Err(value_error("CUDA affinities need the GPU backend")),
            };
            let config = config.backend(Backend::Gpu(gpu.clone()));
            let dims = Dims3::new(z, y, x);
            let run = py.detach(|| -> PyResult<_> {
                let affs = borrow_affinities(&gpu, address, &dtype, dims)?;
                gpu_waterz::Agglomeration::from_device(&affs, &gpu, config).map_err(to_py_err)
            })?;
            Ok(Agglomeration { run, on_device: true, shape: (z as usize, y as usize, x as usize) })
        }
        (f32s, u8s, None) => {
            let graph = match (f32s, u8s) {
                (Some(a), _) => AffinityGraph::from_f32(a.as_array()),
                (None, Some(a)) => AffinityGraph::from_u8(a.as_array()),
                (None, None) => return Err(value_error("no affinities given")),
            }
            .map_err(value_error)?;
            let config = config.backend(backend(backend_name, ordinal)?);
            let run = py.detach(|| gpu_waterz::Agglomeration::new(&graph, config)).map_err(to_py_err)?;
            let d = graph.dims();
            Ok(Agglomeration { run, on_device: false, shape: (d.z as usize, d.y as usize, d.x as usize) })
        }
        _ => Err(value_error("give host affinities or CUDA affinities, not both")),
    }
}
