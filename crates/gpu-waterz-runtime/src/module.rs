//! The embedded PTX module and its kernels, loaded once per device.

use crate::device::Gpu;
use crate::{DriverContext, Result, RuntimeError, KERNELS_CUBINS, KERNELS_PTX, KERNELS_PTX_SM80, PTX_OVERRIDE_ENV};
use cudarc::driver::{CudaFunction, CudaModule};
use gpu_waterz_abi::Kernel;
use std::sync::Arc;

/// The loaded module and one function per [`Kernel`], indexed by
/// [`Kernel::index`].
pub(crate) struct KernelModule {
    _module: Arc<CudaModule>,
    functions: Vec<CudaFunction>,
    /// Whether the module is the cubin assembled from the sm_90a PTX,
    /// whose kernels include Hopper's warpgroup products.
    sm90a: bool,
}

/// The compute capability whose embedded cubin comes from the sm_90a PTX.
const SM90A_CAPABILITY: u32 = 90;

impl Gpu {
    /// Loads the kernels once per device and looks up every one; a kernel
    /// missing from the module is an error here, not at its launch. The
    /// module is the file named by [`PTX_OVERRIDE_ENV`] when it is set, else
    /// the embedded cubin of the device's architecture ([`KERNELS_CUBINS`])
    /// when there is one and the driver takes it, else the embedded PTX.
    pub(crate) fn kernels(&self) -> Result<&KernelModule> {
        if let Some(loaded) = self.module.get() {
            return Ok(loaded);
        }
        let mut sm90a = false;
        let module = match std::env::var(PTX_OVERRIDE_ENV) {
            Ok(path) => {
                let ptx = std::fs::read_to_string(&path).map_err(|source| RuntimeError::PtxOverride {
                    path,
                    env: PTX_OVERRIDE_ENV,
                    source,
                })?;
                self.load_ptx(ptx)?
            }
            Err(_) => match self.load_cubin() {
                Some(module) => {
                    sm90a = self.capability_number() == Some(SM90A_CAPABILITY);
                    module
                }
                None if self.capability_number().is_some_and(|c| c < 90) => {
                    self.load_ptx(KERNELS_PTX_SM80.to_string())?
                }
                None => self.load_ptx(KERNELS_PTX.to_string())?,
            },
        };
        let functions = Kernel::ALL
            .iter()
            .map(|k| module.load_function(k.name()).context(|| format!("looking up kernel {}", k.name())))
            .collect::<Result<Vec<_>>>()?;
        // Another thread may have loaded it meanwhile; either copy is fine.
        let _ = self.module.set(KernelModule { _module: module, functions, sm90a });
        Ok(self.module.get().expect("set just above"))
    }

    /// The embedded cubin of this device's architecture, loaded; `None`
    /// when there is none or the driver refuses it (the PTX is the
    /// fallback, so a refusal is logged, not returned).
    fn load_cubin(&self) -> Option<Arc<CudaModule>> {
        let capability = self.capability_number()?;
        let (_, cubin) = KERNELS_CUBINS.iter().find(|(c, _)| *c == capability)?;
        match self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())) {
            Ok(module) => {
                tracing::debug!(capability, "loaded the gpu-waterz cubin");
                Some(module)
            }
            Err(e) => {
                tracing::warn!(capability, error = %e, "the driver refused the gpu-waterz cubin; compiling the PTX instead");
                None
            }
        }
    }

    /// The device's compute capability as `major * 10 + minor`.
    fn capability_number(&self) -> Option<u32> {
        self.compute_capability().ok().map(|(major, minor)| (major * 10 + minor) as u32)
    }

    fn load_ptx(&self, ptx: String) -> Result<Arc<CudaModule>> {
        self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)).context(|| "loading the gpu-waterz PTX module".into())
    }

    /// Whether the loaded kernels are the sm_90a cubin's (compute
    /// capability 9.0, no [`PTX_OVERRIDE_ENV`]): only there do the kernels
    /// that use Hopper's warpgroup products (`ot_wgmma_scaling_f32`) run;
    /// elsewhere they trap. Loads the kernels on the first call.
    pub fn sm90a_kernels(&self) -> Result<bool> {
        Ok(self.kernels()?.sm90a)
    }

    /// The loaded function of `kernel`.
    pub(crate) fn function(&self, kernel: Kernel) -> Result<&CudaFunction> {
        Ok(&self.kernels()?.functions[kernel.index()])
    }

    /// How many blocks of `threads` threads and `shared_bytes` bytes of
    /// dynamic shared memory of `kernel` one multiprocessor holds at once
    /// (at least 1), by the driver's occupancy calculator.
    pub fn blocks_per_multiprocessor(&self, kernel: Kernel, threads: u32, shared_bytes: u32) -> Result<u32> {
        let blocks = self
            .function(kernel)?
            .occupancy_max_active_blocks_per_multiprocessor(threads, shared_bytes as usize, None)
            .context(|| format!("reading the occupancy of {}", kernel.name()))?;
        Ok(blocks.max(1))
    }

    /// The most dynamic shared memory one block may ask for, in bytes,
    /// once a kernel allows it ([`Gpu::allow_shared_bytes`]): the device's
    /// opt-in limit.
    pub fn max_shared_bytes_per_block(&self) -> Result<u32> {
        let bytes = self
            .ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .context(|| "reading the opt-in shared memory per block".into())?;
        Ok(bytes.max(0) as u32)
    }

    /// Lets `kernel` launch with up to `bytes` of dynamic shared memory per
    /// block (beyond the default 48 KiB, up to
    /// [`Gpu::max_shared_bytes_per_block`]).
    pub fn allow_shared_bytes(&self, kernel: Kernel, bytes: u32) -> Result<()> {
        self.function(kernel)?
            .set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .context(|| format!("allowing {} {bytes} bytes of shared memory", kernel.name()))
    }

    /// Loads the kernels now (they are otherwise loaded at the first
    /// launch), so that the driver's PTX compilation is not timed as part
    /// of the first stage.
    pub fn load_kernels(&self) -> Result<()> {
        self.kernels().map(|_| ())
    }
}
