//! `gpu_waterz.ndimage`'s native side: the grey-scale morphology operators
//! of `gpu-waterz-morphology` (the CPU path) on float64 numpy arrays.

use gpu_waterz_morphology::{Element, Grey, Mode};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Applies grey-scale operator `operation` (`"erosion"`, `"dilation"`,
/// `"opening"`, `"closing"`, `"gradient"`, `"laplace"`, `"white_tophat"`,
/// `"black_tophat"`) to `input` with scipy's arguments, already normalised
/// by the Python layer (one `size` or `origin` value per axis).
#[pyfunction]
#[pyo3(signature = (operation, input, size, footprint, structure, mode, cval, origin))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn grey_morphology<'py>(
    py: Python<'py>,
    operation: &str,
    input: PyReadonlyArrayDyn<'py, f64>,
    size: Option<Vec<usize>>,
    footprint: Option<PyReadonlyArrayDyn<'py, bool>>,
    structure: Option<PyReadonlyArrayDyn<'py, f64>>,
    mode: &str,
    cval: f64,
    origin: Vec<isize>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let mode: Mode =
        mode.parse().map_err(|e: gpu_waterz_morphology::MorphologyError| PyValueError::new_err(e.to_string()))?;
    let element = match (&structure, &footprint, size) {
        (Some(s), f, _) => Element::Structure { structure: s.as_array(), footprint: f.as_ref().map(|f| f.as_array()) },
        (None, Some(f), _) => Element::Footprint(f.as_array()),
        (None, None, Some(size)) => Element::Size(size),
        (None, None, None) => return Err(PyValueError::new_err("no footprint, structure or size provided")),
    };
    let args = Grey { element, mode, cval, origin };
    let input = input.as_array();
    let op = match operation {
        "erosion" => gpu_waterz_morphology::grey_erosion,
        "dilation" => gpu_waterz_morphology::grey_dilation,
        "opening" => gpu_waterz_morphology::grey_opening,
        "closing" => gpu_waterz_morphology::grey_closing,
        "gradient" => gpu_waterz_morphology::morphological_gradient,
        "laplace" => gpu_waterz_morphology::morphological_laplace,
        "white_tophat" => gpu_waterz_morphology::white_tophat,
        "black_tophat" => gpu_waterz_morphology::black_tophat,
        other => return Err(PyValueError::new_err(format!("unknown operation {other:?}"))),
    };
    let out = py.detach(|| op(input, &args)).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(out.into_pyarray(py))
}

fn morphology_err(e: gpu_waterz_morphology::MorphologyError) -> PyErr {
    match e.kind() {
        gpu_waterz_morphology::MorphologyErrorKind::Input => PyValueError::new_err(e.to_string()),
        _ => pyo3::exceptions::PyRuntimeError::new_err(e.to_string()),
    }
}

/// The exact Euclidean distance transform of a boolean host array
/// (`True`: measured) with `sampling`; `backend` is `"gpu"` (rank 1 to 3)
/// or `"cpu"`. Returns float64 distances.
#[pyfunction]
#[pyo3(signature = (input, sampling, backend, ordinal))]
pub(crate) fn distance_transform_edt<'py>(
    py: Python<'py>,
    input: PyReadonlyArrayDyn<'py, bool>,
    sampling: Option<Vec<f64>>,
    backend: &str,
    ordinal: usize,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let input = input.as_array();
    let out = match backend {
        "gpu" => {
            let gpu =
                gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
            py.detach(|| gpu_waterz_morphology::gpu::distance_transform_edt_host(&gpu, input, sampling.as_deref()))
        }
        "cpu" => py.detach(|| gpu_waterz_morphology::distance_transform_edt(input, sampling.as_deref())),
        other => return Err(PyValueError::new_err(format!("backend must be 'gpu' or 'cpu', not {other:?}"))),
    }
    .map_err(morphology_err)?;
    Ok(out.into_pyarray(py))
}

/// The same on CUDA memory: `pointers` are the mask (uint8, 0: background)
/// and the float64 distances to write, `shape` (rank 1 to 3) elements each
/// on device `ordinal`, held by the caller for the whole call.
#[pyfunction]
#[pyo3(signature = (pointers, shape, sampling, ordinal))]
pub(crate) fn distance_transform_edt_cuda(
    py: Python<'_>,
    pointers: [u64; 2],
    shape: Vec<usize>,
    sampling: Option<Vec<f64>>,
    ordinal: usize,
) -> PyResult<()> {
    let n: usize = shape.iter().product();
    let gpu = gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    py.detach(|| -> PyResult<()> {
        let mask = crate::cuda::borrow_elements::<u8>(&gpu, pointers[0], n)?;
        let mut out = crate::cuda::borrow_elements::<f64>(&gpu, pointers[1], n)?;
        gpu_waterz_morphology::gpu::distance_transform_edt(&gpu, &mask, &shape, sampling.as_deref(), &mut out)
            .map_err(morphology_err)?;
        gpu.synchronize().map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))
    })
}

/// Distances and the feature transform on the CPU: `kind` is `"edt"`
/// (with `sampling`), `"bf"` or `"cdt"` (with `metric`). Returns float64,
/// uint32 or int32 distances (scipy's type for each) and int32 indices.
#[pyfunction]
#[pyo3(signature = (kind, input, metric, sampling))]
pub(crate) fn distance_transform_indices<'py>(
    py: Python<'py>,
    kind: &str,
    input: PyReadonlyArrayDyn<'py, bool>,
    metric: &str,
    sampling: Option<Vec<f64>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArrayDyn<i32>>)> {
    use gpu_waterz_morphology::distance::{self, Distances, Metric};
    /// The distances in scipy's type for each transform.
    enum Out {
        F64(ndarray::ArrayD<f64>),
        U32(ndarray::ArrayD<u32>),
        I32(ndarray::ArrayD<i32>),
    }
    let input = input.as_array();
    let metric: Metric = metric.parse().map_err(morphology_err)?;
    let result = py.detach(|| match kind {
        "edt" => {
            distance::distance_transform_edt_with_indices(input, sampling.as_deref()).map(|(d, i)| (Out::F64(d), i))
        }
        "bf" => distance::distance_transform_bf(input, metric, sampling.as_deref()).map(|(d, i)| match d {
            Distances::F64(d) => (Out::F64(d), i),
            Distances::U32(d) => (Out::U32(d), i),
        }),
        "cdt" => distance::distance_transform_cdt(input, metric).map(|(d, i)| (Out::I32(d), i)),
        other => Err(gpu_waterz_morphology::MorphologyError::Input(format!("unknown transform {other:?}"))),
    });
    let (distances, indices) = result.map_err(morphology_err)?;
    let distances: Bound<'py, PyAny> = match distances {
        Out::F64(d) => d.into_pyarray(py).into_any(),
        Out::U32(d) => d.into_pyarray(py).into_any(),
        Out::I32(d) => d.into_pyarray(py).into_any(),
    };
    Ok((distances, indices.into_pyarray(py)))
}
