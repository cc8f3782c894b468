//! gpu-waterz's device code: `#![no_std]` Rust compiled to PTX for
//! `nvptx64-nvidia-cuda` by `cargo xtask kernels`.
//!
//! Conventions, as in Rust-CUDA's examples: every kernel documents
//! `# Safety`, `# Parameters` and `# Thread mapping`. Every kernel is
//! declared with `kernel!` (`src/kernel_macro.rs`), whose parameters are the fields of its
//! `#[repr(C)]` argument struct from `gpu-waterz-abi` (names, types and
//! order checked when this crate compiles), which the host fills and
//! launches. Pure per-voxel logic lives in `gpu-waterz-abi`, where
//! host unit tests reach it. Nothing here depends on rustc's built-in nvptx
//! support beyond thread indices, barriers and a few atomics, all wrapped in
//! [`device`], so that a later move to `cuda_std` touches one module.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)]
#![feature(core_intrinsics, gpu_intrinsics, gpu_launch_sized_workgroup_mem)]
#![allow(internal_features)]

#[macro_use]
mod kernel_macro;

pub mod device;
pub mod distance;
pub mod frames;
pub mod generate;
pub mod graph;
pub mod greyscale;
pub mod morphology;
pub mod parhac;
pub mod primitives;
pub mod reduce;
pub mod transport;
pub mod transport_wgmma;
pub mod watershed;

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    device::trap()
}
