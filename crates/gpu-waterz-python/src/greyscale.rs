//! `gpu_waterz.watershed`'s native side: the greyscale watershed of host
//! arrays (GPU or CPU) and of CUDA memory that torch or cupy owns. Images
//! arrive as `uint32` keys (`watershed.py` maps every dtype to keys that
//! keep its order).

use crate::cuda::borrow_elements;
use gpu_waterz::{Dims3, Gpu};
use gpu_waterz_watershed::greyscale::f32_key;
use gpu_waterz_watershed::greyscale::{
    cpu, gpu as on_gpu, reference, Config, GreyscaleError, GreyscaleErrorKind, Image, Schedule, Segmentation, Steps,
};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

fn grey_err(e: GreyscaleError) -> PyErr {
    match e.kind() {
        GreyscaleErrorKind::Input => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn config(connectivity: u32, watershed_line: bool, schedule: &str) -> PyResult<Config> {
    Ok(Config::new()
        .connectivity(connectivity)
        .watershed_line(watershed_line)
        .schedule(Schedule::from_name(schedule).map_err(grey_err)?))
}

fn steps_dict<'py>(py: Python<'py>, steps: Steps, n_minima: u64, ran: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("level", steps.level)?;
    d.set_item("distance", steps.distance)?;
    d.set_item("minimum", steps.minimum)?;
    d.set_item("label", steps.label)?;
    d.set_item("total", steps.total())?;
    d.set_item("n_minima", n_minima)?;
    d.set_item("backend", ran)?;
    Ok(d)
}

/// The watershed of flat host arrays of `shape` (`z, y, x`): labels as a
/// flat uint32 array and a dict of global steps per phase. `backend` is
/// `"gpu"`, `"cpu"` (the tiles on the CPU's cores) or `"reference"` (the
/// plain synchronous automaton).
#[pyfunction]
#[pyo3(signature = (keys, shape, markers, mask, connectivity, watershed_line, schedule, backend, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn grey_watershed<'py>(
    py: Python<'py>,
    keys: Bound<'py, PyAny>,
    shape: (u64, u64, u64),
    markers: Option<PyReadonlyArray1<'py, u32>>,
    mask: Option<PyReadonlyArray1<'py, u8>>,
    connectivity: u32,
    watershed_line: bool,
    schedule: &str,
    backend: &str,
    ordinal: usize,
) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyDict>)> {
    let config = config(connectivity, watershed_line, schedule)?;
    let gpu = match backend {
        "gpu" => Some(Gpu::new(ordinal).map_err(|e| PyRuntimeError::new_err(e.to_string()))?),
        "cpu" | "reference" => None,
        other => {
            return Err(PyValueError::new_err(format!("backend must be 'gpu', 'cpu' or 'reference', not {other:?}")))
        }
    };
    // float32 images are turned into keys here, on every core; other
    // dtypes arrive as uint32 keys.
    let converted: Vec<u32>;
    let keys_u32;
    let keys: &[u32] = if let Ok(f) = keys.extract::<PyReadonlyArray1<'py, f32>>() {
        let values = f.as_slice()?;
        converted = py
            .detach(|| values.par_iter().map(|&v| f32_key(v)).collect::<Option<Vec<u32>>>())
            .ok_or_else(|| PyValueError::new_err("the image holds NaN, which has no order"))?;
        &converted
    } else {
        keys_u32 = keys.extract::<PyReadonlyArray1<'py, u32>>()?;
        keys_u32.as_slice()?
    };
    let markers = markers.as_ref().map(|m| m.as_slice()).transpose()?;
    let mask = mask.as_ref().map(|m| m.as_slice()).transpose()?;
    let image = Image { keys, dims: Dims3::new(shape.0, shape.1, shape.2), markers, mask };
    let out: Segmentation = py
        .detach(|| match (&gpu, backend) {
            (Some(g), _) => on_gpu::watershed(g, &image, &config),
            (None, "reference") => reference::watershed(&image, &config),
            (None, _) => cpu::watershed(&image, &config),
        })
        .map_err(grey_err)?;
    let info = steps_dict(py, out.steps, out.n_minima, backend)?;
    // A bound on the labels, for the caller's choice of int32: minima are
    // numbered 1..=n_minima; with markers, labels are marker values.
    let max_label = match markers {
        Some(m) => py.detach(|| m.par_iter().copied().max().unwrap_or(0)) as u64,
        None => out.n_minima,
    };
    info.set_item("max_label", max_label)?;
    Ok((out.labels.into_pyarray(py), info))
}

/// The watershed of CUDA memory: `pointers` are the keys (uint32), the
/// markers (uint32, 0: none), the mask (uint8, 0: none) and the labels to
/// write (int32 or uint32), each `z * y * x` values on device `ordinal`,
/// C-contiguous, held by the caller for the whole call. Returns the dict
/// of steps (with the stage times under `"stages"`).
#[pyfunction]
#[pyo3(signature = (pointers, shape, connectivity, watershed_line, schedule, ordinal))]
pub(crate) fn grey_watershed_cuda<'py>(
    py: Python<'py>,
    pointers: [u64; 4],
    shape: (u64, u64, u64),
    connectivity: u32,
    watershed_line: bool,
    schedule: &str,
    ordinal: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let config = config(connectivity, watershed_line, schedule)?;
    let dims = Dims3::new(shape.0, shape.1, shape.2);
    let n = dims.checked_voxels().ok_or_else(|| PyValueError::new_err("the shape overflows"))? as usize;
    let gpu = Gpu::new(ordinal).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let [keys, markers, mask, labels] = pointers;
    let (steps, n_minima, stages) = py.detach(|| -> PyResult<_> {
        let keys = borrow_elements::<u32>(&gpu, keys, n)?;
        let markers = (markers != 0).then(|| borrow_elements::<u32>(&gpu, markers, n)).transpose()?;
        let mask = (mask != 0).then(|| borrow_elements::<u8>(&gpu, mask, n)).transpose()?;
        let mut labels = borrow_elements::<u32>(&gpu, labels, n)?;
        let image = on_gpu::DeviceImage { keys: &keys, dims, markers: markers.as_ref(), mask: mask.as_ref() };
        let out = on_gpu::watershed_device(&gpu, &image, &config, true).map_err(grey_err)?;
        gpu.copy_prefix(&out.labels, &mut labels, n).map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))?;
        gpu.synchronize().map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))?;
        Ok((out.steps, out.n_minima, out.stages))
    })?;
    let info = steps_dict(py, steps, n_minima, "gpu")?;
    let times = PyDict::new(py);
    for (name, seconds) in stages {
        times.set_item(name, seconds)?;
    }
    info.set_item("stages", times)?;
    Ok(info)
}
