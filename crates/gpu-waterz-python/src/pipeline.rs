//! `agglomerate`: the facade's pipeline, driven threshold by threshold.

use crate::cuda::{borrow_affinities, borrow_labels, CudaVolume};
use crate::results::result_tuple;
use crate::{to_py_err, value_error};
use gpu_waterz::{AffinityGraph, Backend, Config, Dims3, Gpu, LabelsView, ScoringFunction};
use numpy::{IntoPyArray, PyReadonlyArray3, PyReadonlyArray4, PyReadwriteArray3};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Mutex};

/// One threshold's result, on the host or on the device.
enum Computed {
    Host(gpu_waterz::ThresholdResult),
    Device(gpu_waterz::DeviceThresholdResult),
}

/// Where the segmentations go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    /// A new host array per threshold (`next_threshold`).
    Arrays,
    /// One host array, relabelled per threshold (`next_threshold_into`,
    /// waterz's way).
    InPlace,
    /// A new device volume per threshold (CUDA affinities came in).
    Device,
}

/// A threshold computed on a worker thread.
type Pending = std::thread::JoinHandle<gpu_waterz::Result<Option<Computed>>>;

/// A running agglomeration: `next_threshold()` gives one result tuple per
/// threshold, then `None`. On the GPU backend each call starts the next
/// threshold on a worker thread before it returns, so that the pipeline
/// works while the caller holds the current result.
#[pyclass(module = "gpu_waterz._native")]
pub(crate) struct Agglomeration {
    run: Arc<Mutex<gpu_waterz::Agglomeration>>,
    /// The next threshold, being computed.
    pending: Option<Pending>,
    /// Thresholds not yet started.
    remaining: usize,
    /// Where the segmentations go.
    output: Output,
    shape: (usize, usize, usize),
}

impl Agglomeration {
    fn new(run: gpu_waterz::Agglomeration, thresholds: usize, output: Output, shape: (usize, usize, usize)) -> Self {
        Self { run: Arc::new(Mutex::new(run)), pending: None, remaining: thresholds, output, shape }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, gpu_waterz::Agglomeration> {
        self.run.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The threshold being computed (started now if none is), waited for;
    /// `None` after the last.
    fn join(&mut self, py: Python<'_>) -> PyResult<Option<Computed>> {
        if self.pending.is_none() {
            self.start_next();
        }
        let Some(pending) = self.pending.take() else { return Ok(None) };
        py.detach(|| pending.join())
            .map_err(|_| {
                pyo3::exceptions::PyRuntimeError::new_err("gpu_waterz: the pipeline's worker thread panicked")
            })?
            .map_err(to_py_err)
    }

    /// Starts the next threshold on a worker thread, if one is left.
    fn start_next(&mut self) {
        if self.remaining == 0 {
            return;
        }
        self.remaining -= 1;
        let run = Arc::clone(&self.run);
        // Relabelling in place reads the device result into the caller's
        // array when asked for it, not ahead.
        let on_device = self.output != Output::Arrays;
        self.pending = Some(std::thread::spawn(move || {
            let mut run = run.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if on_device {
                Ok(run.next_threshold_device()?.map(Computed::Device))
            } else {
                Ok(run.next_threshold()?.map(Computed::Host))
            }
        }));
    }
}

#[pymethods]
impl Agglomeration {
    /// The backend that runs: `"cpu"` or `"gpu"`.
    #[getter]
    fn backend(&self, py: Python<'_>) -> String {
        py.detach(|| self.lock().backend().to_string())
    }

    /// What the input made this run do differently from stock waterz (see
    /// `gpu_waterz::Agglomeration::warnings`).
    #[getter]
    fn warnings(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.lock().warnings().to_vec())
    }

    /// Seconds spent so far per stage (upload, watershed, region graph,
    /// merging, extraction, download, evaluation), as a dict; a threshold
    /// being computed ahead is waited for.
    #[getter]
    fn timings(&self, py: Python<'_>) -> std::collections::HashMap<&'static str, f64> {
        let t = py.detach(|| self.lock().timings().clone());
        std::collections::HashMap::from([
            ("upload", t.upload_s),
            ("watershed", t.watershed_s),
            ("region_graph", t.region_graph_s),
            ("merging", t.merging_s),
            ("extraction", t.extraction_s),
            ("download", t.download_s),
            ("evaluation", t.evaluation_s),
        ])
    }

    /// Merges up to the next threshold and writes its segmentation into
    /// `segmentation` (waterz's way, see
    /// `gpu_waterz::Agglomeration::next_threshold_in_place`); the result
    /// tuple's segmentation is `None`.
    fn next_threshold_into<'py>(
        &mut self,
        py: Python<'py>,
        mut segmentation: PyReadwriteArray3<'py, u64>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        if self.output != Output::InPlace {
            return Err(value_error("this run was not started to relabel in place"));
        }
        let volume = segmentation.as_array_mut();
        let result = if self.lock().backend() == gpu_waterz::BackendKind::Gpu {
            let Some(computed) = self.join(py)? else { return Ok(None) };
            let Computed::Device(r) = computed else { unreachable!("in-place runs compute on the device") };
            py.detach(|| self.lock().download_into(&r.segmentation, volume)).map_err(to_py_err)?;
            // The next threshold is computed while the caller holds this one.
            self.start_next();
            gpu_waterz::InPlaceResult::from(r)
        } else {
            match py.detach(|| self.lock().next_threshold_in_place(volume)).map_err(to_py_err)? {
                Some(r) => r,
                None => return Ok(None),
            }
        };
        let none = py.None().into_bound(py);
        result_tuple(py, result.threshold, none, result.metrics, result.merge_history, result.region_graph).map(Some)
    }

