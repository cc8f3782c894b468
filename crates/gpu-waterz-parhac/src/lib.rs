//! Agglomeration: merging fragments while their boundary score stays below
//! a threshold.
//!
//! [`reference::IterativeMerging`] is the serial reference: waterz's
//! `IterativeRegionMerging` with its priority queue (libstdc++'s binary
//! heap, replayed exactly so that ties break as in stock waterz), lazy
//! re-scoring of stale edges, and waterz's scoring functions
//! ([`stats::EdgeStatistics`]). In [`gpu_waterz_core::Arithmetic::Exact`]
//! mode the mean is computed from integer sums, as the GPU does.
//!
//! [`gpu::GpuParhac`] runs the rounds of the CPU ParHAC ([`cpu::Parhac`])
//! on the GPU; its kernels are launched only from the private
//! `gpu::launch` module, the one place in this crate where `unsafe` code
//! is allowed.
#![deny(unsafe_code)]
// `!(a > b)` is deliberate: it is waterz's test, and it is true for NaN.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod cpu;
pub mod expression;
pub mod gpu;
pub mod queue;
pub mod reference;
pub mod serial;
pub mod stats;

pub use reference::{IterativeMerging, Merge, ScoredEdge};

/// Errors of the agglomeration stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParhacError {
    /// Bad input.
    #[error(transparent)]
    Input(#[from] gpu_waterz_core::CoreError),
    /// waterz's bin queue takes at most 65536 bins.
    #[error("discretize_queue must be 0 (no bins) or a number of bins of at most 65536, not {0}")]
    QueueBins(u64),
    /// A scoring function or arithmetic this version does not implement.
    #[error("{0} is not implemented")]
    Unsupported(String),
    /// The GPU failed.
    #[error(transparent)]
    Runtime(#[from] gpu_waterz_runtime::RuntimeError),
    /// Node ids are 32-bit on the GPU.
    #[error("the GPU ParHAC takes at most 2^32 - 1 nodes (fragments + 1), not {n_nodes}")]
    TooManyNodes {
        /// The number of nodes asked for.
        n_nodes: u64,
    },
    /// Slot indices are 32-bit on the GPU.
    #[error("the GPU ParHAC takes fewer than 2^32 - 1 edges, not {n_edges}")]
    TooManyEdges {
        /// The number of edges given.
        n_edges: u64,
    },
    /// Fragments whose ids are not all nodes of the graph.
    #[error("fragments with ids up to {n_fragments} do not fit a graph (or table) of {n_nodes} nodes")]
    FragmentsOutsideGraph {
        /// The number of fragments, the largest id.
        n_fragments: u64,
        /// The nodes of the graph (or entries of the table).
        n_nodes: u64,
    },
    /// An edge that is a loop, unordered, or outside the nodes.
    #[error("edge ({u}, {v}) is not an edge u < v between nodes below {n_nodes}")]
    InvalidEdge {
        /// The smaller endpoint, as given.
        u: u64,
        /// The larger endpoint, as given.
        v: u64,
        /// The number of nodes.
        n_nodes: u64,
    },
    /// The history was asked for but not recorded.
    #[error("the merge history was not recorded: start ParHAC with the history enabled")]
    NoHistory,
}
