//! `gpu_waterz.ndimage`'s native side: the grey-scale morphology operators
//! of `gpu-waterz-morphology` (the CPU path) on float64 numpy arrays.

use gpu_waterz_morphology::{Element, Grey, Mode};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
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
/// (`True`: measured) with `sampling`, its first `batch_dims` axes
/// indexing arrays of the spatial shape of the rest; `backend` is `"gpu"`
/// (spatial rank 1 to 3) or `"cpu"` (`batch_dims` 0: the Python layer
/// takes the arrays one by one). Returns float64 distances.
#[pyfunction]
#[pyo3(signature = (input, batch_dims, sampling, backend, ordinal))]
pub(crate) fn distance_transform_edt<'py>(
    py: Python<'py>,
    input: PyReadonlyArrayDyn<'py, bool>,
    batch_dims: usize,
    sampling: Option<Vec<f64>>,
    backend: &str,
    ordinal: usize,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let input = input.as_array();
    let out = match backend {
        "gpu" => {
            let gpu =
                gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
            py.detach(|| {
                gpu_waterz_morphology::gpu::distance_transform_edt_host(&gpu, input, batch_dims, sampling.as_deref())
            })
        }
        "cpu" if batch_dims == 0 => {
            py.detach(|| gpu_waterz_morphology::distance_transform_edt(input, sampling.as_deref()))
        }
        "cpu" => return Err(PyValueError::new_err("the CPU transform takes one array (batch_dims=0)")),
        other => return Err(PyValueError::new_err(format!("backend must be 'gpu' or 'cpu', not {other:?}"))),
    }
    .map_err(morphology_err)?;
    Ok(out.into_pyarray(py))
}

/// The checks of a transform on CUDA memory: the pointers' byte ranges
/// (`[mask, distances, indices]`, the last 0 for none) do not overlap, for
/// `shape` elements of `distance_bytes` bytes each and `spatial_rank`
/// indices per element. Returns the number of elements.
fn check_transform_pointers(
    pointers: [u64; 3],
    shape: &[usize],
    batch_dims: usize,
    distance_bytes: u64,
) -> PyResult<usize> {
    if batch_dims >= shape.len() {
        return Err(PyValueError::new_err(format!(
            "batch_dims={batch_dims} leaves no spatial axis of an array of rank {}",
            shape.len()
        )));
    }
    let n = shape.iter().try_fold(1usize, |a, &e| a.checked_mul(e));
    let n = n.ok_or_else(|| PyValueError::new_err(format!("the shape {shape:?} is too large")))?;
    let spatial_rank = (shape.len() - batch_dims) as u64;
    let (mask, distances) = ((pointers[0], n as u64), (pointers[1], n as u64 * distance_bytes));
    check_disjoint(distances, &[mask])?;
    if pointers[2] != 0 {
        check_disjoint((pointers[2], n as u64 * 4 * spatial_rank), &[mask, distances])?;
    }
    Ok(n)
}

