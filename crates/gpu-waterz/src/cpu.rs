//! The CPU reference pipeline: `waterz.agglomerate`, reproduced.

use crate::Error;
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{check_volume_shape, AffinityGraph, Arithmetic, ScoringFunction, Thresholds, WatershedParams};
use gpu_waterz_eval::Metrics;
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::{IterativeMerging, Merge, ScoredEdge};
use ndarray::{Array3, ArrayView3};
use serde::Serialize;
use std::time::{Duration, Instant};

/// What to compute, with waterz's defaults.
#[derive(Clone, Debug)]
pub struct Options {
    /// Merge thresholds, ascending.
    pub thresholds: Thresholds,
    /// Watershed thresholds (unused when fragments are given).
    pub watershed: WatershedParams,
    /// The edge score.
    pub scoring: ScoringFunction,
    /// waterz's float32 arithmetic, or the GPU's exact one.
    pub arithmetic: Arithmetic,
    /// 0 for waterz's priority queue, else its bin queue with that many bins.
    pub discretize_queue: u64,
    /// Return the merges done for each threshold.
    pub merge_history: bool,
    /// Return the remaining region graph at each threshold.
    pub region_graph: bool,
}

impl Options {
    /// waterz's defaults for these thresholds: low 0.0001, high 0.9999,
    /// `OneMinus<MeanAffinity>`, waterz arithmetic, the priority queue.
    pub fn new(thresholds: &[f64]) -> Result<Self, Error> {
        Ok(Self {
            thresholds: Thresholds::new(thresholds)?,
            watershed: check_watershed_thresholds(0.0001, 0.9999)?,
            scoring: ScoringFunction::MeanAffinity,
            arithmetic: Arithmetic::Waterz,
            discretize_queue: 0,
            merge_history: false,
            region_graph: false,
        })
    }
}

/// The result at one threshold.
#[derive(Clone, Debug)]
pub struct ThresholdResult {
    /// The threshold.
    pub threshold: f64,
    /// One label per voxel; 0 is background.
    pub segmentation: Array3<u64>,
    /// waterz's metrics against the ground truth, when given.
    pub metrics: Option<Metrics>,
    /// The merges since the previous threshold, when asked for.
    pub merge_history: Option<Vec<Merge>>,
    /// The remaining region graph, when asked for.
    pub region_graph: Option<Vec<ScoredEdge>>,
}

/// Time spent per stage.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StageTimings {
    /// Watershed (zero when fragments were given).
    pub watershed_s: f64,
    /// Region graph and initial statistics.
    pub region_graph_s: f64,
    /// Merging, all thresholds so far.
    pub merging_s: f64,
    /// Relabelling the segmentations.
    pub extraction_s: f64,
    /// Metrics against the ground truth.
    pub evaluation_s: f64,
}

/// waterz's agglomeration, one threshold at a time (as waterz's generator).
pub struct Agglomeration {
    options: Options,
    merging: IterativeMerging,
    /// Dense node ids per voxel, `(z, y, x)`.
    dense: Array3<u64>,
    /// Dense id to original label.
    original: Vec<u64>,
    ground_truth: Option<Array3<u64>>,
    next: usize,
    timings: StageTimings,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Agglomeration {
    /// Runs the watershed (or takes `fragments`) and builds the region graph.
    pub fn new(
        affs: &AffinityGraph<'_>,
        fragments: Option<ArrayView3<'_, u64>>,
        ground_truth: Option<Array3<u64>>,
        options: &Options,
    ) -> Result<Self, Error> {
        let dims = affs.dims();
        if let Some(f) = &fragments {
            check_volume_shape("fragments", f.shape(), dims)?;
        }
        if let Some(g) = &ground_truth {
            check_volume_shape("ground truth", g.shape(), dims)?;
        }
        let mut timings = StageTimings::default();
        let t = Instant::now();
        let labels = match fragments {
            Some(f) => DenseLabels::new(f),
            None => {
                let w = gpu_waterz_watershed::watershed(affs, options.watershed);
                timings.watershed_s = secs(t.elapsed());
                DenseLabels::new(w.labels.view())
            }
        };
        let t = Instant::now();
        let shape = (dims.z as usize, dims.y as usize, dims.x as usize);
        let dense = Array3::from_shape_vec(shape, labels.dense).expect("one label per voxel");
        let graph = region_graph(affs, dense.view(), labels.original.len() as u64);
        let merging = IterativeMerging::new(&graph, options.scoring, options.arithmetic, options.discretize_queue)?;
        timings.region_graph_s = secs(t.elapsed());
        Ok(Self { options: options.clone(), merging, dense, original: labels.original, ground_truth, next: 0, timings })
    }

    /// Merges up to the next threshold and returns its result, or `None`
    /// after the last threshold.
    pub fn next_threshold(&mut self) -> Result<Option<ThresholdResult>, Error> {
        let Some(&threshold) = self.options.thresholds.values().get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        let t = Instant::now();
        let mut history = self.options.merge_history.then(Vec::new);
        self.merging.merge_until(threshold as f32, history.as_mut());
        self.timings.merging_s += secs(t.elapsed());

        let t = Instant::now();
        // The root of every dense id, mapped back to the original labels.
        let n_nodes = self.original.len();
        let roots: Vec<u64> =
            (0..n_nodes as u64).map(|id| self.original[self.merging.region_of(id) as usize]).collect();
        let segmentation = self.dense.mapv(|d| roots[d as usize]);
        self.timings.extraction_s += secs(t.elapsed());

        let original = &self.original;
        let map = |id: u64| original[id as usize];
        let merge_history = history
            .map(|h| h.into_iter().map(|m| Merge { a: map(m.a), b: map(m.b), c: map(m.c), score: m.score }).collect());
        let region_graph = self.options.region_graph.then(|| {
            self.merging
                .region_graph()
                .into_iter()
                .map(|e| ScoredEdge { u: map(e.u), v: map(e.v), score: e.score })
                .collect()
        });
        let t = Instant::now();
        let metrics = match &self.ground_truth {
            Some(gt) => Some(gpu_waterz_eval::evaluate(segmentation.view(), gt.view())?),
            None => None,
        };
        self.timings.evaluation_s += secs(t.elapsed());
        Ok(Some(ThresholdResult { threshold, segmentation, metrics, merge_history, region_graph }))
    }

    /// Time spent so far, per stage.
    pub fn timings(&self) -> &StageTimings {
        &self.timings
    }
}

/// The number of distinct non-zero labels.
pub fn count_segments(labels: &ArrayView3<'_, u64>) -> usize {
    let mut ids: Vec<u64> = labels.iter().copied().filter(|&l| l != 0).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}
