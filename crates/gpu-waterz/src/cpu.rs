//! The CPU engine: `waterz.agglomerate`, reproduced.

use crate::result::{StageTimings, ThresholdResult};
use crate::{Config, Merge, Result, ScoredEdge};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{check_volume_shape, AffinityGraph, Arithmetic, ScoringFunction};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::IterativeMerging;
use ndarray::Array3;
use std::time::Instant;

/// waterz's agglomeration on the CPU, one threshold at a time.
pub(crate) struct CpuEngine {
    thresholds: Vec<f64>,
    merge_history: bool,
    want_region_graph: bool,
    merging: IterativeMerging,
    /// Dense node ids per voxel, `(z, y, x)`.
    dense: Array3<u32>,
    /// Dense id to original label.
    original: Vec<u64>,
    /// The contingency table of (ground truth, fragment) pairs, built once:
    /// a segmentation's table is this one with every fragment replaced by
    /// its region, the same integer counts as from the voxels, in far
    /// fewer steps.
    fragment_table: Option<gpu_waterz_eval::ContingencyTable>,
    next: usize,
    timings: StageTimings,
    n_fragments: u64,
}

impl CpuEngine {
    /// Runs the watershed (or takes the configured fragments) and builds
    /// the region graph. `thresholds` are the configuration's, sorted.
    /// `fragments`, when given, take the place of the configured ones.
    pub(crate) fn new(
        affs: &AffinityGraph<'_>,
        fragments: Option<ndarray::ArrayView3<'_, u64>>,
        ground_truth: Option<crate::pipeline::LabelsView<'_>>,
        config: Config,
        thresholds: Vec<f64>,
    ) -> Result<Self> {
        use crate::pipeline::LabelsView;
        let dims = affs.dims();
        let given = match &fragments {
            Some(f) => Some(f.view()),
            None => config.fragments.as_ref().map(|f| f.view()),
        };
        if let Some(f) = &given {
            check_volume_shape("fragments", f.shape(), dims)?;
        }
        // The borrowed ground truth, or the configured one.
        let ground_truth = match &ground_truth {
            Some(g) => Some(g.reborrow()),
            None => config.ground_truth.as_ref().map(|g| LabelsView::U64(g.view())),
        };
        if let Some(g) = &ground_truth {
            check_volume_shape("ground truth", g.shape(), dims)?;
        }
        let arithmetic = config.arithmetic.unwrap_or(Arithmetic::Waterz);
        let mut timings = StageTimings::default();
        let t = Instant::now();
        // The fragments' stage: the watershed, or the user's fragments
        // relabelled densely.
        let labels = match given {
            Some(f) => DenseLabels::new(f)?,
            None => {
                let params = check_watershed_thresholds(config.aff_threshold_low, config.aff_threshold_high)?;
                let w = gpu_waterz_watershed::watershed(affs, params);
                // The watershed's labels are dense already: 1..=n.
                let labels = w.labels.as_standard_layout();
                DenseLabels::from_dense(labels.as_slice().expect("standard layout"), w.n_fragments)?
            }
        };
        timings.watershed_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let shape = (dims.z as usize, dims.y as usize, dims.x as usize);
        let dense = Array3::from_shape_vec(shape, labels.dense).expect("one label per voxel");
        let n_nodes = labels.original.len() as u64;
        let graph = region_graph(affs, dense.view(), n_nodes);
        // Region sizes (voxels per fragment, waterz's `addVoxel`) for the
        // scoring expressions that read them.
        let node_sizes = match &config.scoring {
            ScoringFunction::Expression(e) if e.uses_sizes() => {
                let mut sizes = vec![0u64; n_nodes as usize];
                for &d in dense.iter() {
                    sizes[d as usize] += 1;
                }
                Some(sizes)
            }
            _ => None,
        };
        let merging = IterativeMerging::with_node_sizes(
            &graph,
            node_sizes,
            config.scoring.clone(),
            arithmetic,
            config.discretize_queue,
        )?;
        timings.region_graph_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let dense_slice = dense.as_slice().expect("standard layout");
        let table = match ground_truth {
            Some(LabelsView::U32(gt)) => {
                Some(gpu_waterz_eval::contingency(dense_slice, gt.as_standard_layout().as_slice().expect("standard")))
            }
            Some(LabelsView::U64(gt)) => {
                Some(gpu_waterz_eval::contingency(dense_slice, gt.as_standard_layout().as_slice().expect("standard")))
            }
            None => None,
        };
        let fragment_table = match table {
            Some(t) if t.is_empty() => return Err(gpu_waterz_eval::EvalError::NoGroundTruth.into()),
            t => t,
        };
        timings.evaluation_s = t.elapsed().as_secs_f64();
        Ok(Self {
            thresholds,
            merge_history: config.merge_history,
            want_region_graph: config.region_graph,
            merging,
            dense,
            original: labels.original,
            fragment_table,
            next: 0,
            timings,
            n_fragments: n_nodes.saturating_sub(1),
        })
    }

    /// Merges up to the next threshold and returns its result, or `None`
    /// after the last threshold.
    /// The fragments (the watershed's, or the configured ones) in the
    /// caller's ids.
    pub(crate) fn fragments(&self) -> Array3<u64> {
        ndarray::Zip::from(&self.dense).par_map_collect(|&d| self.original[d as usize])
    }

    pub(crate) fn next_threshold(&mut self) -> Result<Option<ThresholdResult>> {
        let Some(&threshold) = self.thresholds.get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        let t = Instant::now();
        let mut history = self.merge_history.then(Vec::new);
        self.merging.merge_until(threshold as f32, history.as_mut());
        self.timings.merging_s += t.elapsed().as_secs_f64();

        let t = Instant::now();
        // The root of every dense id, mapped back to the original labels.
        let n_nodes = self.original.len();
        let roots: Vec<u64> =
            (0..n_nodes as u64).map(|id| self.original[self.merging.region_of(id) as usize]).collect();
        let segmentation = ndarray::Zip::from(&self.dense).par_map_collect(|&d| roots[d as usize]);
        self.timings.extraction_s += t.elapsed().as_secs_f64();

        let original = &self.original;
        let map = |id: u64| original[id as usize];
        let merge_history = history
            .map(|h| h.into_iter().map(|m| Merge { a: map(m.a), b: map(m.b), c: map(m.c), score: m.score }).collect());
        let region_graph = self.want_region_graph.then(|| {
            self.merging
                .region_graph()
                .into_iter()
                .map(|e| ScoredEdge { u: map(e.u), v: map(e.v), score: e.score })
                .collect()
        });
        let t = Instant::now();
        let metrics = match &self.fragment_table {
            Some(fragments) => Some(gpu_waterz_eval::metrics_of_regions(fragments, |f| roots[f as usize])?),
            None => None,
        };
        self.timings.evaluation_s += t.elapsed().as_secs_f64();
        Ok(Some(ThresholdResult { threshold, segmentation, metrics, merge_history, region_graph }))
    }

    pub(crate) fn timings(&self) -> &StageTimings {
        &self.timings
    }

    pub(crate) fn n_fragments(&self) -> u64 {
        self.n_fragments
    }
}
