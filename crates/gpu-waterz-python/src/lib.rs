//! The native half of the Python package `gpu_waterz`: the CPU reference
//! agglomeration as an iterator of per-threshold results, and the metrics.
//! `python/gpu_waterz/__init__.py` turns these into waterz's generator.

use gpu_waterz::cpu::{Agglomeration, Options};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{AffinityGraph, ScoringFunction};
use numpy::{IntoPyArray, PyReadonlyArray3, PyReadonlyArray4};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn to_py_err(e: gpu_waterz::Error) -> PyErr {
    match e {
        gpu_waterz::Error::Runtime(e) => PyRuntimeError::new_err(e.to_string()),
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
        let segmentation = r.segmentation.into_pyarray(py);
        let metrics = match r.metrics {
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
        let history = match r.merge_history {
            Some(h) => {
                dict_list(py, h.iter().map(|m| vec![("a", m.a), ("b", m.b), ("c", m.c)]), h.iter().map(|m| m.score))?
            }
            None => py.None().into_bound(py),
        };
        let graph = match r.region_graph {
            Some(g) => dict_list(py, g.iter().map(|e| vec![("u", e.u), ("v", e.v)]), g.iter().map(|e| e.score))?,
            None => py.None().into_bound(py),
        };
        let items: Vec<Bound<'py, PyAny>> =
            vec![r.threshold.into_pyobject(py)?.into_any(), segmentation.into_any(), metrics, history, graph];
        Ok(Some(pyo3::types::PyTuple::new(py, items)?))
    }
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
    let mut options = Options::new(&thresholds).map_err(to_py_err)?;
    if fragments.is_none() {
        options.watershed = check_watershed_thresholds(aff_threshold_low, aff_threshold_high).map_err(value_error)?;
    }
    options.scoring = scoring_function.parse::<ScoringFunction>().map_err(value_error)?;
    options.discretize_queue = discretize_queue;
    options.merge_history = merge_history;
    options.region_graph = region_graph;
    let gt = gt.map(|g| g.as_array().to_owned());
    let fragments = fragments.map(|f| f.as_array().to_owned());
    let run = match (&affs_f32, &affs_u8) {
        (Some(a), _) => {
            let view = a.as_array();
            let graph = AffinityGraph::from_f32(view).map_err(value_error)?;
            py.detach(|| Agglomeration::new(&graph, fragments.as_ref().map(|f| f.view()), gt, &options))
        }
        (None, Some(a)) => {
            let view = a.as_array();
            let graph = AffinityGraph::from_u8(view).map_err(value_error)?;
            py.detach(|| Agglomeration::new(&graph, fragments.as_ref().map(|f| f.view()), gt, &options))
        }
        (None, None) => return Err(value_error("no affinities given")),
    }
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
    m.add_function(wrap_pyfunction!(cpu_agglomerate, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    Ok(())
}
