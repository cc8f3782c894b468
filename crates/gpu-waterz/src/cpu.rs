//! The CPU engine: `waterz.agglomerate`, reproduced.

use crate::result::{InPlaceResult, StageTimings, ThresholdResult};
use crate::{Config, Merge, Result, ScoredEdge};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{check_volume_shape, AffinityGraph, Arithmetic, Dims3, ScoringFunction};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::IterativeMerging;
use ndarray::{Array3, ArrayViewMut3};
use std::time::Instant;

/// waterz's agglomeration on the CPU, one threshold at a time.
pub(crate) struct CpuEngine {
    thresholds: Vec<f64>,
    merge_history: bool,
    want_region_graph: bool,
    merging: IterativeMerging,
    /// Dense node ids per voxel, `(z, y, x)`; dropped by the first
    /// threshold relabelled in place (later ones read the caller's volume).
    dense: Option<Array3<u32>>,
    /// From a caller's label back to its dense id, made when `dense` is
    /// dropped.
    index: Option<LabelIndex>,
    /// Dense id to original label.
    original: Vec<u64>,
    /// The contingency table of (ground truth, fragment) pairs, built once:
    /// a segmentation's table is this one with every fragment replaced by
    /// its region, the same integer counts as from the voxels, in far
    /// fewer steps.
    fragment_table: Option<gpu_waterz_eval::ContingencyTable>,
    next: usize,
    /// The volume's shape.
    dims: Dims3,
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
            dense: Some(dense),
            index: None,
            original: labels.original,
            fragment_table,
            next: 0,
            dims,
            timings,
            n_fragments: n_nodes.saturating_sub(1),
        })
    }

    /// Merges up to the next threshold and returns its result, or `None`
    /// after the last threshold.
    /// The fragments (the watershed's, or the configured ones) in the
    /// caller's ids.
    pub(crate) fn fragments(&self) -> Result<Array3<u64>> {
        let dense = self.dense()?;
        Ok(ndarray::Zip::from(dense).par_map_collect(|&d| self.original[d as usize]))
    }

    /// The per-voxel dense ids, while they are kept.
    fn dense(&self) -> Result<&Array3<u32>> {
        self.dense.as_ref().ok_or_else(|| {
            crate::Error::new(
                crate::ErrorKind::InvalidInput,
                "this run relabels its segmentation in place since its first threshold: keep calling \
                 next_threshold_in_place",
            )
        })
    }

    /// Merges up to the next threshold; its regions (the caller's label of
    /// every dense id's region), its threshold and the merges made, or
    /// `None` after the last threshold.
    fn advance(&mut self) -> Option<(f64, Vec<u64>, Option<Vec<Merge>>)> {
        let &threshold = self.thresholds.get(self.next)?;
        self.next += 1;
        let t = Instant::now();
        let mut history = self.merge_history.then(Vec::new);
        self.merging.merge_until(threshold as f32, history.as_mut());
        self.timings.merging_s += t.elapsed().as_secs_f64();
        // The root of every dense id, mapped back to the original labels.
        let n_nodes = self.original.len();
        let roots: Vec<u64> =
            (0..n_nodes as u64).map(|id| self.original[self.merging.region_of(id) as usize]).collect();
        Some((threshold, roots, history))
    }

    pub(crate) fn next_threshold(&mut self) -> Result<Option<ThresholdResult>> {
        self.dense()?;
        let Some((threshold, roots, history)) = self.advance() else {
            return Ok(None);
        };
        let t = Instant::now();
        let dense = self.dense()?;
        let segmentation = ndarray::Zip::from(dense).par_map_collect(|&d| roots[d as usize]);
        self.timings.extraction_s += t.elapsed().as_secs_f64();
        let r = self.extras(threshold, &roots, history)?;
        Ok(Some(ThresholdResult {
            threshold,
            segmentation,
            metrics: r.metrics,
            merge_history: r.merge_history,
            region_graph: r.region_graph,
        }))
    }

    /// Merges up to the next threshold and relabels `segmentation` to it in
    /// place, as waterz does: the first call overwrites it with the
    /// fragments' regions (its contents are not read) and drops the
    /// per-voxel copy of the fragments; every later call reads it, so it
    /// must hold the previous threshold's segmentation (a label that is no
    /// fragment of this run is an error).
    pub(crate) fn next_threshold_in_place(
        &mut self,
        mut segmentation: ArrayViewMut3<'_, u64>,
    ) -> Result<Option<InPlaceResult>> {
        let Some((threshold, roots, history)) = self.advance() else {
            return Ok(None);
        };
        let t = Instant::now();
        match self.dense.take() {
            Some(dense) => {
                ndarray::Zip::from(&mut segmentation).and(&dense).par_for_each(|s, &d| *s = roots[d as usize]);
                drop(dense);
                self.index = Some(LabelIndex::new(&self.original, segmentation.len()));
            }
            None => {
                let index = self.index.as_ref().expect("made when the dense ids were dropped");
                let unknown = std::sync::atomic::AtomicU64::new(u64::MAX);
                let relabel = |s: &mut u64| match index.dense_id(&self.original, *s) {
                    Some(d) => *s = roots[d as usize],
                    None => {
                        unknown.store(*s, std::sync::atomic::Ordering::Relaxed);
                    }
                };
                ndarray::Zip::from(&mut segmentation).par_for_each(relabel);
                let unknown = unknown.into_inner();
                if unknown != u64::MAX {
                    return Err(crate::Error::new(
                        crate::ErrorKind::InvalidInput,
                        format!(
                            "the volume relabelled in place holds label {unknown}, which is no fragment of this \
                             run: it must be the previous threshold's segmentation"
                        ),
                    ));
                }
            }
        }
        self.timings.extraction_s += t.elapsed().as_secs_f64();
        self.extras(threshold, &roots, history).map(Some)
    }

    /// A threshold's metrics, merge history and region graph, in the
    /// caller's ids.
    fn extras(&mut self, threshold: f64, roots: &[u64], history: Option<Vec<Merge>>) -> Result<InPlaceResult> {
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
        Ok(InPlaceResult { threshold, metrics, merge_history, region_graph })
    }

    pub(crate) fn dims(&self) -> Dims3 {
        self.dims
    }

    pub(crate) fn timings(&self) -> &StageTimings {
        &self.timings
    }

    pub(crate) fn n_fragments(&self) -> u64 {
        self.n_fragments
    }
}

/// From a caller's label (a fragment's original id; every region carries
/// one) back to its dense id: a table indexed by label when the labels are
/// small (as the watershed's `1..=n` are), else a search of the sorted
/// originals.
enum LabelIndex {
    /// `table[label]` is the dense id, `u32::MAX` for no fragment.
    Table(Vec<u32>),
    /// `original` is searched.
    Sorted,
}

impl LabelIndex {
    fn new(original: &[u64], n_voxels: usize) -> Self {
        let max = original.last().copied().unwrap_or(0);
        let bound = (n_voxels as u64).saturating_mul(4).max(1 << 20);
        if max >= bound {
            return Self::Sorted;
        }
        let mut table = vec![u32::MAX; max as usize + 1];
        for (k, &label) in original.iter().enumerate() {
            table[label as usize] = k as u32;
        }
        Self::Table(table)
    }

    fn dense_id(&self, original: &[u64], label: u64) -> Option<u32> {
        match self {
            Self::Table(table) => table.get(label as usize).copied().filter(|&d| d != u32::MAX),
            Self::Sorted => original.binary_search(&label).ok().map(|d| d as u32),
        }
    }
}
