//! Region adjacency graphs: one edge per pair of touching fragments, with
//! the affinities of their shared faces.
//!
//! [`reference::region_graph`] is the serial reference. It keeps waterz's
//! order (edges sorted by `(u, v)`, each edge's faces in scan order, z then
//! y then x, channel 0 to 2), so that waterz's float32 running statistics
//! can be replayed bit for bit, and it gives the exact integer statistics
//! ([`gpu_waterz_core::ContactStats`]) the GPU computes.
//! [`gpu::region_graph`] builds the same graph on the GPU, as
//! [`gpu::DeviceEdges`]; its kernels are launched only from the private
//! `gpu::launch` module, the one place in this crate where `unsafe` code is
//! allowed.
#![deny(unsafe_code)]

pub mod gpu;
pub mod reference;

pub use reference::{distinct_labels, region_graph, DenseLabels, RegionGraph};

/// Errors of the region-graph stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// Bad input.
    #[error(transparent)]
    Input(#[from] gpu_waterz_core::CoreError),
    /// The GPU failed, or the volume does not fit its limits.
    #[error("GPU region graph: {0}")]
    Gpu(#[from] gpu_waterz_runtime::RuntimeError),
    /// A region graph given to the GPU is malformed (nothing was launched).
    #[error("invalid region graph: {0}")]
    InvalidGraph(String),
    /// More fragments than u32 ids can name.
    #[error("{0} fragments: at most 2^32 - 2 are taken")]
    TooManyFragments(u64),
}
