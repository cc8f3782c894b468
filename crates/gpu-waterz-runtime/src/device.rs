//! The device handle: opening a device, its properties, memory checks and
//! synchronization.

use crate::module::KernelModule;
use crate::{DriverContext, Result, RuntimeError};
use cudarc::driver::{CudaContext, CudaStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// The devices opened so far, one handle each (see [`Gpu::new`]).
static OPENED: std::sync::Mutex<Vec<(usize, Gpu)>> = std::sync::Mutex::new(Vec::new());

/// The stream-ordered pool keeps up to the device's memory divided by this
/// when freed ([`Gpu::set_pool_release_threshold`]).
pub const POOL_KEEP_DIVISOR: u64 = 4;

/// A thread recording a graph, and the stream its launches go to.
pub(crate) type Capture = (std::thread::ThreadId, Arc<CudaStream>);

/// One CUDA device with one stream and the gpu-waterz kernels.
///
/// All work is queued on the stream; downloads synchronize it. A `Gpu` is a
/// cheap handle: clones share the context, the stream and the loaded
/// kernels, so that pipelines and buffers can own one instead of borrowing.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) module: Arc<OnceLock<KernelModule>>,
    /// Streaming multiprocessors, read once: launch configurations use it.
    multiprocessors: u32,
    /// Page-locked buffers for large copies, made on first use (see
    /// `staging`); one transfer at a time holds them.
    pub(crate) staging: Arc<std::sync::Mutex<Option<crate::staging::Staging>>>,
    /// The threads recording a graph ([`Gpu::capture`]), each with the
    /// stream its launches go to meanwhile (the default stream cannot be
    /// captured).
    pub(crate) capturing: Arc<std::sync::Mutex<Vec<Capture>>>,
    /// A stream for downloads that run beside the next work
    /// ([`Gpu::download_behind`]), made on first use.
    pub(crate) copies: Arc<OnceLock<Arc<CudaStream>>>,
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
    /// A device is opened once per process: later calls return a handle to
    /// the same context, kernels and staging buffers, so that loading the
    /// kernels and allocating page-locked memory are paid once, not per
    /// pipeline.
    ///
    /// Without a driver or without that device this returns
    /// [`RuntimeError::NoDriver`] or [`RuntimeError::NoDevice`]; it never
    /// panics.
    pub fn new(ordinal: usize) -> Result<Self> {
        let mut opened = OPENED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, gpu)) = opened.iter().find(|(o, _)| *o == ordinal) {
            return Ok(gpu.clone());
        }
        let gpu = Self::open(ordinal)?;
        opened.push((ordinal, gpu.clone()));
        Ok(gpu)
    }

    /// Forgets the handles that [`Gpu::new`] keeps for reuse, so that a
    /// device's context (its memory, page-locked buffers and kernels) is
    /// destroyed when the last handle to it is dropped, not at the
    /// process's exit. A program that is done with the GPU calls this, then
    /// drops its handles, to time (and report) that teardown itself. Call
    /// it only when no handle will be used again: a later [`Gpu::new`]
    /// while one is still alive gives a second handle to the same device
    /// (correct, but with its own kernels and page-locked buffers).
    pub fn forget_opened() {
        let mut opened = OPENED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        opened.clear();
    }

    /// [`Gpu::trim_pool`] on every device [`Gpu::new`] has opened (none
    /// opened: nothing to do).
    pub fn trim_opened_pools() -> Result<()> {
        let opened: Vec<Gpu> = {
            let opened = OPENED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            opened.iter().map(|(_, gpu)| gpu.clone()).collect()
        };
        opened.iter().try_for_each(Gpu::trim_pool)
    }

    /// Opens CUDA device `ordinal` with a new handle (see [`Gpu::new`]).
    fn open(ordinal: usize) -> Result<Self> {
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
            let gpu = Self {
                ctx,
                stream,
                module: Arc::new(OnceLock::new()),
                multiprocessors,
                staging: Arc::default(),
                capturing: Arc::default(),
                copies: Arc::default(),
            };
            // Keep freed memory for the next call instead of giving it back
            // to the driver at every synchronisation (mapping it again cost
            // more than the kernels of a 512³ distance transform).
            let (_, total) = gpu.memory_info()?;
            gpu.set_pool_release_threshold(total / POOL_KEEP_DIVISOR)?;
            Ok(gpu)
        })
    }

    /// How much freed memory the stream-ordered pool keeps at most for
    /// later allocations instead of returning it to the driver when the
    /// stream synchronises (the default, set when a device is opened, is a
    /// quarter of the device's memory); `None` where the device has no
    /// memory pools. [`Gpu::trim_pool`] returns it now.
    pub fn set_pool_release_threshold(&self, bytes: u64) -> Result<Option<()>> {
        use cudarc::driver::sys::{CUmemPool_attribute, CUresult};
        let Some(pool) = self.default_pool()? else {
            return Ok(None);
        };
        let mut value = bytes;
        // SAFETY: the attribute is a cuuint64_t read from a live local; the
        // pool handle came from the driver.
        let result = unsafe {
            cudarc::driver::sys::cuMemPoolSetAttribute(
                pool,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast(),
            )
        };
        Ok((result == CUresult::CUDA_SUCCESS).then_some(()))
    }

    /// Returns the freed memory the stream-ordered pool keeps to the driver
    /// (after the queued work has finished), as `torch.cuda.empty_cache()`
    /// does for torch's.
    pub fn trim_pool(&self) -> Result<()> {
        self.synchronize()?;
        if let Some(pool) = self.default_pool()? {
            // SAFETY: the pool handle came from the driver; trimming to 0
            // releases only memory no allocation holds.
            unsafe { cudarc::driver::sys::cuMemPoolTrimTo(pool, 0) };
        }
        Ok(())
    }

    /// The device's default memory pool (the stream-ordered allocator's),
    /// with this context bound to the thread; `None` where there is none.
    fn default_pool(&self) -> Result<Option<cudarc::driver::sys::CUmemoryPool>> {
        use cudarc::driver::sys::{cuDeviceGetDefaultMemPool, CUresult};
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let mut pool = std::ptr::null_mut();
        // SAFETY: writes one pool handle to a live local; the device handle
        // is this context's.
        if unsafe { cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device()) } != CUresult::CUDA_SUCCESS {
            return Ok(None);
        }
        Ok(Some(pool))
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
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
        use cudarc::driver::sys::{cuMemPoolGetAttribute, cuMemPoolSetAttribute, CUmemPool_attribute, CUresult};
        let Some(pool) = self.default_pool()? else {
            return Ok(None);
        };
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
}
