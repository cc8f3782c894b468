//! The embedded PTX module and its kernels, loaded once per device.

use crate::device::Gpu;
use crate::{DriverContext, Result, RuntimeError, KERNELS_PTX, PTX_OVERRIDE_ENV};
use cudarc::driver::{CudaFunction, CudaModule};
use gpu_waterz_abi::Kernel;
use std::sync::Arc;

/// The loaded module and one function per [`Kernel`], indexed by
/// [`Kernel::index`].
pub(crate) struct KernelModule {
    _module: Arc<CudaModule>,
    functions: Vec<CudaFunction>,
}

impl Gpu {
    /// Loads the PTX (the embedded one, or the file named by
    /// [`PTX_OVERRIDE_ENV`]) and looks up every kernel, once per device; a
    /// kernel missing from the PTX is an error here, not at its launch.
    pub(crate) fn kernels(&self) -> Result<&KernelModule> {
        if let Some(loaded) = self.module.get() {
            return Ok(loaded);
        }
        let ptx = match std::env::var(PTX_OVERRIDE_ENV) {
            Ok(path) => std::fs::read_to_string(&path).map_err(|source| RuntimeError::PtxOverride {
                path,
                env: PTX_OVERRIDE_ENV,
                source,
            })?,
            Err(_) => KERNELS_PTX.to_string(),
        };
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .context(|| "loading the gpu-waterz PTX module".into())?;
        let functions = Kernel::ALL
            .iter()
            .map(|k| module.load_function(k.name()).context(|| format!("looking up kernel {}", k.name())))
            .collect::<Result<Vec<_>>>()?;
        // Another thread may have loaded it meanwhile; either copy is fine.
        let _ = self.module.set(KernelModule { _module: module, functions });
        Ok(self.module.get().expect("set just above"))
    }

    /// The loaded function of `kernel`.
    pub(crate) fn function(&self, kernel: Kernel) -> Result<&CudaFunction> {
        Ok(&self.kernels()?.functions[kernel.index()])
    }

    /// Loads the kernels now (they are otherwise loaded at the first
    /// launch), so that the driver's PTX compilation is not timed as part
    /// of the first stage.
    pub fn load_kernels(&self) -> Result<()> {
        self.kernels().map(|_| ())
    }
}