    fn next_threshold<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        if self.output == Output::InPlace {
            return Err(value_error("this run relabels in place: call next_threshold_into"));
        }
        let Some(computed) = self.join(py)? else { return Ok(None) };
        // On the GPU the caller holds this result while the next one is
        // computed; the CPU backend computes lazily, as waterz does (a
        // thread ahead would compete with the caller for the cores and
        // hold one more segmentation).
        if self.lock().backend() == gpu_waterz::BackendKind::Gpu {
            self.start_next();
        }
        match computed {
            Computed::Host(r) => {
                let segmentation = r.segmentation.into_pyarray(py).into_any();
                result_tuple(py, r.threshold, segmentation, r.metrics, r.merge_history, r.region_graph).map(Some)
            }
            Computed::Device(r) => {
                let gpu = py.detach(|| self.lock().gpu().cloned()).expect("device results come from the GPU backend");
                let volume = Bound::new(py, CudaVolume::new(r.segmentation, gpu, self.shape))?.into_any();
                result_tuple(py, r.threshold, volume, r.metrics, r.merge_history, r.region_graph).map(Some)
            }
        }
    }
}

/// Host ground truth as the Python layer passes it: uint64, or uint32 (read
/// as it is, widened once by the pipeline's copy instead of twice).
#[derive(FromPyObject)]
pub(crate) enum GroundTruth<'py> {
    /// uint64 labels.
    U64(PyReadonlyArray3<'py, u64>),
    /// uint32 labels.
    U32(PyReadonlyArray3<'py, u32>),
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
#[pyo3(signature = (affs_f32, affs_u8, cuda_affs, backend_name, ordinal, thresholds, gt, fragments, aff_threshold_low, aff_threshold_high, scoring_function, discretize_queue, merge_history, region_graph, epsilon, cuda_gt=None, in_place=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn agglomerate(
    py: Python<'_>,
    affs_f32: Option<PyReadonlyArray4<'_, f32>>,
    affs_u8: Option<PyReadonlyArray4<'_, u8>>,
    cuda_affs: Option<(u64, String, (u64, u64, u64))>,
    backend_name: &str,
    ordinal: usize,
    thresholds: Vec<f64>,
    gt: Option<GroundTruth<'_>>,
    fragments: Option<PyReadonlyArray3<'_, u64>>,
    aff_threshold_low: f64,
    aff_threshold_high: f64,
    scoring_function: &str,
    discretize_queue: u64,
    merge_history: bool,
    region_graph: bool,
    epsilon: f64,
    cuda_gt: Option<u64>,
    in_place: bool,
) -> PyResult<Agglomeration> {
    let mut config = Config::new(&thresholds)
        .watershed_thresholds(aff_threshold_low, aff_threshold_high)
        .scoring(scoring_function.parse::<ScoringFunction>().map_err(value_error)?)
        .discretize_queue(discretize_queue)
        .merge_history(merge_history)
        .region_graph(region_graph)
        .epsilon(epsilon);
    // The pipeline owns its volumes: copied once, on all threads.
    let owned = |view: gpu_waterz::ndarray::ArrayView3<'_, u64>| {
        py.detach(|| gpu_waterz::ndarray::Zip::from(view).par_map_collect(|&l| l))
    };
    // Host ground truth: host affinities' pipelines borrow it (the CPU
    // backend reads it while starting and never copies it; the GPU backend
    // copies it once to upload); CUDA affinities' pipelines take a uint64
    // copy in the configuration.
    let gt_view = gt.as_ref().map(|g| match g {
        GroundTruth::U64(a) => LabelsView::U64(a.as_array()),
        GroundTruth::U32(a) => LabelsView::U32(a.as_array()),
    });
    if let (Some(g), Some(_)) = (gt_view, &cuda_affs) {
        config = config.ground_truth(py.detach(|| g.to_owned_u64()));
    }
    // Host affinities read host fragments in place (the pipeline needs them
    // only while it starts); CUDA affinities take a copy in the configuration.
    if let (Some(f), Some(_)) = (&fragments, &cuda_affs) {
        config = config.fragments(owned(f.as_array()));
    }
    let fragments = if cuda_affs.is_none() { fragments } else { None };
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
                let gt = match cuda_gt {
                    Some(address) => Some(borrow_labels(&gpu, address, (z * y * x) as usize)?),
                    None => None,
                };
                gpu_waterz::Agglomeration::from_device_with_ground_truth(&affs, gt.as_ref(), &gpu, config)
                    .map_err(to_py_err)
            })?;
            Ok(Agglomeration::new(run, thresholds.len(), Output::Device, (z as usize, y as usize, x as usize)))
        }
        (f32s, u8s, None) => {
            let graph = match (f32s, u8s) {
                (Some(a), _) => AffinityGraph::from_f32(a.as_array()),
                (None, Some(a)) => AffinityGraph::from_u8(a.as_array()),
                (None, None) => return Err(value_error("no affinities given")),
            }
            .map_err(value_error)?;
            let config = config.backend(backend(backend_name, ordinal)?);
            let fragments = fragments.as_ref().map(|f| f.as_array());
            let run = py
                .detach(|| gpu_waterz::Agglomeration::with_inputs(&graph, fragments, gt_view, config))
                .map_err(to_py_err)?;
            let d = graph.dims();
            let output = if in_place { Output::InPlace } else { Output::Arrays };
            Ok(Agglomeration::new(run, thresholds.len(), output, (d.z as usize, d.y as usize, d.x as usize)))
        }
        _ => Err(value_error("give host affinities or CUDA affinities, not both")),
    }
}
