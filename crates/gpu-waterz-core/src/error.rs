//! Errors of bad input, shared by every stage.

/// What is wrong with an input, with enough context to fix it.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum CoreError {
    /// The affinities do not have the shape `(3, z, y, x)`.
    #[error("affinities must have the shape (3, z, y, x), not {shape:?}")]
    AffinityShape {
        /// The shape that was given.
        shape: Vec<usize>,
    },
    /// A volume has no voxels.
    #[error("the volume is empty: shape {shape:?} has no voxels")]
    EmptyVolume {
        /// The shape that was given.
        shape: Vec<usize>,
    },
    /// The number of voxels does not fit the index type.
    #[error("the volume {shape:?} has too many voxels ({voxels}) for this backend, which supports at most {max}")]
    TooLarge {
        /// The shape that was given.
        shape: Vec<usize>,
        /// Its number of voxels (saturated at `u64::MAX`).
        voxels: u64,
        /// The most this backend supports.
        max: u64,
    },
    /// An affinity is NaN or infinite.
    #[error(
        "affinity {value} at channel {channel}, voxel (z={z}, y={y}, x={x}) is {what}; affinities must be finite numbers"
    )]
    AffinityValue {
        /// The offending value.
        value: f32,
        /// `"NaN"` or `"infinite"`.
        what: &'static str,
        /// Channel of the value.
        channel: usize,
        /// Its z coordinate.
        z: usize,
        /// Its y coordinate.
        y: usize,
        /// Its x coordinate.
        x: usize,
    },
    /// A volume's shape does not match the affinities'.
    #[error("{name} must have the shape of the affinities without the channels, {expected:?}, not {found:?}")]
    ShapeMismatch {
        /// Which volume (`"fragments"`, `"ground truth"`, ...).
        name: &'static str,
        /// The shape it should have.
        expected: Vec<usize>,
        /// The shape it has.
        found: Vec<usize>,
    },
    /// The thresholds are not usable.
    #[error("invalid thresholds {thresholds:?}: {reason}")]
    Thresholds {
        /// The thresholds as given.
        thresholds: Vec<f64>,
        /// What is wrong with them.
        reason: String,
    },
    /// The watershed thresholds are not usable.
    #[error("invalid watershed thresholds: aff_threshold_low = {low}, aff_threshold_high = {high}: {reason}")]
    WatershedThresholds {
        /// The low threshold.
        low: f64,
        /// The high threshold.
        high: f64,
        /// What is wrong with them.
        reason: &'static str,
    },
    /// A scoring function this crate does not support.
    #[error("unsupported scoring function {given:?}; supported: {supported}")]
    ScoringFunction {
        /// The spelling that was given.
        given: String,
        /// The supported spellings.
        supported: &'static str,
    },
    /// An epsilon that is negative or not finite.
    #[error("epsilon must be a finite number >= 0, not {0}")]
    Epsilon(f64),
}
