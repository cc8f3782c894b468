//! The native half of the Python package `gpu_waterz`: the CPU reference
//! and the GPU pipeline as iterators of per-threshold results, CUDA
//! volumes that torch and cupy take without a copy, and the metrics.
//! `python/gpu_waterz/__init__.py` turns these into waterz's generator.

use gpu_waterz::cpu::{Agglomeration, Options};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{AffinityGraph, ScoringFunction};
use gpu_waterz_runtime::{DeviceAffinities, DeviceBuffer, Gpu};
use numpy::{IntoPyArray, PyReadonlyArray3, PyReadonlyArray4};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn to_py_err(e: gpu_waterz::Error) -> PyErr {
    match e {
        gpu_waterz::Error::Runtime(_)
        | gpu_waterz::Error::Watershed(_)
        | gpu_waterz::Error::Graph(_)
        | gpu_waterz::Error::Parhac(gpu_waterz_parhac::ParhacError::Runtime(_)) => {
            PyRuntimeError::new_err(e.to_string())
        }
        other => value_error(other),
    }
}

/// A list of dicts with the given integer items and a float `score` each,
/// as waterz returns merge histories and region graphs.
fn dict_list<'py>(
    py: Python<'py>,
    ids: impl Iterator<Item = Vec<(&'static str, u64)>>,
    scores: impl Iterator<Item = f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let list = PyList::empty(py);
    for (items, score) in ids.zip(scores) {
        let d = PyDict::new(py);
        for (key, value) in items {
            d.set_item(key, value)?;
        }
        d.set_item("score", score)?;
        list.append(d)?;
    }
    Ok(list.into_any())
}

/// One agglomeration run on the CPU reference, advanced one threshold at a time.
#[pyclass(module = "gpu_waterz._native")]
struct CpuAgglomeration {
    run: Agglomeration,
}

#[pymethods]
impl CpuAgglomeration {
    /// Merges up to the next threshold. Returns None after the last one,
    /// else `(threshold, segmentation, metrics, merge_history, region_graph)`
    /// with None for what was not asked for.
    fn next_threshold<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyTuple>>> {
        let run = &mut self.run;
        let result = py.detach(|| run.next_threshold()).map_err(to_py_err)?;
        let Some(r) = result else { return Ok(None) };
        let segmentation = r.segmentation.into_pyarray(py).into_any();
        result_tuple(py, r.threshold, segmentation, r.metrics, r.merge_history, r.region_graph).map(Some)
    }
}

/// `(threshold, segmentation, metrics, merge_history, region_graph)`, with
/// None for what was not asked for.
fn result_tuple<'py>(
    py: Python<'py>,
    threshold: f64,
    segmentation: Bound<'py, PyAny>,
    metrics: Option<gpu_waterz::Metrics>,
    merge_history: Option<Vec<gpu_waterz::Merge>>,
    region_graph: Option<Vec<gpu_waterz::ScoredEdge>>,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let metrics = match metrics {
        Some(m) => {
            let d = PyDict::new(py);
            d.set_item("V_Rand_split", m.rand_split)?;
            d.set_item("V_Rand_merge", m.rand_merge)?;
            d.set_item("V_Info_split", m.voi_split)?;
            d.set_item("V_Info_merge", m.voi_merge)?;
            d.into_any()
        }
        None => py.None().into_bound(py),
    };
    let history = match merge_history {
        Some(h) => {
            dict_list(py, h.iter().map(|m| vec![("a", m.a), ("b", m.b), ("c", m.c)]), h.iter().map(|m| m.score))?
        }
        None => py.None().into_bound(py),
    };
    let graph = match region_graph {
        Some(g) => dict_list(py, g.iter().map(|e| vec![("u", e.u), ("v", e.v)]), g.iter().map(|e| e.score))?,
        None => py.None().into_bound(py),
    };
    let items: Vec<Bound<'py, PyAny>> =
        vec![threshold.into_pyobject(py)?.into_any(), segmentation, metrics, history, graph];
    pyo3::types::PyTuple::new(py, items)
}

/// The process's handle on CUDA device `ordinal`, opened once.
fn device(ordinal: usize) -> PyResult<&'static Gpu> {
    static DEVICES: std::sync::Mutex<Vec<(usize, &'static Gpu)>> = std::sync::Mutex::new(Vec::new());
    let mut devices = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, g)) = devices.iter().find(|(o, _)| *o == ordinal) {
        return Ok(g);
    }
    let gpu = Gpu::new(ordinal).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    // One handle per device for the life of the process, as CUDA's own
    // primary context: leaking it is what keeps `&'static` sound.
    let gpu: &'static Gpu = Box::leak(Box::new(gpu));
    devices.push((ordinal, gpu));
    Ok(gpu)
}

