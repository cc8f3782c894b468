//! One threshold's result as the tuple `__init__.py` unpacks.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

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

/// `(threshold, segmentation, metrics, merge_history, region_graph)`, with
/// `None` for what was not asked for.
pub(crate) fn result_tuple<'py>(
    py: Python<'py>,
    threshold: f64,
    segmentation: Bound<'py, PyAny>,
    metrics: Option<gpu_waterz::Metrics>,
    merge_history: Option<Vec<gpu_waterz::Merge>>,
    region_graph: Option<Vec<gpu_waterz::ScoredEdge>>,
) -> PyResult<Bound<'py, PyTuple>> {
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
    PyTuple::new(py, items)
}
