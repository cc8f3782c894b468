//! gpu-waterz: affinity graphs to neuron segmentations, with waterz's
//! semantics, on the GPU or the CPU.
//!
//! The pipeline is waterz's: a watershed of the affinities into fragments,
//! the region adjacency graph of the fragments, then merging neighbours
//! while the score of their shared boundary (by default one minus the mean
//! affinity) stays below each threshold.
//!
//! [`Agglomeration`] is the one pipeline type; a [`Config`] says what to
//! compute and on which [`Backend`]: the CPU reference reproduces stock
//! `waterz.agglomerate` (waterz 0.10.1) bit for bit, merge order and ties
//! included; the GPU backend runs the same pipeline with exact integer
//! statistics and ParHAC rounds (at ε = 0 equal to waterz's order on
//! tie-free input). `Backend::Auto`, the default, takes the GPU when one is
//! usable.
//!
//! ```no_run
//! use gpu_waterz::{ndarray::Array4, AffinityGraph, Agglomeration, Config};
//!
//! let affs = Array4::<f32>::from_elem((3, 16, 64, 64), 0.5);
//! let affs = AffinityGraph::from_f32(affs.view())?;
//! for result in Agglomeration::new(&affs, Config::new(&[0.3, 0.5]))? {
//!     let result = result?;
//!     println!("{}: {} voxels", result.threshold, result.segmentation.len());
//! }
//! # Ok::<(), gpu_waterz::Error>(())
//! ```
#![forbid(unsafe_code)]

mod config;
mod cpu;
mod error;
mod gpu;
mod pipeline;
mod result;

pub use config::{Backend, BackendKind, Config};
pub use error::{Error, ErrorKind, Result};
pub use gpu::{block_shape_within, bytes_needed, check_fits, WORKING_BYTES_PER_VOXEL};
pub use gpu_waterz_core::{AffinityGraph, Arithmetic, Dims3, ScoringFunction};
pub use gpu_waterz_eval::Metrics;
pub use gpu_waterz_parhac::gpu::{GpuRoundInfo, HostFinish};
pub use gpu_waterz_parhac::{Merge, ScoredEdge};
pub use gpu_waterz_runtime::{DeviceBuffer, Gpu};
pub use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities};
/// The `ndarray` version this crate's API uses, so that users need not
/// match it in their own `Cargo.toml`.
pub use ndarray;
pub use pipeline::{Agglomeration, GpuStats, LabelsView};
pub use result::{DeviceThresholdResult, InPlaceResult, StageTimings, ThresholdResult};

/// The shared vocabulary (shapes, parameters, input errors), re-exported.
pub use gpu_waterz_core as core;

/// The number of distinct non-zero labels of a volume.
pub fn count_segments(labels: &ndarray::ArrayView3<'_, u64>) -> usize {
    let owned;
    let flat = match labels.as_slice() {
        Some(s) => s,
        None => {
            owned = labels.iter().copied().collect::<Vec<_>>();
            &owned
        }
    };
    gpu_waterz_graph::distinct_labels(flat).iter().filter(|&&l| l != 0).count()
}