/// The same on CUDA memory: `pointers` are the mask (one byte per element,
/// 0: background), the float64 distances to write and the int32 indices to
/// write (`batch + (rank,) + spatial`; 0: none), `shape` elements each on
/// device `ordinal` (the first `batch_dims` axes index arrays of spatial
/// rank 1 to 3), held by the caller for the whole call. `passes`: the
/// integer passes' way along the lines, `"auto"`, `"envelope"`,
/// `"search"` or `"split:<mean radius>"`
/// (`gpu_waterz_morphology::gpu::LinePasses`; equal results).
#[pyfunction]
#[pyo3(signature = (pointers, shape, batch_dims, sampling, ordinal, passes = "auto"))]
pub(crate) fn distance_transform_edt_cuda(
    py: Python<'_>,
    pointers: [u64; 3],
    shape: Vec<usize>,
    batch_dims: usize,
    sampling: Option<Vec<f64>>,
    ordinal: usize,
    passes: &str,
) -> PyResult<()> {
    let passes = line_passes(passes)?;
    let n = check_transform_pointers(pointers, &shape, batch_dims, 8)?;
    let gpu = gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    let spatial = &shape[batch_dims..];
    let batch = gpu_waterz_morphology::gpu::Batch { items: shape[..batch_dims].iter().product(), shape: spatial };
    py.detach(|| -> PyResult<()> {
        let mask = crate::cuda::borrow_elements::<u8>(&gpu, pointers[0], n)?;
        let mut out = crate::cuda::borrow_elements::<f64>(&gpu, pointers[1], n)?;
        let sampling = sampling.as_deref();
        let mut indices = match pointers[2] {
            0 => None,
            p => Some(crate::cuda::borrow_elements::<i32>(&gpu, p, n * spatial.len())?),
        };
        gpu_waterz_morphology::gpu::distance_transform_edt_with(
            &gpu,
            &mask,
            batch,
            sampling,
            &mut out,
            indices.as_mut(),
            passes,
        )
        .map_err(morphology_err)?;
        gpu.synchronize().map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))
    })
}

/// Float64 distances and int32 indices, as numpy arrays.
type DistancesAndIndices<'py> = (Bound<'py, PyArrayDyn<f64>>, Bound<'py, PyArrayDyn<i32>>);

/// Distances and the feature transform of a boolean host array (the first
/// `batch_dims` axes indexing arrays of spatial rank 1 to 3) on the GPU:
/// float64 distances and int32 indices (`batch + (rank,) + spatial`), as
/// [`distance_transform_indices`]'s `"edt"` of each array.
#[pyfunction]
#[pyo3(signature = (input, batch_dims, sampling, ordinal))]
pub(crate) fn distance_transform_edt_indices_gpu<'py>(
    py: Python<'py>,
    input: PyReadonlyArrayDyn<'py, bool>,
    batch_dims: usize,
    sampling: Option<Vec<f64>>,
    ordinal: usize,
) -> PyResult<DistancesAndIndices<'py>> {
    let input = input.as_array();
    let gpu = gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    let (distances, indices) = py
        .detach(|| {
            gpu_waterz_morphology::gpu::distance_transform_edt_with_indices_host(
                &gpu,
                input,
                batch_dims,
                sampling.as_deref(),
            )
        })
        .map_err(morphology_err)?;
    Ok((distances.into_pyarray(py), indices.into_pyarray(py)))
}

/// int32 distances and, when asked for, int32 indices, as numpy arrays.
type ChamferResult<'py> = (Bound<'py, PyArrayDyn<i32>>, Option<Bound<'py, PyArrayDyn<i32>>>);

/// The chamfer distance transform (`metric` taxicab or chessboard) of a
/// boolean host array on the GPU (the first `batch_dims` axes indexing
/// arrays of spatial rank 1 to 3, axes of at most 12,288 elements): int32
/// distances and, with `with_indices`, int32 indices (`batch + (rank,) +
/// spatial`), as [`distance_transform_indices`]'s `"cdt"` of each array.
#[pyfunction]
#[pyo3(signature = (input, batch_dims, metric, with_indices, ordinal))]
pub(crate) fn distance_transform_cdt_gpu<'py>(
    py: Python<'py>,
    input: PyReadonlyArrayDyn<'py, bool>,
    batch_dims: usize,
    metric: &str,
    with_indices: bool,
    ordinal: usize,
) -> PyResult<ChamferResult<'py>> {
    let metric: gpu_waterz_morphology::distance::Metric = metric.parse().map_err(morphology_err)?;
    let input = input.as_array();
    let gpu = gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    let (distances, indices) = py
        .detach(|| {
            gpu_waterz_morphology::gpu::distance_transform_cdt_host(&gpu, input, batch_dims, metric, with_indices)
        })
        .map_err(morphology_err)?;
    Ok((distances.into_pyarray(py), indices.map(|i| i.into_pyarray(py))))
}

