//! gpu-waterz: affinity graphs to neuron segmentations, with waterz's
//! semantics.
//!
//! The pipeline is waterz's: a watershed of the affinities into fragments,
//! the region adjacency graph of the fragments, then merging neighbours
//! while the score of their shared boundary (by default one minus the mean
//! affinity) stays below each threshold.
//!
//! [`cpu::Agglomeration`] is the CPU reference: it reproduces stock
//! `waterz.agglomerate` (waterz 0.10.1) bit for bit, merge order and ties
//! included. [`gpu::Agglomeration`] is the same pipeline on the GPU
//! (exact integer statistics, ParHAC rounds), built on
//! [`gpu_waterz_runtime`].
//!
//! ```
//! use gpu_waterz::cpu::{Agglomeration, Options};
//! use gpu_waterz_core::AffinityGraph;
//! use ndarray::Array4;
//!
//! // Two voxels joined by a strong face, a weak face, then two more.
//! let mut affs = Array4::<f32>::zeros((3, 1, 1, 4));
//! affs[[2, 0, 0, 1]] = 0.9;
//! affs[[2, 0, 0, 2]] = 0.4;
//! affs[[2, 0, 0, 3]] = 0.8;
//! let affs = AffinityGraph::from_f32(affs.view()).unwrap();
//! let options = Options::new(&[0.5, 0.7]).unwrap();
//! let mut run = Agglomeration::new(&affs, None, None, &options).unwrap();
//! let at_05 = run.next_threshold().unwrap().unwrap();
//! assert_eq!(at_05.segmentation.as_slice().unwrap(), &[1, 1, 2, 2]);
//! let at_07 = run.next_threshold().unwrap().unwrap();
//! assert_eq!(at_07.segmentation.as_slice().unwrap(), &[1, 1, 1, 1]);
//! ```

pub mod cpu;
pub mod generate;
pub mod gpu;
pub mod io;

pub use gpu_waterz_core as core;
pub use gpu_waterz_eval::Metrics;
pub use gpu_waterz_parhac::{Merge, ScoredEdge};

/// Errors of the facade.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input.
    #[error(transparent)]
    Input(#[from] gpu_waterz_core::CoreError),
    /// Reading or writing a file failed.
    #[error(transparent)]
    Io(#[from] io::IoError),
    /// Evaluation failed.
    #[error(transparent)]
    Eval(#[from] gpu_waterz_eval::EvalError),
    /// Agglomeration failed.
    #[error(transparent)]
    Parhac(#[from] gpu_waterz_parhac::ParhacError),
    /// The GPU failed.
    #[error(transparent)]
    Runtime(#[from] gpu_waterz_runtime::RuntimeError),
    /// The GPU watershed failed.
    #[error(transparent)]
    Watershed(#[from] gpu_waterz_watershed::WatershedError),
    /// The GPU region graph failed.
    #[error(transparent)]
    Graph(#[from] gpu_waterz_graph::GraphError),
    /// The backend cannot do what was asked.
    #[error("{0}")]
    Unsupported(String),
}
