//! The GPU pipeline: watershed, region graph and ParHAC on the device.
//!
//! The affinities are uploaded once (or are already on the device, see
//! [`Agglomeration::new`]); fragments, the region graph and the merge
//! forest stay there; only the segmentations asked for come back
//! ([`Agglomeration::next_threshold`]), or stay on the device too
//! ([`Agglomeration::next_threshold_on_device`]).
//!
//! Scores use exact integer statistics (the reference's
//! [`Arithmetic::Exact`](gpu_waterz_core::Arithmetic::Exact) mode); at
//! ε = 0 (the default) ParHAC merges exactly as waterz's serial order on
//! tie-free input.
//!
//! ```no_run
//! use gpu_waterz::cpu::Options;
//! use gpu_waterz::gpu::Agglomeration;
//! use gpu_waterz_core::AffinityGraph;
//! use gpu_waterz_runtime::Gpu;
//! use ndarray::Array4;
//!
//! let gpu = Gpu::new(0)?;
//! let affs = Array4::<f32>::from_elem((3, 16, 64, 64), 0.5);
//! let affs = AffinityGraph::from_f32(affs.view())?;
//! let mut run = Agglomeration::from_host(&gpu, &affs, None, None, &Options::new(&[0.3, 0.5])?, 0.0)?;
//! while let Some(result) = run.next_threshold()? {
//!     println!("{}: {} voxels", result.threshold, result.segmentation.len());
//! }
//! # Ok::<(), gpu_waterz::Error>(())
//! ```

use crate::cpu::{Options, StageTimings, ThresholdResult};
use crate::Error;
use gpu_waterz_core::{check_volume_shape, AffinityGraph, AffinityValues, Dims3, ScoringFunction};
use gpu_waterz_graph::DenseLabels;
use gpu_waterz_parhac::gpu::{GpuParhac, GpuRoundInfo};
use gpu_waterz_parhac::{Merge, ScoredEdge};
use gpu_waterz_runtime::{DeviceAffinities, DeviceBuffer, Gpu};
use ndarray::{Array3, ArrayView3, ArrayView4};
use std::time::Instant;

/// Device bytes per voxel that the watershed and the region graph need
/// beyond the affinities, as measured on the H200 (about 13.5 for the
/// watershed's buffers; 4 for the fragments plus 32 per face entry, about
/// 0.4 entries per voxel on CNN-like data, for the region graph).
pub const WORKING_BYTES_PER_VOXEL: u64 = 18;

/// The device memory a decode of `n_voxels` needs besides resident
/// affinities of `affinity_bytes` (0 when they are on the device already).
pub fn bytes_needed(n_voxels: u64, affinity_bytes: u64) -> u64 {
    affinity_bytes + WORKING_BYTES_PER_VOXEL * n_voxels
}

/// The merge history and the region graph of one threshold, when asked for.
type Extras = (Option<Vec<Merge>>, Option<Vec<ScoredEdge>>);

/// One threshold's result with the segmentation still on the device.
#[derive(Debug)]
pub struct DeviceThresholdResult {
    /// The threshold.
    pub threshold: f64,
    /// One uint64 id per voxel, C order; 0 is background.
    pub segmentation: DeviceBuffer<u64>,
    /// The merges since the previous threshold, when asked for.
    pub merge_history: Option<Vec<Merge>>,
    /// The remaining region graph, when asked for.
    pub region_graph: Option<Vec<ScoredEdge>>,
}

/// waterz's agglomeration on the GPU, one threshold at a time.
pub struct Agglomeration<'g> {
    gpu: &'g Gpu,
    options: Options,
    fragments: DeviceBuffer<u32>,
    dims: Dims3,
    /// Dense id to user fragment id, when the user gave fragments.
    original: Option<Vec<u64>>,
    parhac: GpuParhac<'g>,
    ground_truth: Option<Array3<u64>>,
    next: usize,
    timings: StageTimings,
    n_fragments: u64,
    n_edges: u64,
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// The values of `v` in C order, borrowed when they already are.
fn contiguous<'a, T: Copy>(v: &'a ArrayView4<'_, T>) -> std::borrow::Cow<'a, [T]> {
    match v.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(v.iter().copied().collect()),
    }
}

/// Checks what the GPU backend supports, before anything is uploaded.
fn check_options(options: &Options, epsilon: f64) -> Result<(), Error> {
    if !epsilon.is_finite() || epsilon < 0.0 {
        return Err(gpu_waterz_core::CoreError::Epsilon(epsilon).into());
    }
    if options.scoring != ScoringFunction::MeanAffinity {
        return Err(Error::Unsupported(format!(
            "the GPU backend scores edges by their mean affinity only, not {}; use the CPU backend for other scoring functions",
            options.scoring.waterz_name()
        )));
    }
    if options.discretize_queue != 0 {
        return Err(Error::Unsupported(
            "discretize_queue selects waterz's binned serial queue; the GPU backend merges exactly in parallel rounds (leave it 0, or use the CPU backend)".into(),
        ));
    }
    Ok(())
}