/// The integer passes' way along the lines from its name.
fn line_passes(name: &str) -> PyResult<gpu_waterz_morphology::gpu::LinePasses> {
    use gpu_waterz_morphology::gpu::LinePasses;
    match name {
        "auto" => Ok(LinePasses::Auto),
        "envelope" => Ok(LinePasses::Envelope),
        "search" => Ok(LinePasses::Search),
        other => match other.strip_prefix("split:").map(str::parse::<u32>) {
            Some(Ok(mean_radius)) => Ok(LinePasses::Split { mean_radius }),
            _ => Err(PyValueError::new_err(format!(
                "passes must be 'auto', 'envelope', 'search' or 'split:<mean radius>', not {other:?}"
            ))),
        },
    }
}

/// Whether the GPU chamfer transform takes arrays of spatial `shape`.
#[pyfunction]
pub(crate) fn takes_chamfer(shape: Vec<usize>) -> bool {
    gpu_waterz_morphology::gpu::takes_chamfer(&shape)
}

/// [`distance_transform_cdt_gpu`] on CUDA memory: `pointers` are the mask
/// (one byte per element, 0: background), the int32 distances to write
/// and the int32 indices to write (`batch + (rank,) + spatial`; 0: none),
/// `shape` elements each on device `ordinal`, held by the caller for the
/// whole call; `passes` as for [`distance_transform_edt_cuda`].
#[pyfunction]
#[pyo3(signature = (pointers, shape, batch_dims, metric, ordinal, passes = "auto"))]
pub(crate) fn distance_transform_cdt_cuda(
    py: Python<'_>,
    pointers: [u64; 3],
    shape: Vec<usize>,
    batch_dims: usize,
    metric: &str,
    ordinal: usize,
    passes: &str,
) -> PyResult<()> {
    let passes = line_passes(passes)?;
    let metric: gpu_waterz_morphology::distance::Metric = metric.parse().map_err(morphology_err)?;
    let n = check_transform_pointers(pointers, &shape, batch_dims, 4)?;
    let gpu = gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    let spatial = &shape[batch_dims..];
    let batch = gpu_waterz_morphology::gpu::Batch { items: shape[..batch_dims].iter().product(), shape: spatial };
    py.detach(|| -> PyResult<()> {
        let mask = crate::cuda::borrow_elements::<u8>(&gpu, pointers[0], n)?;
        let mut out = crate::cuda::borrow_elements::<i32>(&gpu, pointers[1], n)?;
        let mut indices = match pointers[2] {
            0 => None,
            p => Some(crate::cuda::borrow_elements::<i32>(&gpu, p, n * spatial.len())?),
        };
        gpu_waterz_morphology::gpu::distance_transform_cdt_with(
            &gpu,
            &mask,
            batch,
            metric,
            &mut out,
            indices.as_mut(),
            passes,
        )
        .map_err(morphology_err)?;
        gpu.synchronize().map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))
    })
}

/// scipy's indices of a distance transform, as numpy returns them.
type IndexArray<'py> = Bound<'py, PyArrayDyn<i32>>;

