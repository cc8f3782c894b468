//! The device handle, typed buffers and the kernel module cache.

use crate::{DriverContext, Result, RuntimeError, KERNELS_PTX, PTX_OVERRIDE_ENV};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

/// One CUDA device with one stream and the loaded gpu-waterz kernels.
///
/// All work is queued on the stream; downloads synchronize it.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: OnceLock<Arc<CudaModule>>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
    /// Streaming multiprocessors, read once: launch configurations use it.
    multiprocessors: u32,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("ordinal", &self.ctx.ordinal()).finish_non_exhaustive()
    }
}

/// Runs a cudarc call that may panic (it does when a driver symbol is
/// missing), turning the panic into an error.
fn no_panic<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(RuntimeError::NoDriver { detail: format!("{what}: {msg}") })
        }
    }
}

impl Gpu {
    /// Opens CUDA device `ordinal`.
    ///
    /// Without a driver or without that device this returns
    /// [`RuntimeError::NoDriver`] or [`RuntimeError::NoDevice`]; it never
    /// panics.
    pub fn new(ordinal: usize) -> Result<Self> {
        // SAFETY: `is_culib_present` only tries to dlopen the driver library
        // and drops the handle; it has no other effect.
        let present = unsafe { cudarc::driver::sys::is_culib_present() };
        if !present {
            return Err(RuntimeError::NoDriver {
                detail: "libcuda.so / libcuda.so.1 not found by the dynamic loader".into(),
            });
        }
        no_panic("initializing the CUDA driver", || {
            let count = match CudaContext::device_count() {
                Ok(n) => n.max(0) as usize,
                Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
                Err(source) => return Err(RuntimeError::Driver { context: "counting CUDA devices".into(), source }),
            };
            if ordinal >= count {
                return Err(RuntimeError::NoDevice { ordinal, count });
            }
            let ctx = CudaContext::new(ordinal).context(|| format!("creating a context on device {ordinal}"))?;
            // SAFETY: gpu-waterz queues all work on one stream, so cudarc's
            // per-buffer event tracking (for multi-stream use) is not needed.
            unsafe { ctx.disable_event_tracking() };
            let stream = ctx.default_stream();
            tracing::debug!(ordinal, "opened CUDA device");
            let multiprocessors = ctx
                .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .context(|| "reading the multiprocessor count".into())?
                .max(1) as u32;
            Ok(Self { ctx, stream, module: OnceLock::new(), functions: Mutex::new(HashMap::new()), multiprocessors })
        })
    }

    /// The device's name, e.g. `NVIDIA H200`.
    pub fn name(&self) -> Result<String> {
        self.ctx.name().context(|| "reading the device name".into())
    }

    /// The device's compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        self.ctx.compute_capability().context(|| "reading the compute capability".into())
    }

    /// Free and total device memory, in bytes.
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        let (free, total) = self.ctx.mem_get_info().context(|| "reading the memory info".into())?;
        Ok((free as u64, total as u64))
    }

    /// The number of streaming multiprocessors.
    pub fn multiprocessor_count(&self) -> u32 {
        self.multiprocessors
    }

    /// Waits until all queued work has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().context(|| "synchronizing the stream".into())
    }

    /// Copies a host slice to a new device buffer.
    pub fn upload<T: DeviceElement>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let inner = self.stream.clone_htod(host).context(|| format!("uploading {} elements", host.len()))?;
        Ok(DeviceBuffer { inner })
    }

    /// A new device buffer of `len` zeroed elements.
    pub fn zeros<T: DeviceElement>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let inner = self.stream.alloc_zeros(len).context(|| format!("allocating {len} elements"))?;
        Ok(DeviceBuffer { inner })
    }

    /// Element `index` of a device buffer (synchronizes).
    pub fn download_element<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>, index: usize) -> Result<T> {
        let view = buffer.inner.try_slice(index..index + 1).ok_or_else(|| RuntimeError::InvalidLaunch {
            kernel: "download",
            reason: format!("index {index} is outside a buffer of {} elements", buffer.len()),
        })?;
        Ok(self.stream.clone_dtoh(&view).context(|| format!("downloading element {index}"))?[0])
    }

    /// A device-side copy of a buffer.
    pub fn duplicate<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>) -> Result<DeviceBuffer<T>> {
        let inner = self.stream.clone_dtod(&buffer.inner).context(|| format!("copying {} elements", buffer.len()))?;
        Ok(DeviceBuffer { inner })
    }

    /// Sets every element of `buffer` to zero.
    pub fn memset_zero<T: DeviceElement>(&self, buffer: &mut DeviceBuffer<T>) -> Result<()> {
        self.stream.memset_zeros(&mut buffer.inner).context(|| "zeroing a buffer".into())
    }

    /// Copies a device buffer to a new host vector (synchronizes).
    pub fn download<T: DeviceElement>(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
        self.stream.clone_dtoh(&buffer.inner).context(|| format!("downloading {} elements", buffer.len()))
    }

    /// A new device buffer of `len` elements whose contents are unspecified
    /// (every kernel that receives one writes it before reading).
    pub(crate) fn uninit<T: DeviceElement>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        // SAFETY: the buffer is only handed to kernels that write every
        // element they later read, or downloaded after such a kernel.
        let inner = unsafe { self.stream.alloc::<T>(len) }.context(|| format!("allocating {len} elements"))?;
        Ok(DeviceBuffer { inner })
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The kernel `name` of the embedded module, loaded once and cached.
    pub(crate) fn function(&self, name: &'static str) -> Result<CudaFunction> {
        let mut cache = self.functions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(f) = cache.get(name) {
            return Ok(f.clone());
        }
        let module = match self.module.get() {
            Some(m) => m.clone(),
            None => {
                let ptx = match std::env::var(PTX_OVERRIDE_ENV) {
                    Ok(path) => std::fs::read_to_string(&path).map_err(|source| RuntimeError::PtxOverride {
                        path,
                        env: PTX_OVERRIDE_ENV,
                        source,
                    })?,
                    Err(_) => KERNELS_PTX.to_string(),
                };
                let m = self
                    .ctx
                    .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                    .context(|| "loading the gpu-waterz PTX module".into())?;
                let _ = self.module.set(m.clone());
                m
            }
        };
        let f = module.load_function(name).context(|| format!("looking up kernel {name}"))?;
        cache.insert(name, f.clone());
        Ok(f)
    }
}

