//! The vocabulary every gpu-waterz crate shares, and nothing else: volume
//! shapes, validated affinity and label views, id newtypes, the parameters
//! of each stage and the errors of bad input; and the deterministic data
//! that tests, benchmarks and blockwise scale runs share ([`synthetic`],
//! [`generate`]). It has no GPU dependency; other Rust crates (and users'
//! own) depend on this one.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod affinities;
pub mod error;
pub mod generate;
pub mod parallel;
pub mod params;
pub mod scoring;
pub mod synthetic;

pub use affinities::{AffinityGraph, AffinityValues};
pub use error::CoreError;
pub use gpu_waterz_abi::{stats::ContactStats, watershed::WatershedParams, Dims3};
pub use params::{Arithmetic, ScoringFunction, Thresholds};

/// The result type of this crate.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;

/// Checks that a label volume has the shape `dims`, naming it in the error.
pub fn check_volume_shape(name: &'static str, shape: &[usize], dims: Dims3) -> Result<()> {
    let expected = [dims.z as usize, dims.y as usize, dims.x as usize];
    if shape != expected {
        return Err(CoreError::ShapeMismatch { name, expected: expected.to_vec(), found: shape.to_vec() });
    }
    Ok(())
}