/// Distances and the feature transform on the CPU: `kind` is `"edt"`
/// (with `sampling`), `"bf"` or `"cdt"` (with `metric`). Returns float64,
/// uint32 or int32 distances (scipy's type for each) and int32 indices
/// (`None` for `"cdt"` without `indices`: its distances alone are
/// computed).
#[pyfunction]
#[pyo3(signature = (kind, input, metric, sampling, indices = true))]
pub(crate) fn distance_transform_indices<'py>(
    py: Python<'py>,
    kind: &str,
    input: PyReadonlyArrayDyn<'py, bool>,
    metric: &str,
    sampling: Option<Vec<f64>>,
    indices: bool,
) -> PyResult<(Bound<'py, PyAny>, Option<IndexArray<'py>>)> {
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
        "edt" => distance::distance_transform_edt_with_indices(input, sampling.as_deref())
            .map(|(d, i)| (Out::F64(d), Some(i))),
        "bf" => distance::distance_transform_bf(input, metric, sampling.as_deref()).map(|(d, i)| match d {
            Distances::F64(d) => (Out::F64(d), Some(i)),
            Distances::U32(d) => (Out::U32(d), Some(i)),
        }),
        "cdt" if indices => distance::distance_transform_cdt(input, metric).map(|(d, i)| (Out::I32(d), Some(i))),
        "cdt" => distance::distance_transform_cdt_distances(input, metric).map(|d| (Out::I32(d), None)),
        other => Err(gpu_waterz_morphology::MorphologyError::Input(format!("unknown transform {other:?}"))),
    });
    let (distances, indices) = result.map_err(morphology_err)?;
    let distances: Bound<'py, PyAny> = match distances {
        Out::F64(d) => d.into_pyarray(py).into_any(),
        Out::U32(d) => d.into_pyarray(py).into_any(),
        Out::I32(d) => d.into_pyarray(py).into_any(),
    };
    Ok((distances, indices.map(|i| i.into_pyarray(py))))
}

/// The structuring element from scipy's arguments (normalised by the
/// Python layer): a structure (with its footprint), a footprint or a size.
fn element<'a>(
    size: Option<Vec<usize>>,
    footprint: Option<&'a PyReadonlyArrayDyn<'_, bool>>,
    structure: Option<&'a PyReadonlyArrayDyn<'_, f64>>,
) -> PyResult<Element<'a>> {
    Ok(match (structure, footprint, size) {
        (Some(s), f, _) => Element::Structure { structure: s.as_array(), footprint: f.map(|f| f.as_array()) },
        (None, Some(f), _) => Element::Footprint(f.as_array()),
        (None, None, Some(size)) => Element::Size(size),
        (None, None, None) => return Err(PyValueError::new_err("no footprint, structure or size provided")),
    })
}

/// The batch of a `shape` whose first `batch_dims` axes index items.
fn batch_of(shape: &[usize], batch_dims: usize) -> PyResult<(usize, Vec<usize>)> {
    if batch_dims >= shape.len() {
        return Err(PyValueError::new_err(format!(
            "batch_dims {batch_dims} leaves no spatial axis of the shape {shape:?}"
        )));
    }
    Ok((shape[..batch_dims].iter().product(), shape[batch_dims..].to_vec()))
}

fn strategy_of(strategy: &str) -> PyResult<gpu_waterz_morphology::gpu::Strategy> {
    use gpu_waterz_morphology::gpu::Strategy;
    Ok(match strategy {
        "auto" => Strategy::Auto,
        "gather" => Strategy::Gather,
        "separable" => Strategy::Separable,
        "tile" => Strategy::Tile,
        "box" => Strategy::Box,
        "warp" => Strategy::Warp,
        other => {
            return Err(PyValueError::new_err(format!(
                "strategy must be auto, gather, separable, tile, box or warp, not {other:?}"
            )))
        }
    })
}

/// Checks that the output's device range `(address, bytes)` overlaps none
/// of the inputs' (the kernels read one buffer while writing another).
fn check_disjoint(output: (u64, u64), inputs: &[(u64, u64)]) -> PyResult<()> {
    for &(address, bytes) in inputs {
        if address < output.0.saturating_add(output.1) && output.0 < address.saturating_add(bytes) {
            return Err(PyValueError::new_err("the output must not overlap the input or the mask"));
        }
    }
    Ok(())
}