/// Element types that device buffers hold.
pub trait DeviceElement: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + 'static {}
impl DeviceElement for u8 {}
impl DeviceElement for u32 {}
impl DeviceElement for u64 {}
impl DeviceElement for i32 {}
impl DeviceElement for i64 {}
impl DeviceElement for f32 {}
impl DeviceElement for f64 {}

/// A typed buffer in device memory, owned; freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer<T> {
    pub(crate) inner: CudaSlice<T>,
}

impl<T> DeviceBuffer<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// The size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.inner.num_bytes()
    }
}

/// A `#[repr(C)]` struct from `gpu-waterz-abi`, passed to a kernel by value.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct Param<T: KernelParam>(pub T);

/// The `gpu-waterz-abi` structs that kernels take by value.
pub trait KernelParam: Copy + private::Sealed {}
mod private {
    pub trait Sealed {}
    impl Sealed for gpu_waterz_abi::ReduceParams {}
    impl Sealed for gpu_waterz_abi::Dims3 {}
    impl Sealed for gpu_waterz_abi::watershed::WatershedParams {}
}
impl KernelParam for gpu_waterz_abi::ReduceParams {}
impl KernelParam for gpu_waterz_abi::Dims3 {}
impl KernelParam for gpu_waterz_abi::watershed::WatershedParams {}

// SAFETY: `Param` is `repr(transparent)` over a sealed set of `#[repr(C)]`,
// `Copy` structs of plain integers and floats, defined once in
// `gpu-waterz-abi` and compiled identically into the kernels.
unsafe impl<T: KernelParam> DeviceRepr for Param<T> {}

/// Per-stage wall times of device work, for profiling: when enabled, each
/// [`StageTimer::mark`] synchronizes the stream and records the time since
/// the previous mark; when disabled it does nothing (and adds no sync).
#[derive(Debug)]
pub struct StageTimer<'a> {
    gpu: &'a Gpu,
    enabled: bool,
    last: std::time::Instant,
    stages: Vec<(&'static str, f64)>,
    max_used_bytes: u64,
}

impl<'a> StageTimer<'a> {
    /// A timer that records only when `enabled`.
    pub fn new(gpu: &'a Gpu, enabled: bool) -> Result<Self> {
        if enabled {
            gpu.synchronize()?;
        }
        Ok(Self { gpu, enabled, last: std::time::Instant::now(), stages: Vec::new(), max_used_bytes: 0 })
    }

    /// Ends stage `name`.
    pub fn mark(&mut self, name: &'static str) -> Result<()> {
        if self.enabled {
            self.gpu.synchronize()?;
            let now = std::time::Instant::now();
            self.stages.push((name, (now - self.last).as_secs_f64() * 1e3));
            let (free, total) = self.gpu.memory_info()?;
            self.max_used_bytes = self.max_used_bytes.max(total - free);
            self.last = std::time::Instant::now();
        }
        Ok(())
    }

    /// The most device memory in use (all processes) seen at a mark.
    pub fn max_used_bytes(&self) -> u64 {
        self.max_used_bytes
    }

    /// The recorded stages and their milliseconds.
    pub fn stages(&self) -> &[(&'static str, f64)] {
        &self.stages
    }
}
