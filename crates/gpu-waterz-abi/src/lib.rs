//! The types and pure functions that both sides of the PCIe bus agree on.
//!
//! Everything here is `#![no_std]` and dependency-free, so that the device
//! crate (`kernels-rs`, built for `nvptx64-nvidia-cuda`) and the host crates
//! compile the *same* definitions. Structs that cross to the GPU are
//! `#[repr(C)]` and `Copy`; per-voxel logic lives in plain functions, so that
//! host unit tests reach the exact code the kernels run.
#![no_std]
#![deny(missing_docs)]
#![forbid(unsafe_code)]
// `!(a > b)` is deliberate: it is waterz's test, and it is true for NaN.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

#[macro_use]
pub mod kernel;
pub mod distance;
pub mod frames;
pub mod generate;
pub mod greyscale;
pub mod morphology;
pub mod primitives;
pub mod transport;
pub mod watershed;

pub use kernel::{Kernel, KernelArgs};

/// The extent of a volume, in voxels, in waterz's `(z, y, x)` order.
///
/// `x` is the fastest-varying axis (C order), as in numpy arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dims3 {
    /// Number of sections (the slowest axis).
    pub z: u64,
    /// Number of rows per section.
    pub y: u64,
    /// Number of voxels per row (the fastest axis).
    pub x: u64,
}

impl Dims3 {
    /// A volume of `z` sections of `y` rows of `x` voxels.
    pub const fn new(z: u64, y: u64, x: u64) -> Self {
        Self { z, y, x }
    }

    /// The number of voxels, or `None` if it does not fit in a `u64`.
    pub const fn checked_voxels(&self) -> Option<u64> {
        match self.z.checked_mul(self.y) {
            Some(zy) => zy.checked_mul(self.x),
            None => None,
        }
    }

    /// The linear (C-order) index of voxel `(z, y, x)`.
    #[inline(always)]
    pub const fn index(&self, z: u64, y: u64, x: u64) -> u64 {
        (z * self.y + y) * self.x + x
    }

    /// The strides of the three axes in voxels, in `(z, y, x)` order.
    #[inline(always)]
    pub const fn strides(&self) -> [u64; 3] {
        [self.y * self.x, self.x, 1]
    }
}

/// Threads per block of the reduction kernel `sum_u32` (a power of two);
/// each thread needs 8 bytes of dynamic shared memory.
pub const REDUCE_THREADS: u32 = 256;

/// The arguments of `sum_u32` (the foundation's smoke kernel, also used to
/// check a launch end to end).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SumU32Args {
    /// `n` readable u32s.
    pub input: *const u32,
    /// Number of input elements.
    pub n: u64,
    /// One u64, zeroed before the launch; receives the sum.
    pub output: *mut u64,
}

impl_kernel_args!(
    SumU32Args => SumU32 { input, n, output },
);

pub mod graph;
pub mod parhac;
pub mod stats;