fn gpu_of(ordinal: usize) -> PyResult<gpu_waterz::Gpu> {
    gpu_waterz::Gpu::new(ordinal).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

fn runtime_err(e: gpu_waterz_runtime::RuntimeError) -> PyErr {
    crate::to_py_err(gpu_waterz::Error::from(e))
}

/// The grey-scale filter of `input` on the GPU: `operation` is
/// `"erosion"` or `"dilation"`, on `items` arrays already on the device.
#[allow(clippy::too_many_arguments)]
fn grey_filter_device<T: gpu_waterz_morphology::gpu::GreyValue>(
    gpu: &gpu_waterz::Gpu,
    operation: &str,
    input: &gpu_waterz::DeviceBuffer<T>,
    output: &mut gpu_waterz::DeviceBuffer<T>,
    shape: &[usize],
    batch_dims: usize,
    element: &Element<'_>,
    mode: &str,
    cval: f64,
    origin: &[isize],
    strategy: &str,
) -> PyResult<()> {
    let dilation = match operation {
        "erosion" => false,
        "dilation" => true,
        other => return Err(PyValueError::new_err(format!("operation must be erosion or dilation, not {other:?}"))),
    };
    let mode: Mode = mode.parse().map_err(morphology_err)?;
    let (items, spatial) = batch_of(shape, batch_dims)?;
    let footprint =
        gpu_waterz_morphology::Footprint::resolve(spatial.len(), element, origin, dilation).map_err(morphology_err)?;
    let batch = gpu_waterz_morphology::gpu::Batch { items, shape: &spatial };
    gpu_waterz_morphology::gpu::grey_filter(
        gpu,
        input,
        output,
        batch,
        &footprint,
        mode,
        cval,
        dilation,
        strategy_of(strategy)?,
    )
    .map_err(morphology_err)
}

/// Grey-scale operator `operation` (`"erosion"`, `"dilation"`,
/// `"opening"`, `"closing"`, `"gradient"`, `"laplace"`, `"white_tophat"`,
/// `"black_tophat"`) of a float32, float64 or uint8 numpy array on the
/// GPU: one upload, the filters on the device, one download per filter,
/// the differences taken on the host in the array's type, on every core
/// (`grey_operator_host`; uint8 with a flat element and, in constant
/// mode, a whole `cval` from 0 to 255); a new array of its type.
#[pyfunction]
#[pyo3(signature = (operation, input, batch_dims, size, footprint, structure, mode, cval, origin, strategy, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn grey_filter_gpu<'py>(
    py: Python<'py>,
    operation: &str,
    input: &Bound<'py, PyAny>,
    batch_dims: usize,
    size: Option<Vec<usize>>,
    footprint: Option<PyReadonlyArrayDyn<'py, bool>>,
    structure: Option<PyReadonlyArrayDyn<'py, f64>>,
    mode: &str,
    cval: f64,
    origin: Vec<isize>,
    strategy: &str,
    ordinal: usize,
) -> PyResult<Bound<'py, PyAny>> {
    use gpu_waterz_morphology::gpu::{grey_operator_host, GreyOperator};
    let operator: GreyOperator = operation.parse().map_err(morphology_err)?;
    let strategy = strategy_of(strategy)?;
    let args = Grey {
        element: element(size, footprint.as_ref(), structure.as_ref())?,
        mode: mode.parse().map_err(morphology_err)?,
        cval,
        origin,
    };
    let gpu = gpu_of(ordinal)?;
    macro_rules! run {
        ($t:ty, $array:expr) => {{
            let array: PyReadonlyArrayDyn<'py, $t> = $array;
            let view = array.as_array();
            let result = py
                .detach(|| grey_operator_host(&gpu, view, batch_dims, &args, operator, strategy))
                .map_err(morphology_err)?;
            Ok(result.into_pyarray(py).into_any())
        }};
    }
    if let Ok(a) = input.extract::<PyReadonlyArrayDyn<'py, f32>>() {
        run!(f32, a)
    } else if let Ok(a) = input.extract::<PyReadonlyArrayDyn<'py, u8>>() {
        run!(u8, a)
    } else {
        run!(f64, input.extract::<PyReadonlyArrayDyn<'py, f64>>()?)
    }
}