impl<'g> Agglomeration<'g> {
    /// Uploads host affinities, then runs [`Agglomeration::new`]. Fails
    /// before any allocation when the device's free memory is short of
    /// [`bytes_needed`].
    pub fn from_host(
        gpu: &'g Gpu,
        affs: &AffinityGraph<'_>,
        fragments: Option<ArrayView3<'_, u64>>,
        ground_truth: Option<Array3<u64>>,
        options: &Options,
        epsilon: f64,
    ) -> Result<Self, Error> {
        check_options(options, epsilon)?;
        let dims = affs.dims();
        let n = affs.n_voxels();
        let affinity_bytes = match affs.values() {
            AffinityValues::F32(_) => 12 * n,
            AffinityValues::U8(_) => 3 * n,
        };
        gpu.check_free_memory(bytes_needed(n, affinity_bytes), &format!("decoding {n} voxels on the GPU"))?;
        let device = match affs.values() {
            AffinityValues::F32(v) => DeviceAffinities::upload_f32(gpu, &contiguous(v), dims)?,
            AffinityValues::U8(v) => DeviceAffinities::upload_u8(gpu, &contiguous(v), dims)?,
        };
        Self::new(gpu, &device, fragments, ground_truth, options, epsilon)
    }

    /// Runs the watershed (or takes `fragments`) and builds the region
    /// graph of affinities already on the device; merging starts with the
    /// first threshold. The affinities may be dropped afterwards.
    pub fn new(
        gpu: &'g Gpu,
        affs: &DeviceAffinities,
        fragments: Option<ArrayView3<'_, u64>>,
        ground_truth: Option<Array3<u64>>,
        options: &Options,
        epsilon: f64,
    ) -> Result<Self, Error> {
        check_options(options, epsilon)?;
        let dims = affs.dims();
        let n = affs.n_voxels();
        if let Some(f) = &fragments {
            check_volume_shape("fragments", f.shape(), dims)?;
        }
        if let Some(g) = &ground_truth {
            check_volume_shape("ground truth", g.shape(), dims)?;
        }
        gpu.check_free_memory(bytes_needed(n, 0), &format!("decoding {n} voxels on the GPU"))?;
        let mut timings = StageTimings::default();
        let t = Instant::now();
        let (labels, n_fragments, original) = match fragments {
            None => {
                let f = gpu_waterz_watershed::gpu::watershed(gpu, affs, options.watershed)?;
                (f.labels, f.n_fragments, None)
            }
            Some(f) => {
                let dense = DenseLabels::new(f);
                let n_fragments = dense.n_nodes() - 1;
                if n_fragments >= u32::MAX as u64 {
                    return Err(Error::Unsupported(format!(
                        "the GPU backend takes fewer than 2^32 - 1 fragments, not {n_fragments}"
                    )));
                }
                let ids: Vec<u32> = dense.dense.iter().map(|&d| d as u32).collect();
                (gpu.upload(&ids)?, n_fragments, Some(dense.original))
            }
        };
        gpu.synchronize()?;
        timings.watershed_s = if original.is_none() { secs(t) } else { 0.0 };
        let t = Instant::now();
        let graph = gpu_waterz_graph::gpu::region_graph(gpu, affs, &labels, n_fragments)?;
        let n_edges = graph.n_edges;
        let parhac = GpuParhac::new(gpu, graph, n_fragments + 1, epsilon, options.merge_history)?;
        gpu.synchronize()?;
        timings.region_graph_s = secs(t);
        tracing::debug!(n_fragments, n_edges, "GPU region graph ready");
        Ok(Self {
            gpu,
            options: options.clone(),
            fragments: labels,
            dims,
            original,
            parhac,
            ground_truth,
            next: 0,
            timings,
            n_fragments,
            n_edges,
        })
    }

    /// Merges up to the next threshold; returns it and where its merges
    /// start in the history, or `None` after the last threshold.
    fn advance(&mut self) -> Result<Option<(f64, u64)>, Error> {
        let Some(&threshold) = self.options.thresholds.values().get(self.next) else {
            return Ok(None);
        };
        self.next += 1;
        let history_start = self.parhac.history_len();
        let t = Instant::now();
        self.parhac.merge_until(threshold as f32)?;
        self.timings.merging_s += secs(t);
        Ok(Some((threshold, history_start)))
    }

    fn n_voxels(&self) -> u64 {
        self.dims.z * self.dims.y * self.dims.x
    }

    /// A fragment or region id as the caller knows it.
    fn original_id(&self, id: u64) -> u64 {
        self.original.as_ref().map_or(id, |o| o[id as usize])
    }