/// A uint64 volume in device memory, exposed to torch and cupy through
/// `__cuda_array_interface__` (version 3) without a copy; it stays alive
/// as long as any array made from it.
#[pyclass(module = "gpu_waterz._native")]
struct CudaVolume {
    buffer: DeviceBuffer<u64>,
    shape: (usize, usize, usize),
    address: u64,
    ordinal: usize,
}

#[pymethods]
impl CudaVolume {
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", self.shape)?;
        d.set_item("typestr", "<u8")?;
        d.set_item("data", (self.address, false))?;
        d.set_item("version", 3)?;
        d.set_item("strides", py.None())?;
        // The producer synchronized its stream before handing this out.
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    /// The CUDA device the volume is on.
    #[getter]
    fn device(&self) -> usize {
        self.ordinal
    }

    /// Copies the volume to a numpy uint64 array.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, numpy::PyArray3<u64>>> {
        let gpu = device(self.ordinal)?;
        let mut values =
            py.detach(|| gpu.download(&self.buffer)).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        values.truncate(self.shape.0 * self.shape.1 * self.shape.2);
        let a = ndarray::Array3::from_shape_vec(self.shape, values).map_err(value_error)?;
        Ok(a.into_pyarray(py))
    }
}

/// One agglomeration run on the GPU, advanced one threshold at a time.
#[pyclass(module = "gpu_waterz._native")]
struct GpuAgglomeration {
    run: gpu_waterz::gpu::Agglomeration<'static>,
    ordinal: usize,
    /// Return segmentations as [`CudaVolume`]s instead of numpy arrays.
    on_device: bool,
    shape: (usize, usize, usize),
}

#[pymethods]
impl GpuAgglomeration {
    /// As `CpuAgglomeration.next_threshold`; the segmentation is a
    /// `CudaVolume` when the input was on the GPU.
    fn next_threshold<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyTuple>>> {
        let run = &mut self.run;
        if !self.on_device {
            let result = py.detach(|| run.next_threshold()).map_err(to_py_err)?;
            let Some(r) = result else { return Ok(None) };
            let segmentation = r.segmentation.into_pyarray(py).into_any();
            return result_tuple(py, r.threshold, segmentation, r.metrics, r.merge_history, r.region_graph).map(Some);
        }
        let result = py
            .detach(|| -> Result<_, gpu_waterz::Error> {
                let Some(r) = run.next_threshold_device()? else { return Ok(None) };
                // Metrics need the volume on the host; only then is it copied.
                let metrics = if run.has_ground_truth() {
                    let host = run.download(&r.segmentation)?;
                    run.evaluate(&host)?
                } else {
                    None
                };
                Ok(Some((r, metrics)))
            })
            .map_err(to_py_err)?;
        let Some((r, metrics)) = result else { return Ok(None) };
        let gpu = device(self.ordinal)?;
        let address = gpu.device_address(&r.segmentation);
        let volume = CudaVolume { buffer: r.segmentation, shape: self.shape, address, ordinal: self.ordinal };
        let volume = Bound::new(py, volume)?.into_any();
        result_tuple(py, r.threshold, volume, metrics, r.merge_history, r.region_graph).map(Some)
    }
}

/// Starts a GPU agglomeration on device `ordinal`. The affinities are a
/// numpy array (`affs_f32` or `affs_u8`, uploaded once) or device memory
/// (`cuda_affs`: address, dtype 'f4' or 'u1', and `(z, y, x)`; read in
/// place, without a copy, during this call only: the caller keeps it
/// alive until this returns).
#[pyfunction]
#[pyo3(signature = (affs_f32, affs_u8, cuda_affs, ordinal, thresholds, gt, fragments, aff_threshold_low, aff_threshold_high, scoring_function, discretize_queue, merge_history, region_graph, epsilon))]
#[allow(clippy::too_many_arguments)]
fn gpu_agglomerate(
    py: Python<'_>,
    affs_f32: Option<PyReadonlyArray4<'_, f32>>,
    affs_u8: Option<PyReadonlyArray4<'_, u8>>,
    cuda_affs: Option<(u64, String, (u64, u64, u64))>,
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
) -> PyResult<GpuAgglomeration> {
    let options = options(
        &thresholds,
        fragments.is_none(),
        aff_threshold_low,
        aff_threshold_high,
        scoring_function,
        discretize_queue,
        merge_history,
        region_graph,
    )?;
    let gpu = device(ordinal)?;
    let gt = gt.map(|g| g.as_array().to_owned());
    let fragments = fragments.map(|f| f.as_array().to_owned());
    let frag_view = fragments.as_ref().map(|f| f.view());
    let (run, on_device, shape) = match (host_graph(&affs_f32, &affs_u8)?, &cuda_affs) {
        (Some(graph), _) => {
            let d = graph.dims();
            let run =
                py.detach(|| gpu_waterz::gpu::Agglomeration::from_host(gpu, &graph, frag_view, gt, &options, epsilon));
            (run, false, (d.z as usize, d.y as usize, d.x as usize))
        }
        (None, Some((address, dtype, (z, y, x)))) => {
            let dims = gpu_waterz_core::Dims3::new(*z, *y, *x);
            let run = py.detach(|| -> Result<_, gpu_waterz::Error> {
                let affs = match dtype.as_str() {
                    "f4" => DeviceAffinities::borrow_f32(gpu, *address, dims)?,
                    "u1" => DeviceAffinities::borrow_u8(gpu, *address, dims)?,
                    other => {
                        return Err(gpu_waterz::Error::Unsupported(format!(
                            "CUDA affinities must be float32 or uint8, not {other}"
                        )))
                    }
                };
                gpu_waterz::gpu::Agglomeration::new(gpu, &affs, frag_view, gt, &options, epsilon)
            });
            (run, true, (*z as usize, *y as usize, *x as usize))
        }
        (None, None) => return Err(value_error("no affinities given")),
    };
    let run = run.map_err(to_py_err)?;
    Ok(GpuAgglomeration { run, ordinal, on_device, shape })
}