/// The same on CUDA memory: `pointers` are the input and the output,
/// `dtype` `"f4"`, `"f8"` or `"u1"` (uint8: flat elements and a byte
/// `cval` only), `shape` elements each on device `ordinal`, held by the
/// caller for the whole call.
#[pyfunction]
#[pyo3(signature = (operation, pointers, dtype, shape, batch_dims, size, footprint, structure, mode, cval, origin, strategy, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn grey_filter_cuda<'py>(
    py: Python<'py>,
    operation: &str,
    pointers: [u64; 2],
    dtype: &str,
    shape: Vec<usize>,
    batch_dims: usize,
    size: Option<Vec<usize>>,
    footprint: Option<PyReadonlyArrayDyn<'py, bool>>,
    structure: Option<PyReadonlyArrayDyn<'py, f64>>,
    mode: &str,
    cval: f64,
    origin: Vec<isize>,
    strategy: &str,
    ordinal: usize,
) -> PyResult<()> {
    let element = element(size, footprint.as_ref(), structure.as_ref())?;
    let n: usize = shape.iter().product();
    let gpu = gpu_of(ordinal)?;
    macro_rules! run {
        ($t:ty) => {{
            // Byte ranges: the output overlaps not the input.
            let bytes = n as u64 * std::mem::size_of::<$t>() as u64;
            check_disjoint((pointers[1], bytes), &[(pointers[0], bytes)])?;
            py.detach(|| -> PyResult<()> {
                let input = crate::cuda::borrow_elements::<$t>(&gpu, pointers[0], n)?;
                let mut output = crate::cuda::borrow_elements::<$t>(&gpu, pointers[1], n)?;
                grey_filter_device(
                    &gpu,
                    operation,
                    &input,
                    &mut output,
                    &shape,
                    batch_dims,
                    &element,
                    mode,
                    cval,
                    &origin,
                    strategy,
                )?;
                gpu.synchronize().map_err(runtime_err)
            })
        }};
    }
    match dtype {
        "f4" => run!(f32),
        "f8" => run!(f64),
        "u1" => run!(u8),
        other => Err(PyValueError::new_err(format!("CUDA arrays must be float32, float64 or uint8 here, not {other}"))),
    }
}

/// The binary filter on the GPU for `items` arrays on the device.
#[allow(clippy::too_many_arguments)]
fn binary_filter_device(
    gpu: &gpu_waterz::Gpu,
    dilation: bool,
    input: &gpu_waterz::DeviceBuffer<u8>,
    output: &mut gpu_waterz::DeviceBuffer<u8>,
    mask: Option<&gpu_waterz::DeviceBuffer<u8>>,
    shape: &[usize],
    batch_dims: usize,
    structure: ndarray::ArrayViewD<'_, bool>,
    origin: &[isize],
    border: bool,
    iterations: i64,
) -> PyResult<u64> {
    use gpu_waterz_morphology::gpu::{binary_filter, Batch, Iterations};
    let (items, spatial) = batch_of(shape, batch_dims)?;
    let element = Element::Footprint(structure);
    let footprint =
        gpu_waterz_morphology::Footprint::resolve(spatial.len(), &element, origin, dilation).map_err(morphology_err)?;
    let iterations = if iterations < 1 { Iterations::UntilStable } else { Iterations::Times(iterations as u64) };
    let batch = Batch { items, shape: &spatial };
    binary_filter(gpu, input, output, mask, batch, &footprint, border, dilation, iterations).map_err(morphology_err)
}

