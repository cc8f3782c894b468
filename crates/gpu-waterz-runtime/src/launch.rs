//! Launching kernels: launch shapes and the one `unsafe` entry point that
//! passes a kernel its argument struct.

use crate::device::Gpu;
use crate::{DriverContext, Result, RuntimeError};
use gpu_waterz_abi::kernel::MAX_PARAMS;
use gpu_waterz_abi::KernelArgs;

/// Threads per block of grid-stride kernels.
pub const BLOCK: u32 = 256;

/// The shape of a one-dimensional launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn with_shared_bytes(self, bytes: u32) -> Self {
        Self { shared_bytes: bytes, ..self }
    }
}

impl From<LaunchConfig> for cudarc::driver::LaunchConfig {
    fn from(c: LaunchConfig) -> Self {
        Self { grid_dim: (c.blocks, 1, 1), block_dim: (c.threads, 1, 1), shared_mem_bytes: c.shared_bytes }
    }
}

impl Gpu {
    /// A grid-stride launch over `n` items: [`BLOCK`] threads, at most 32
    /// blocks per multiprocessor.
    pub fn grid_stride_config(&self, n: u64) -> LaunchConfig {
        let blocks = n.div_ceil(BLOCK as u64).max(1);
        let max_blocks = self.multiprocessor_count() as u64 * 32;
        LaunchConfig { blocks: blocks.min(max_blocks) as u32, threads: BLOCK, shared_bytes: 0 }
    }

    /// Queues kernel `A::KERNEL` with `args` on the stream, each field of
    /// the argument struct as one parameter, in order (the kernel declares
    /// them so; `gpu_waterz_abi::kernel_params!` checks it when the kernels
    /// compile).
    ///
    /// # Safety
    /// `args` and `config` satisfy the `# Safety` section of the kernel
    /// (in `kernels-rs`): every pointer addresses a live device buffer of at
    /// least the length the kernel reads or writes through it, for as long
    /// as the queued kernel runs, and the launch shape and shared memory are
    /// the documented ones.
    pub unsafe fn launch<A: KernelArgs>(&self, config: LaunchConfig, args: A) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { self.launch_with(config, args, false) }
    }

    /// Queues kernel `A::KERNEL` as [`Gpu::launch`] does, cooperatively:
    /// the driver starts every block of the grid at once or refuses the
    /// launch (an error, never a grid that waits for blocks that cannot
    /// start), so that the kernel may wait for the whole grid.
    /// [`Gpu::cooperative_blocks`] is the largest grid it takes.
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    pub unsafe fn launch_cooperative<A: KernelArgs>(&self, config: LaunchConfig, args: A) -> Result<()> {
        // SAFETY: the caller's.
        unsafe { self.launch_with(config, args, true) }
    }

    /// The most blocks of `threads` threads and `shared_bytes` of dynamic
    /// shared memory that a cooperative launch of `kernel` takes: every
    /// multiprocessor full.
    pub fn cooperative_blocks(&self, kernel: gpu_waterz_abi::Kernel, threads: u32, shared_bytes: u32) -> Result<u32> {
        Ok(self.multiprocessor_count() * self.blocks_per_multiprocessor(kernel, threads, shared_bytes)?)
    }

    /// [`Gpu::launch`], cooperatively or not.
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    unsafe fn launch_with<A: KernelArgs>(&self, config: LaunchConfig, mut args: A, cooperative: bool) -> Result<()> {
        let function = self.function(A::KERNEL)?.cu_function();
        let mut params = [std::ptr::null_mut(); MAX_PARAMS];
        let n = args.param_pointers(&mut params);
        self.ctx.bind_to_thread().context(|| "binding the CUDA context".into())?;
        let stream = self.launch_stream();
        // SAFETY: `params` holds the address of each field of `args`, in the
        // kernel's parameter order and types (checked when the kernels
        // compile); the driver copies them before this returns, while
        // `args` lives. The caller guarantees the kernel's preconditions.
        unsafe {
            let (grid, block) = ((config.blocks, 1, 1), (config.threads, 1, 1));
            let params = &mut params[..n];
            if cooperative {
                cudarc::driver::result::launch_cooperative_kernel(
                    function,
                    grid,
                    block,
                    config.shared_bytes,
                    stream,
                    params,
                )
            } else {
                cudarc::driver::result::launch_kernel(function, grid, block, config.shared_bytes, stream, params)
            }
        }
        .context(|| format!("launching {}", A::KERNEL.name()))
    }
}

/// A launch of one block of `threads` per tile of `tile` items.
pub fn tiled_config(n: u64, tile: u64, threads: u32, shared_bytes: u32) -> Result<LaunchConfig> {
    let tiles = n.div_ceil(tile).max(1);
    if tiles > i32::MAX as u64 {
        return Err(RuntimeError::InvalidLaunch { kernel: "tiled", reason: format!("{n} items need {tiles} blocks") });
    }
    Ok(LaunchConfig { blocks: tiles as u32, threads, shared_bytes })
}

/// Fails unless `buffer` holds at least `needed` elements.
pub fn check_len<T>(kernel: &'static str, what: &str, buffer: &crate::DeviceBuffer<T>, needed: u64) -> Result<()> {
    if (buffer.len() as u64) < needed {
        return Err(RuntimeError::InvalidLaunch {
            kernel,
            reason: format!("{what} holds {} elements, {needed} are needed", buffer.len()),
        });
    }
    Ok(())
}