/// The affinity graph of numpy affinities, float32 or uint8 (`None`
/// when neither is given).
fn host_graph<'a>(
    affs_f32: &'a Option<PyReadonlyArray4<'_, f32>>,
    affs_u8: &'a Option<PyReadonlyArray4<'_, u8>>,
) -> PyResult<Option<AffinityGraph<'a>>> {
    let graph = match (affs_f32, affs_u8) {
        (Some(a), _) => AffinityGraph::from_f32(a.as_array()),
        (None, Some(a)) => AffinityGraph::from_u8(a.as_array()),
        (None, None) => return Ok(None),
    };
    graph.map(Some).map_err(value_error)
}

#[allow(clippy::too_many_arguments)]
fn options(
    thresholds: &[f64],
    watershed: bool,
    aff_threshold_low: f64,
    aff_threshold_high: f64,
    scoring_function: &str,
    discretize_queue: u64,
    merge_history: bool,
    region_graph: bool,
) -> PyResult<Options> {
    let mut options = Options::new(thresholds).map_err(to_py_err)?;
    if watershed {
        options.watershed = check_watershed_thresholds(aff_threshold_low, aff_threshold_high).map_err(value_error)?;
    }
    options.scoring = scoring_function.parse::<ScoringFunction>().map_err(value_error)?;
    options.discretize_queue = discretize_queue;
    options.merge_history = merge_history;
    options.region_graph = region_graph;
    Ok(options)
}

/// Starts a CPU agglomeration. `affs_f32` or `affs_u8` holds the
/// `(3, z, y, x)` affinities (C order); thresholds are ascending and unique.
#[pyfunction]
#[pyo3(signature = (affs_f32, affs_u8, thresholds, gt, fragments, aff_threshold_low, aff_threshold_high, scoring_function, discretize_queue, merge_history, region_graph))]
#[allow(clippy::too_many_arguments)]
fn cpu_agglomerate(
    py: Python<'_>,
    affs_f32: Option<PyReadonlyArray4<'_, f32>>,
    affs_u8: Option<PyReadonlyArray4<'_, u8>>,
    thresholds: Vec<f64>,
    gt: Option<PyReadonlyArray3<'_, u64>>,
    fragments: Option<PyReadonlyArray3<'_, u64>>,
    aff_threshold_low: f64,
    aff_threshold_high: f64,
    scoring_function: &str,
    discretize_queue: u64,
    merge_history: bool,
    region_graph: bool,
) -> PyResult<CpuAgglomeration> {
    let options = options(
        &thresholds,
        fragments.is_none(),
        aff_threshold_low,
        aff_threshold_high,
        scoring_function,
        discretize_queue,
        merge_history,
        region_graph,
    )?;
    let gt = gt.map(|g| g.as_array().to_owned());
    let fragments = fragments.map(|f| f.as_array().to_owned());
    let graph = host_graph(&affs_f32, &affs_u8)?.ok_or_else(|| value_error("no affinities given"))?;
    let run = py
        .detach(|| Agglomeration::new(&graph, fragments.as_ref().map(|f| f.view()), gt, &options))
        .map_err(to_py_err)?;
    Ok(CpuAgglomeration { run })
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CpuAgglomeration>()?;
    m.add_class::<GpuAgglomeration>()?;
    m.add_class::<CudaVolume>()?;
    m.add_function(wrap_pyfunction!(gpu_agglomerate, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_agglomerate, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    Ok(())
}