    /// The merge history since `history_start` and the region graph, when
    /// asked for, in the caller's ids.
    fn extras(&self, history_start: u64) -> Result<Extras, Error> {
        let map = |id: u64| self.original_id(id);
        let merge_history = if self.options.merge_history {
            let merges = self.parhac.history_since(history_start)?;
            Some(merges.into_iter().map(|m| Merge { a: map(m.a), b: map(m.b), c: map(m.c), score: m.score }).collect())
        } else {
            None
        };
        let region_graph = if self.options.region_graph {
            let edges = self.parhac.region_graph()?;
            Some(edges.into_iter().map(|e| ScoredEdge { u: map(e.u), v: map(e.v), score: e.score }).collect())
        } else {
            None
        };
        Ok((merge_history, region_graph))
    }

    /// Merges up to the next threshold; returns it and its segmentation as
    /// dense u32 region ids (C order) on the device, or `None` after the
    /// last. With user fragments the ids are dense fragment ids, not the
    /// user's (see [`Agglomeration::next_threshold_device`]).
    pub fn next_threshold_on_device(&mut self) -> Result<Option<(f64, DeviceBuffer<u32>)>, Error> {
        let Some((threshold, _)) = self.advance()? else {
            return Ok(None);
        };
        let t = Instant::now();
        let segmentation = self.parhac.segmentation(&self.fragments, self.n_voxels())?;
        self.timings.extraction_s += secs(t);
        Ok(Some((threshold, segmentation)))
    }

    /// Merges up to the next threshold; returns its result with the
    /// segmentation left on the device, as waterz's uint64 ids (the user's
    /// fragment ids when fragments were given), or `None` after the last.
    pub fn next_threshold_device(&mut self) -> Result<Option<DeviceThresholdResult>, Error> {
        let Some((threshold, history_start)) = self.advance()? else {
            return Ok(None);
        };
        let t = Instant::now();
        let roots = self.gpu.download(&self.parhac.roots()?)?;
        let table: Vec<u64> = roots.iter().map(|&r| self.original_id(r as u64)).collect();
        let table = self.gpu.upload(&table)?;
        let segmentation =
            gpu_waterz_runtime::ops::parhac::segment_u64(self.gpu, &self.fragments, self.n_voxels(), &table)?;
        let (merge_history, region_graph) = self.extras(history_start)?;
        self.timings.extraction_s += secs(t);
        Ok(Some(DeviceThresholdResult { threshold, segmentation, merge_history, region_graph }))
    }

    /// Merges up to the next threshold and returns its result, downloaded
    /// (as the CPU backend's), or `None` after the last threshold.
    pub fn next_threshold(&mut self) -> Result<Option<ThresholdResult>, Error> {
        let Some((threshold, history_start)) = self.advance()? else {
            return Ok(None);
        };
        let t = Instant::now();
        let labels = self.gpu.download(&self.parhac.segmentation(&self.fragments, self.n_voxels())?)?;
        let n = self.n_voxels() as usize;
        let values: Vec<u64> = labels[..n].iter().map(|&l| self.original_id(l as u64)).collect();
        let shape = (self.dims.z as usize, self.dims.y as usize, self.dims.x as usize);
        let segmentation = Array3::from_shape_vec(shape, values).expect("one label per voxel");
        let (merge_history, region_graph) = self.extras(history_start)?;
        self.timings.extraction_s += secs(t);
        let metrics = self.evaluate(&segmentation)?;
        Ok(Some(ThresholdResult { threshold, segmentation, metrics, merge_history, region_graph }))
    }

    /// waterz's metrics of `segmentation` against the ground truth given at
    /// the start (`None` without one), computed on the host.
    pub fn evaluate(&mut self, segmentation: &Array3<u64>) -> Result<Option<gpu_waterz_eval::Metrics>, Error> {
        let t = Instant::now();
        let metrics = match &self.ground_truth {
            Some(gt) => Some(gpu_waterz_eval::evaluate(segmentation.view(), gt.view())?),
            None => None,
        };
        self.timings.evaluation_s += secs(t);
        Ok(metrics)
    }

    /// Whether a ground truth was given at the start.
    pub fn has_ground_truth(&self) -> bool {
        self.ground_truth.is_some()
    }

    /// Downloads a device segmentation as a host volume.
    pub fn download(&self, segmentation: &DeviceBuffer<u64>) -> Result<Array3<u64>, Error> {
        let mut values = self.gpu.download(segmentation)?;
        values.truncate(self.n_voxels() as usize);
        let shape = (self.dims.z as usize, self.dims.y as usize, self.dims.x as usize);
        Ok(Array3::from_shape_vec(shape, values).expect("one label per voxel"))
    }

    /// Time spent so far, per stage.
    pub fn timings(&self) -> &StageTimings {
        &self.timings
    }

    /// The ParHAC rounds run so far.
    pub fn rounds(&self) -> &[GpuRoundInfo] {
        self.parhac.rounds()
    }

    /// The compactions of ParHAC's edge slots so far.
    pub fn n_compactions(&self) -> u64 {
        self.parhac.n_compactions()
    }

    /// The number of fragments.
    pub fn n_fragments(&self) -> u64 {
        self.n_fragments
    }

    /// The number of region-graph edges before merging.
    pub fn n_edges(&self) -> u64 {
        self.n_edges
    }
}
