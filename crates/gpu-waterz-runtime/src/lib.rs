//! The generic CUDA host side of gpu-waterz: the device handle, typed
//! buffers, the stream-ordered memory pool, launching, and the device-wide
//! primitives (scan, compaction, radix sort, reduce-by-key).
//!
//! Built on `cudarc` with dynamic loading: this crate builds, and its tests
//! run, on machines with no CUDA toolkit and no GPU. [`Gpu::new`] returns a
//! clear [`RuntimeError`] there instead of panicking (cudarc itself panics
//! when `libcuda` is missing, so the library's presence is checked first).
//!
//! The device code is Rust too (`kernels-rs/`), compiled to PTX by
//! `cargo xtask kernels`; the PTX is committed and embedded here
//! ([`KERNELS_PTX`]) and its kernels are loaded once per device. A kernel is
//! launched with [`Gpu::launch`] and its argument struct from
//! `gpu-waterz-abi`, which names the kernel ([`gpu_waterz_abi::KernelArgs`]).
//! Launching is `unsafe`; the stage crates (watershed, region graph,
//! merging) own their kernels' launches, each in a `launch` module behind
//! safe functions that check what the kernels assume.

mod buffer;
mod device;
mod graph;
mod launch;
mod module;
pub mod primitives;
mod priority;
mod staging;
pub mod testing;
mod timer;

pub use buffer::{DeviceBuffer, DeviceElement};
pub use device::{Gpu, POOL_KEEP_DIVISOR};
pub use gpu_waterz_abi as abi;
pub use graph::Graph;
pub use launch::{check_len, tiled_config, LaunchConfig, BLOCK};
pub use priority::lower_thread_priority;
pub use staging::{PendingDownload, PinnedBuffer, STAGING_CHUNK_BYTES, STAGING_MIN_BYTES};
pub use timer::StageTimer;

/// The PTX of `kernels-rs`, built for sm_90 by `cargo xtask kernels`.
pub const KERNELS_PTX: &str = include_str!("../../../kernels-rs/ptx/gpu_waterz_kernels.ptx");

/// The PTX of `kernels-rs` built for sm_80, which the driver compiles for
/// devices older than sm_90 that have no cubin here.
pub const KERNELS_PTX_SM80: &str = include_str!("../../../kernels-rs/ptx/gpu_waterz_kernels.sm_80.ptx");

/// The kernels compiled for each architecture by `cargo xtask kernels`
/// (ptxas from CUDA 12.8), as `(compute capability major * 10 + minor,
/// cubin)`. A device whose capability is listed loads its cubin, with no
/// compilation by the driver; any other loads [`KERNELS_PTX`] (or, before
/// sm_90, [`KERNELS_PTX_SM80`]), which the driver compiles at the first use.
pub const KERNELS_CUBINS: &[(u32, &[u8])] = &[
    (80, include_bytes!("../../../kernels-rs/cubin/gpu_waterz_kernels.sm_80.cubin")),
    (86, include_bytes!("../../../kernels-rs/cubin/gpu_waterz_kernels.sm_86.cubin")),
    (89, include_bytes!("../../../kernels-rs/cubin/gpu_waterz_kernels.sm_89.cubin")),
    (90, include_bytes!("../../../kernels-rs/cubin/gpu_waterz_kernels.sm_90a.cubin")),
    (100, include_bytes!("../../../kernels-rs/cubin/gpu_waterz_kernels.sm_100.cubin")),
    (120, include_bytes!("../../../kernels-rs/cubin/gpu_waterz_kernels.sm_120.cubin")),
];

/// Environment variable naming a PTX file to load instead of [`KERNELS_PTX`]
/// (for example one built by `cargo xtask kernels --arch sm_80`).
pub const PTX_OVERRIDE_ENV: &str = "GPU_WATERZ_PTX";

/// What can go wrong on the GPU side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// No CUDA driver library could be loaded.
    #[error("no CUDA driver: libcuda could not be loaded ({detail}); gpu-waterz's GPU backend needs an NVIDIA GPU and driver, use the CPU backend otherwise")]
    NoDriver {
        /// What was tried.
        detail: String,
    },
    /// The driver is there, but the requested device is not.
    #[error("no CUDA device with ordinal {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The requested ordinal.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error while {context}: {source}")]
    Driver {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// The PTX override named by `GPU_WATERZ_PTX` could not be read.
    #[error("cannot read the PTX file {path} named by {env}: {source}")]
    PtxOverride {
        /// The path.
        path: String,
        /// The variable's name.
        env: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The device has too little free memory.
    #[error("not enough GPU memory for {what}: {needed} bytes needed, {free} bytes free of {total}; crop or split the volume")]
    OutOfMemory {
        /// What needed the memory.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes free when it was checked.
        free: u64,
        /// The device's memory.
        total: u64,
    },
    /// A kernel's input violates what the kernel assumes.
    #[error("invalid launch of {kernel}: {reason}")]
    InvalidLaunch {
        /// The kernel.
        kernel: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// The result type of this crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

pub(crate) trait DriverContext<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, cudarc::driver::DriverError> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| RuntimeError::Driver { context: what(), source })
    }
}
