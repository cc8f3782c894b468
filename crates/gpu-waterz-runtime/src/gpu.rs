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

    /// The most device memory the stream-ordered allocator (which every
    /// gpu-waterz buffer comes from) has held at once since the last
    /// [`Gpu::reset_peak_pool_bytes`], in bytes; `None` where the device
    /// has no memory pools.
    pub fn peak_pool_bytes(&self) -> Result<Option<u64>> {
        self.pool_attribute(false)
    }

    /// Restarts [`Gpu::peak_pool_bytes`] from the memory held now.
    pub fn reset_peak_pool_bytes(&self) -> Result<()> {
        self.pool_attribute(true).map(|_| ())
    }

    fn pool_attribute(&self, reset: bool) -> Result<Option<u64>> {
        use cudarc::driver::sys::{
            cuDeviceGetDefaultMemPool, cuMemPoolGetAttribute, cuMemPoolSetAttribute, CUmemPool_attribute, CUresult,
        };
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let mut pool = std::ptr::null_mut();
        // SAFETY: writes one pool handle to a live local; the device handle
        // is this context's.
        if unsafe { cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device()) } != CUresult::CUDA_SUCCESS {
            return Ok(None);
        }
        let mut value = 0u64;
        let attribute = CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
        // SAFETY: the attribute is a cuuint64_t, read from or written to a
        // live local; the pool handle came from the driver above.
        let result = unsafe {
            if reset {
                cuMemPoolSetAttribute(pool, attribute, (&mut value as *mut u64).cast())
            } else {
                cuMemPoolGetAttribute(pool, attribute, (&mut value as *mut u64).cast())
            }
        };
        Ok((result == CUresult::CUDA_SUCCESS).then_some(value))
    }

    /// The number of streaming multiprocessors.
    pub fn multiprocessor_count(&self) -> u32 {
        self.multiprocessors
    }

    /// Waits until all queued work has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().context(|| "synchronizing the stream".into())
    }

    /// Fails with [`RuntimeError::OutOfMemory`] unless `needed` bytes are
    /// free on the device, before anything is allocated for `what`.
    pub fn check_free_memory(&self, needed: u64, what: &str) -> Result<()> {
        let (free, total) = self.memory_info()?;
        if needed > free {
            return Err(RuntimeError::OutOfMemory { what: what.to_string(), needed, free, total });
        }
        Ok(())
    }

    /// Maps an allocation failure to [`RuntimeError::OutOfMemory`] (with the
    /// bytes asked for and free) or to a driver error with context.
    fn allocation<T>(
        &self,
        r: std::result::Result<T, cudarc::driver::DriverError>,
        bytes: usize,
        what: &str,
    ) -> Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = self.memory_info().unwrap_or((0, 0));
                Err(RuntimeError::OutOfMemory { what: what.to_string(), needed: bytes as u64, free, total })
            }
            Err(source) => Err(RuntimeError::Driver { context: format!("{what} ({bytes} bytes)"), source }),
        }
    }

    /// Copies a host slice to a new device buffer.
    pub fn upload<T: DeviceElement>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let bytes = std::mem::size_of_val(host);
        let inner = self.allocation(self.stream.clone_htod(host), bytes, "uploading a buffer")?;
        Ok(DeviceBuffer { inner })
    }

    /// Views `len` elements of type `T` at device address `ptr`, memory that
    /// something else allocated (a torch tensor, a cupy array). The driver
    /// must confirm that the whole range lies inside one allocation on this
    /// device, suitably aligned, else this fails. The returned buffer must
    /// not be dropped as an owner: [`crate::DeviceAffinities`] leaks it.
    pub(crate) fn borrow_device_memory<T: DeviceElement>(&self, ptr: u64, len: usize) -> Result<DeviceBuffer<T>> {
        use cudarc::driver::sys::{cuPointerGetAttribute, CUpointer_attribute};
        let bytes = (len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let invalid = |reason: String| RuntimeError::InvalidLaunch { kernel: "borrowed device memory", reason };
        if ptr == 0 || !ptr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(invalid(format!("the device pointer {ptr:#x} is null or misaligned")));
        }
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let (mut start, mut size, mut ordinal) = (0u64, 0u64, -1i32);
        // SAFETY: each call writes one value of the attribute's documented
        // type (a CUdeviceptr, a size_t, an int) to a live local.
        let results = unsafe {
            [
                cuPointerGetAttribute(
                    (&mut start as *mut u64).cast(),
                    CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                    ptr,
                ),
                cuPointerGetAttribute(
                    (&mut size as *mut u64).cast(),
                    CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                    ptr,
                ),
                cuPointerGetAttribute(
                    (&mut ordinal as *mut i32).cast(),
                    CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    ptr,
                ),
            ]
        };
        if let Some(bad) = results.iter().find(|r| **r != cudarc::driver::sys::CUresult::CUDA_SUCCESS) {
            return Err(invalid(format!("{ptr:#x} is not device memory the driver knows ({bad:?})")));
        }
        if ordinal as i64 != self.ctx.ordinal() as i64 {
            return Err(invalid(format!("the memory is on device {ordinal}, this is device {}", self.ctx.ordinal())));
        }
        if ptr < start || ptr.saturating_add(bytes) > start.saturating_add(size) {
            return Err(invalid(format!(
                "{bytes} bytes at {ptr:#x} overrun the allocation [{start:#x}, +{size}) that holds them"
            )));
        }
        // SAFETY: the driver confirmed that [ptr, ptr + bytes) lies inside
        // one live allocation of this device, aligned for `T`; `T` is a
        // plain number type valid for any bits. The caller never frees it.
        let inner = unsafe { self.stream.upgrade_device_ptr::<T>(ptr, len) };
        Ok(DeviceBuffer { inner })
    }

    /// The device address of `buffer`'s first element (for handing the
    /// memory to another library that reads it while `buffer` lives).
    pub fn device_address<T>(&self, buffer: &DeviceBuffer<T>) -> u64 {
        use cudarc::driver::DevicePtr;
        let (ptr, _sync) = buffer.inner.device_ptr(&self.stream);
        ptr
    }

    /// Copies `host` into `buffer` starting at element `offset`.
    pub fn upload_into<T: DeviceElement>(&self, buffer: &mut DeviceBuffer<T>, offset: usize, host: &[T]) -> Result<()> {
        let end = offset.checked_add(host.len()).filter(|&e| e <= buffer.len()).ok_or_else(|| {
            RuntimeError::InvalidLaunch {
                kernel: "upload_into",
                reason: format!("{} elements at {offset} do not fit a buffer of {}", host.len(), buffer.len()),
            }
        })?;
        let mut view = buffer.inner.slice_mut(offset..end);
        self.stream.memcpy_htod(host, &mut view).context(|| format!("uploading {} elements", host.len()))
    }

    /// A new device buffer of `len` zeroed elements.
    pub fn zeros<T: DeviceElement>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = len * std::mem::size_of::<T>();
        let inner = self.allocation(self.stream.alloc_zeros(len), bytes, "allocating a buffer")?;
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

    /// Sets every byte of `buffer` to `byte` (stream-ordered; the driver's
    /// memset, at copy bandwidth). `0xFF` makes every integer element its
    /// type's maximum.
    pub fn memset_bytes<T: DeviceElement>(&self, buffer: &mut DeviceBuffer<T>, byte: u8) -> Result<()> {
        use cudarc::driver::DevicePtrMut;
        let bytes = buffer.len() * std::mem::size_of::<T>();
        let (ptr, _record) = buffer.inner.device_ptr_mut(&self.stream);
        // SAFETY: `ptr` is a live allocation of `bytes` bytes, used on this
        // stream; every bit pattern is a valid DeviceElement (plain integers
        // and floats).
        unsafe { cudarc::driver::result::memset_d8_async(ptr, byte, bytes, self.stream.cu_stream()) }
            .context(|| format!("setting {bytes} bytes"))
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
        let r = unsafe { self.stream.alloc::<T>(len) };
        let inner = self.allocation(r, len * std::mem::size_of::<T>(), "allocating a buffer")?;
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
    impl Sealed for gpu_waterz_abi::parhac::RoundParams {}
}
impl KernelParam for gpu_waterz_abi::ReduceParams {}
impl KernelParam for gpu_waterz_abi::Dims3 {}
impl KernelParam for gpu_waterz_abi::watershed::WatershedParams {}
impl KernelParam for gpu_waterz_abi::parhac::RoundParams {}

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
