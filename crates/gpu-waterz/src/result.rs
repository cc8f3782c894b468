//! What each threshold gives back.

use crate::{Merge, Metrics, ScoredEdge};
use gpu_waterz_runtime::DeviceBuffer;
use ndarray::Array3;
use serde::Serialize;

/// The result at one threshold.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ThresholdResult {
    /// The threshold.
    pub threshold: f64,
    /// One label per voxel; 0 is background. Labels are waterz's: the
    /// watershed's fragment ids (or the given fragments' ids) of each
    /// region's representative.
    pub segmentation: Array3<u64>,
    /// waterz's metrics against the ground truth, when one was given.
    pub metrics: Option<Metrics>,
    /// The merges since the previous threshold, when asked for.
    pub merge_history: Option<Vec<Merge>>,
    /// The remaining region graph, when asked for.
    pub region_graph: Option<Vec<ScoredEdge>>,
}

/// One threshold's result when its segmentation was written into the
/// caller's volume (see
/// [`Agglomeration::next_threshold_in_place`](crate::Agglomeration::next_threshold_in_place)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InPlaceResult {
    /// The threshold.
    pub threshold: f64,
    /// waterz's metrics against the ground truth, when one was given.
    pub metrics: Option<Metrics>,
    /// The merges since the previous threshold, when asked for.
    pub merge_history: Option<Vec<Merge>>,
    /// The remaining region graph, when asked for.
    pub region_graph: Option<Vec<ScoredEdge>>,
}

/// One threshold's result with the segmentation left on the GPU (see
/// [`Agglomeration::next_threshold_device`](crate::Agglomeration::next_threshold_device)).
#[derive(Debug)]
#[non_exhaustive]
pub struct DeviceThresholdResult {
    /// The threshold.
    pub threshold: f64,
    /// One uint64 id per voxel, C order, as in [`ThresholdResult::segmentation`].
    pub segmentation: DeviceBuffer<u64>,
    /// waterz's metrics against the ground truth, when one was given.
    pub metrics: Option<Metrics>,
    /// The merges since the previous threshold, when asked for.
    pub merge_history: Option<Vec<Merge>>,
    /// The remaining region graph, when asked for.
    pub region_graph: Option<Vec<ScoredEdge>>,
}

/// Time spent per stage, in seconds.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct StageTimings {
    /// Copying host affinities to the device (zero when they were there).
    pub upload_s: f64,
    /// Watershed (zero when fragments were given).
    pub watershed_s: f64,
    /// Region graph and initial statistics.
    pub region_graph_s: f64,
    /// Merging, all thresholds so far.
    pub merging_s: f64,
    /// Relabelling the segmentations (and, on the GPU, collecting the merge
    /// history and region graph when asked for).
    pub extraction_s: f64,
    /// Copying the segmentations from the device to the host.
    pub download_s: f64,
    /// Metrics against the ground truth.
    pub evaluation_s: f64,
}

impl From<DeviceThresholdResult> for InPlaceResult {
    /// The result without its device segmentation (once it was downloaded
    /// into the caller's volume).
    fn from(r: DeviceThresholdResult) -> Self {
        Self {
            threshold: r.threshold,
            metrics: r.metrics,
            merge_history: r.merge_history,
            region_graph: r.region_graph,
        }
    }
}