/// `binary_erosion` (`dilation` false) or `binary_dilation` of a uint8
/// (0 or 1) numpy array on the GPU, `iterations` < 1 until stable (the
/// structure's centre must be set); returns uint8.
#[pyfunction]
#[pyo3(signature = (dilation, input, mask, batch_dims, structure, origin, border, iterations, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_filter_gpu<'py>(
    py: Python<'py>,
    dilation: bool,
    input: PyReadonlyArrayDyn<'py, u8>,
    mask: Option<PyReadonlyArrayDyn<'py, u8>>,
    batch_dims: usize,
    structure: PyReadonlyArrayDyn<'py, bool>,
    origin: Vec<isize>,
    border: bool,
    iterations: i64,
    ordinal: usize,
) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let gpu = gpu_of(ordinal)?;
    let shape = input.shape().to_vec();
    let (input_view, mask_view) = (input.as_array(), mask.as_ref().map(|m| m.as_array()));
    let structure = structure.as_array();
    let values = py.detach(|| -> PyResult<Vec<u8>> {
        let upload =
            |v: ndarray::ArrayViewD<'_, u8>| gpu.upload(v.as_standard_layout().as_slice().expect("standard layout"));
        let input = upload(input_view).map_err(runtime_err)?;
        let mask = match mask_view {
            Some(m) => Some(upload(m).map_err(runtime_err)?),
            None => None,
        };
        let mut output = gpu.uninit::<u8>(input.len()).map_err(runtime_err)?;
        binary_filter_device(
            &gpu,
            dilation,
            &input,
            &mut output,
            mask.as_ref(),
            &shape,
            batch_dims,
            structure.view(),
            &origin,
            border,
            iterations,
        )?;
        gpu.download(&output).map_err(runtime_err)
    })?;
    let out = ndarray::ArrayD::from_shape_vec(shape, values).map_err(crate::value_error)?;
    Ok(out.into_pyarray(py))
}

/// The same on CUDA memory: `pointers` are the input, the output and the
/// mask (0: none), uint8, `shape` elements each on device `ordinal`, held
/// by the caller for the whole call.
#[pyfunction]
#[pyo3(signature = (dilation, pointers, shape, batch_dims, structure, origin, border, iterations, ordinal))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary_filter_cuda<'py>(
    py: Python<'py>,
    dilation: bool,
    pointers: [u64; 3],
    shape: Vec<usize>,
    batch_dims: usize,
    structure: PyReadonlyArrayDyn<'py, bool>,
    origin: Vec<isize>,
    border: bool,
    iterations: i64,
    ordinal: usize,
) -> PyResult<u64> {
    let gpu = gpu_of(ordinal)?;
    let n: usize = shape.iter().product();
    let inputs: Vec<(u64, u64)> =
        [pointers[0], pointers[2]].into_iter().filter(|&p| p != 0).map(|p| (p, n as u64)).collect();
    check_disjoint((pointers[1], n as u64), &inputs)?;
    let structure = structure.as_array();
    py.detach(|| -> PyResult<u64> {
        let input = crate::cuda::borrow_elements::<u8>(&gpu, pointers[0], n)?;
        let mut output = crate::cuda::borrow_elements::<u8>(&gpu, pointers[1], n)?;
        let mask =
            if pointers[2] == 0 { None } else { Some(crate::cuda::borrow_elements::<u8>(&gpu, pointers[2], n)?) };
        let steps = binary_filter_device(
            &gpu,
            dilation,
            &input,
            &mut output,
            mask.as_ref(),
            &shape,
            batch_dims,
            structure.view(),
            &origin,
            border,
            iterations,
        )?;
        gpu.synchronize().map_err(runtime_err)?;
        Ok(steps)
    })
}

/// The element `binary_fill_holes` dilates with (`structure` reflected,
/// with `origin`), and whether the components path takes it on `shape`.
fn fill_holes_element(
    shape: &[usize],
    batch_dims: usize,
    structure: ndarray::ArrayViewD<'_, bool>,
    origin: &[isize],
) -> PyResult<(usize, Vec<usize>, gpu_waterz_morphology::Footprint, bool)> {
    let (items, spatial) = batch_of(shape, batch_dims)?;
    let footprint =
        gpu_waterz_morphology::Footprint::resolve(spatial.len(), &Element::Footprint(structure), origin, true)
            .map_err(morphology_err)?;
    let takes = gpu_waterz_morphology::gpu::fill_holes_by_components(&spatial, &footprint);
    Ok((items, spatial, footprint, takes))
}

