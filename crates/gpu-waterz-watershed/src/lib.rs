//! Watershed on affinity graphs, with waterz's semantics.
//!
//! [`reference::watershed`] is the serial reference: a line-by-line port of
//! waterz's `basic_watershed.hpp` that gives the same labels as stock waterz
//! (not only the same partition), ties and plateaus included.
//! [`gpu::watershed`] gives the same labels on the GPU; its kernels are
//! launched only from the private `gpu::launch` module, the one place in
//! this crate where `unsafe` code is allowed.
#![deny(unsafe_code)]

pub mod gpu;
pub mod greyscale;
pub mod reference;

pub use reference::{watershed, Fragments};

/// Errors of the watershed stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatershedError {
    /// Bad input.
    #[error(transparent)]
    Input(#[from] gpu_waterz_core::CoreError),
    /// The GPU failed, or the volume does not fit its limits.
    #[error("GPU watershed: {0}")]
    Gpu(#[from] gpu_waterz_runtime::RuntimeError),
}
