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