/// `binary_fill_holes` of a uint8 numpy array (non-zero: true) on the GPU
/// by connected components, when `structure` and `origin` are scipy's
/// default (the cross, none) and the rank is 1 to 3; `None` otherwise (the
/// caller runs the dilation until stable).
#[pyfunction]
#[pyo3(signature = (input, batch_dims, structure, origin, ordinal))]
pub(crate) fn binary_fill_holes_gpu<'py>(
    py: Python<'py>,
    input: PyReadonlyArrayDyn<'py, u8>,
    batch_dims: usize,
    structure: PyReadonlyArrayDyn<'py, bool>,
    origin: Vec<isize>,
    ordinal: usize,
) -> PyResult<Option<Bound<'py, PyArrayDyn<u8>>>> {
    let shape = input.shape().to_vec();
    let (items, spatial, footprint, takes) = fill_holes_element(&shape, batch_dims, structure.as_array(), &origin)?;
    if !takes {
        return Ok(None);
    }
    let gpu = gpu_of(ordinal)?;
    let view = input.as_array();
    let values = py.detach(|| -> PyResult<Vec<u8>> {
        let input = gpu.upload(view.as_standard_layout().as_slice().expect("standard layout")).map_err(runtime_err)?;
        let mut output = gpu.uninit::<u8>(input.len()).map_err(runtime_err)?;
        let batch = gpu_waterz_morphology::gpu::Batch { items, shape: &spatial };
        gpu_waterz_morphology::gpu::binary_fill_holes_components(&gpu, &input, &mut output, batch, &footprint)
            .map_err(morphology_err)?;
        gpu.download(&output).map_err(runtime_err)
    })?;
    let out = ndarray::ArrayD::from_shape_vec(shape, values).map_err(crate::value_error)?;
    Ok(Some(out.into_pyarray(py)))
}

/// The same on CUDA memory: `pointers` are the input and the output (one
/// byte per element, `shape` elements each on device `ordinal`, held by the
/// caller for the whole call). Returns whether it ran (false: not scipy's
/// default structure and origin, or not rank 1 to 3; nothing written).
#[pyfunction]
#[pyo3(signature = (pointers, shape, batch_dims, structure, origin, ordinal))]
pub(crate) fn binary_fill_holes_cuda<'py>(
    py: Python<'py>,
    pointers: [u64; 2],
    shape: Vec<usize>,
    batch_dims: usize,
    structure: PyReadonlyArrayDyn<'py, bool>,
    origin: Vec<isize>,
    ordinal: usize,
) -> PyResult<bool> {
    let (items, spatial, footprint, takes) = fill_holes_element(&shape, batch_dims, structure.as_array(), &origin)?;
    if !takes {
        return Ok(false);
    }
    let gpu = gpu_of(ordinal)?;
    let n: usize = shape.iter().product();
    check_disjoint((pointers[1], n as u64), &[(pointers[0], n as u64)])?;
    py.detach(|| -> PyResult<bool> {
        let input = crate::cuda::borrow_elements::<u8>(&gpu, pointers[0], n)?;
        let mut output = crate::cuda::borrow_elements::<u8>(&gpu, pointers[1], n)?;
        let batch = gpu_waterz_morphology::gpu::Batch { items, shape: &spatial };
        gpu_waterz_morphology::gpu::binary_fill_holes_components(&gpu, &input, &mut output, batch, &footprint)
            .map_err(morphology_err)?;
        gpu.synchronize().map_err(runtime_err)?;
        Ok(true)
    })
}
