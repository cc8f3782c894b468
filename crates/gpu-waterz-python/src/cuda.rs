//! Device memory shared with torch and cupy through
//! `__cuda_array_interface__`: affinities read in place, segmentations
//! handed out without a copy. The only module of this crate with `unsafe`:
//! the caller (the Python side) keeps the borrowed tensor alive.

use gpu_waterz::{DeviceAffinities, DeviceBuffer, Dims3, Gpu};
use numpy::IntoPyArray;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Views CUDA affinities `(3, z, y, x)` of `dtype` (`"f4"` or `"u1"`) at
/// device address `address` without a copy.
///
/// The returned value must be dropped before the call that received the
/// tensor from Python returns: `__init__.py` holds a reference to the
/// tensor for the whole call and synchronizes its stream first, and
/// [`gpu_waterz::Agglomeration::from_device`] reads the affinities only
/// while it runs.
pub(crate) fn borrow_affinities(gpu: &Gpu, address: u64, dtype: &str, dims: Dims3) -> PyResult<DeviceAffinities> {
    let borrowed = match dtype {
        // SAFETY: see above: the tensor outlives the returned view, which
        // is dropped within the Python call that passed it, and nothing
        // writes it meanwhile (its stream was synchronized first).
        "f4" => unsafe { DeviceAffinities::borrow_f32(gpu, address, dims) },
        // SAFETY: as above.
        "u1" => unsafe { DeviceAffinities::borrow_u8(gpu, address, dims) },
        other => return Err(crate::value_error(format!("CUDA affinities must be float32 or uint8, not {other}"))),
    };
    borrowed.map_err(|e| crate::to_py_err(e.into()))
}

/// Views `n` CUDA labels (int64 or uint64, taken as u64) at device address
/// `address` without a copy, under the same rule as [`borrow_affinities`]:
/// dropped before the call that received the tensor returns (the pipeline
/// reads them while it starts).
pub(crate) fn borrow_labels(gpu: &Gpu, address: u64, n: usize) -> PyResult<DeviceBuffer<u64>> {
    // SAFETY: see `borrow_affinities`; the driver checks that the range is
    // one live allocation of this device.
    unsafe { gpu.borrow_device_memory::<u64>(address, n) }.map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))
}

/// Views `n` CUDA floats at device address `address` without a copy, read
/// or written in place (the transport's inputs and the potentials it
/// writes), under [`borrow_affinities`]'s rule: the Python caller holds the
/// tensors for the whole call, which synchronizes before it returns.
pub(crate) fn borrow_floats<T: gpu_waterz_transport::gpu::DeviceFloat>(
    gpu: &Gpu,
    address: u64,
    n: usize,
) -> PyResult<DeviceBuffer<T>> {
    // SAFETY: see `borrow_affinities`; the driver checks that the range is
    // one live allocation of this device.
    unsafe { gpu.borrow_device_memory::<T>(address, n) }.map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))
}

/// Views `n` CUDA elements of `T` (the greyscale watershed's keys,
/// markers, mask and the labels it writes) at device address `address`
/// without a copy, under [`borrow_affinities`]'s rule.
pub(crate) fn borrow_elements<T: gpu_waterz_runtime::DeviceElement>(
    gpu: &Gpu,
    address: u64,
    n: usize,
) -> PyResult<DeviceBuffer<T>> {
    // SAFETY: see `borrow_affinities`; the driver checks that the range is
    // one live allocation of this device.
    unsafe { gpu.borrow_device_memory::<T>(address, n) }.map_err(|e| crate::to_py_err(gpu_waterz::Error::from(e)))
}

/// A uint64 segmentation on a CUDA device, for torch and cupy to take
/// without a copy.
#[pyclass(module = "gpu_waterz._native")]
pub(crate) struct CudaVolume {
    buffer: DeviceBuffer<u64>,
    gpu: Gpu,
    shape: (usize, usize, usize),
}

impl CudaVolume {
    pub(crate) fn new(buffer: DeviceBuffer<u64>, gpu: Gpu, shape: (usize, usize, usize)) -> Self {
        Self { buffer, gpu, shape }
    }
}

#[pymethods]
impl CudaVolume {
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", self.shape)?;
        d.set_item("typestr", "<u8")?;
        d.set_item("data", (self.buffer.device_address(), false))?;
        d.set_item("version", 3)?;
        d.set_item("strides", py.None())?;
        // The producer synchronized its stream before handing this out.
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    #[getter]
    fn device(&self) -> usize {
        self.gpu.ordinal()
    }

    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, numpy::PyArray3<u64>>> {
        let (gpu, buffer) = (&self.gpu, &self.buffer);
        let mut values = py.detach(|| gpu.download(buffer)).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        values.truncate(self.shape.0 * self.shape.1 * self.shape.2);
        let a = gpu_waterz::ndarray::Array3::from_shape_vec(self.shape, values).map_err(crate::value_error)?;
        Ok(a.into_pyarray(py))
    }
}
