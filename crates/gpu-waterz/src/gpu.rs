//! The GPU engine: watershed, region graph and ParHAC on the device.
//!
//! The affinities are uploaded once (or are already on the device);
//! fragments, the region graph and the merge forest stay there; only the
//! segmentations asked for come back, or stay on the device too. Scores use
//! exact integer statistics; at ε = 0 ParHAC merges exactly as waterz's
//! serial order on tie-free input.

use crate::result::{DeviceThresholdResult, InPlaceResult, StageTimings, ThresholdResult};
use crate::{Config, Error, Merge, Result, ScoredEdge};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{check_volume_shape, AffinityGraph, AffinityValues, Dims3};
use gpu_waterz_eval::gpu::{contingency_on_gpu, DeviceGroundTruth, DEFAULT_CHUNK_VOXELS};
use gpu_waterz_graph::DenseLabels;
use gpu_waterz_parhac::gpu::{GpuParhac, GpuRoundInfo};
use gpu_waterz_runtime::{DeviceBuffer, Gpu};
use gpu_waterz_watershed::gpu::{DeviceAffinities, DeviceFragments};
use ndarray::{Array3, ArrayView3, ArrayView4};
use std::time::Instant;

/// Device bytes per voxel that the watershed and the region graph need
/// beyond the affinities, as measured on the H200 (about 13.5 for the
/// watershed's buffers; for the region graph 4 for the fragments and 32
/// per face entry, with room for one entry per 16 voxels first, while
/// CNN-like data make about one per 50).
pub const WORKING_BYTES_PER_VOXEL: u64 = 18;

/// The device memory a decode of `n_voxels` needs besides resident
/// affinities of `affinity_bytes` (0 when they are on the device already).
pub fn bytes_needed(n_voxels: u64, affinity_bytes: u64) -> u64 {
    affinity_bytes + WORKING_BYTES_PER_VOXEL * n_voxels
}

/// The block shape `(z, y, x)` for decoding a volume of `dims` in blocks
/// whose decode each needs at most `max_bytes` of device memory
/// ([`bytes_needed`] of the block grown by the region that the GPU's
/// blockwise steps read, 2 voxels on each side, with affinities of
/// `affinity_bytes_per_voxel`): the largest
/// cube, clipped to the volume, that fits; `None` when not even a block of
/// one voxel does.
pub fn block_shape_within(dims: [u64; 3], max_bytes: u64, affinity_bytes_per_voxel: u64) -> Option<[u64; 3]> {
    let need = |side: u64| {
        let voxels: u64 = dims.iter().map(|&d| (side.min(d) + 4).min(d.max(1))).product();
        bytes_needed(voxels, voxels.saturating_mul(affinity_bytes_per_voxel))
    };
    let largest = dims.iter().copied().max().unwrap_or(0).max(1);
    if need(1) > max_bytes {
        return None;
    }
    // The need grows with the side: the largest side that fits, by bisection.
    let (mut fits, mut too_large) = (1u64, largest + 1);
    while too_large - fits > 1 {
        let mid = fits + (too_large - fits) / 2;
        if need(mid) <= max_bytes {
            fits = mid;
        } else {
            too_large = mid;
        }
    }
    Some(dims.map(|d| fits.min(d).max(1)))
}

/// Fails with the bytes needed and free unless `gpu` has room for a decode
/// of `n_voxels` whose affinities, `affinity_bytes` of them, are still to
/// be put there (0 when they are on the device already).
pub fn check_fits(gpu: &Gpu, n_voxels: u64, affinity_bytes: u64) -> Result<()> {
    let needed = bytes_needed(n_voxels, affinity_bytes);
    // The error names the way to decode such a volume: in blocks.
    let what = format!(
        "decoding {n_voxels} voxels whole on the GPU (a device-memory cap, `--max-gpu-bytes` or \
         `max_gpu_bytes=`, decodes it in blocks)"
    );
    Ok(gpu.check_free_memory(needed, &what)?)
}

/// The merge history and the region graph of one threshold, when asked for.
type Extras = (Option<Vec<Merge>>, Option<Vec<ScoredEdge>>);

/// The ground truth: on the host until the first evaluation (after the
/// region graph, whose peak memory it would add to) turns it, on the GPU,
/// into the table of (ground truth, fragment) voxel counts that every
/// threshold's metrics come from.
enum GroundTruth {
    Host(Array3<u64>),
    /// Taken from device memory (narrowed to u32 there) when the pipeline
    /// started.
    Device(DeviceGroundTruth),
    FragmentTable(gpu_waterz_eval::ContingencyTable),
}

/// waterz's agglomeration on the GPU, one threshold at a time.
pub(crate) struct GpuEngine {
    gpu: Gpu,
    thresholds: Vec<f64>,
    merge_history: bool,
    want_region_graph: bool,
    fragments: DeviceFragments,
    dims: Dims3,
    /// Dense id to user fragment id, when the user gave fragments.
    original: Option<Vec<u64>>,
    parhac: GpuParhac,
    ground_truth: Option<GroundTruth>,
    next: usize,
    timings: StageTimings,
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

impl GpuEngine {
    /// Uploads host affinities, then runs [`GpuEngine::new`]. Fails before
    /// any allocation when the device's free memory is short of
    /// [`bytes_needed`].
    pub(crate) fn from_host(
        gpu: &Gpu,
        affs: &AffinityGraph<'_>,
        fragments: Option<ArrayView3<'_, u64>>,
        ground_truth: Option<crate::pipeline::LabelsView<'_>>,
        mut config: Config,
        thresholds: Vec<f64>,
    ) -> Result<Self> {
        let dims = affs.dims();
        let n = affs.n_voxels();
        // A borrowed ground truth is copied: it is uploaded later.
        if let Some(g) = ground_truth {
            check_volume_shape("ground truth", g.shape(), dims)?;
            config.ground_truth = Some(g.to_owned_u64());
        }
        let affinity_bytes = match affs.values() {
            AffinityValues::F32(_) => 12 * n,
            AffinityValues::U8(_) => 3 * n,
            _ => return Err(Error::unsupported("the GPU backend reads float32 or uint8 affinities")),
        };
        check_fits(gpu, n, affinity_bytes)?;
        let t = Instant::now();
        let device = match affs.values() {
            AffinityValues::F32(v) => DeviceAffinities::upload_f32(gpu, &contiguous(v), dims)?,
            AffinityValues::U8(v) => DeviceAffinities::upload_u8(gpu, &contiguous(v), dims)?,
            _ => return Err(Error::unsupported("the GPU backend reads float32 or uint8 affinities")),
        };
        gpu.synchronize()?;
        let upload_s = secs(t);
        let mut engine = Self::new(gpu, &device, fragments, config, thresholds)?;
        engine.timings.upload_s = upload_s;
        Ok(engine)
    }

    /// Runs the watershed (or takes the configured fragments) and builds
    /// the region graph of affinities on the device; merging starts with
    /// the first threshold. The affinities may be dropped afterwards.
    /// `fragments`, when given, take the place of the configured ones.
    pub(crate) fn new(
        gpu: &Gpu,
        affs: &DeviceAffinities,
        fragments: Option<ArrayView3<'_, u64>>,
        config: Config,
        thresholds: Vec<f64>,
    ) -> Result<Self> {
        let dims = affs.dims();
        let n = affs.n_voxels();
        let given = match &fragments {
            Some(f) => Some(f.view()),
            None => config.fragments.as_ref().map(|f| f.view()),
        };
        if let Some(f) = &given {
            check_volume_shape("fragments", f.shape(), dims)?;
        }
        if let Some(g) = &config.ground_truth {
            check_volume_shape("ground truth", g.shape(), dims)?;
        }
        check_fits(gpu, n, 0)?;
        let mut timings = StageTimings::default();
        let t = Instant::now();
        let (fragments, original) = match given {
            None => {
                let params = check_watershed_thresholds(config.aff_threshold_low, config.aff_threshold_high)?;
                (gpu_waterz_watershed::gpu::watershed(gpu, affs, params)?, None)
            }
            Some(f) => {
                let dense = DenseLabels::new(f)?;
                let n_fragments = dense.n_nodes() - 1;
                let labels = DeviceFragments::upload(gpu, &dense.dense, dims, n_fragments)?;
                (labels, Some(dense.original))
            }
        };
        gpu.synchronize()?;
        timings.watershed_s = if original.is_none() { secs(t) } else { 0.0 };
        let t = Instant::now();
        let edges = gpu_waterz_graph::gpu::region_graph(gpu, affs, &fragments)?;
        let n_edges = edges.n_edges();
        let parhac =
            GpuParhac::new(gpu, edges, config.epsilon, config.merge_history)?.with_host_finish(config.host_finish);
        gpu.synchronize()?;
        timings.region_graph_s = secs(t);
        tracing::debug!(n_fragments = fragments.n_fragments(), n_edges, "GPU region graph ready");
        Ok(Self {
            gpu: gpu.clone(),
            thresholds,
            merge_history: config.merge_history,
            want_region_graph: config.region_graph,
            fragments,
            dims,
            original,
            parhac,
            ground_truth: config.ground_truth.map(GroundTruth::Host),
            next: 0,
            timings,
            n_edges,
        })
    }

    /// As [`GpuEngine::new`], with the ground truth (one u64 label per
    /// voxel) on the device instead of in the configuration: it is read
    /// (narrowed to u32 on the device, or downloaded when a label does not
    /// fit) before this returns, and not needed afterwards.
    pub(crate) fn with_device_ground_truth(
        gpu: &Gpu,
        affs: &DeviceAffinities,
        device_ground_truth: Option<&DeviceBuffer<u64>>,
        mut config: Config,
        thresholds: Vec<f64>,
    ) -> Result<Self> {
        let mut from_device = None;
        if let Some(labels) = device_ground_truth {
            let n = affs.n_voxels();
            if labels.len() as u64 != n {
                return Err(Error::unsupported(format!(
                    "the ground truth holds {} labels for a volume of {n} voxels",
                    labels.len()
                )));
            }
            gpu.check_device(labels, "the ground truth")?;
            match DeviceGroundTruth::from_device(gpu, labels)? {
                Some(narrow) => from_device = Some(narrow),
                None => {
                    let d = affs.dims();
                    let host = gpu.download(labels)?;
                    let host = Array3::from_shape_vec((d.z as usize, d.y as usize, d.x as usize), host)
                        .expect("one label per voxel");
                    config = config.ground_truth(host);
                }
            }
        }
        let mut engine = Self::new(gpu, affs, None, config, thresholds)?;
        if let Some(narrow) = from_device {
            engine.ground_truth = Some(GroundTruth::Device(narrow));
        }
        Ok(engine)
    }

    /// Merges up to the next threshold; returns it and where its merges
    /// start in the history, or `None` after the last threshold.
    fn advance(&mut self) -> Result<Option<(f64, u64)>> {
        let Some(&threshold) = self.thresholds.get(self.next) else {
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

    pub(crate) fn dims(&self) -> Dims3 {
        self.dims
    }

    fn shape(&self) -> (usize, usize, usize) {
        (self.dims.z as usize, self.dims.y as usize, self.dims.x as usize)
    }

    /// A fragment or region id as the caller knows it.
    fn original_id(&self, id: u64) -> u64 {
        self.original.as_ref().map_or(id, |o| o[id as usize])
    }

    /// The merge history since `history_start` and the region graph, when
    /// asked for, in the caller's ids.
    fn extras(&self, history_start: u64) -> Result<Extras> {
        let map = |id: u64| self.original_id(id);
        let merge_history = if self.merge_history {
            let merges = self.parhac.history_since(history_start)?;
            Some(merges.into_iter().map(|m| Merge { a: map(m.a), b: map(m.b), c: map(m.c), score: m.score }).collect())
        } else {
            None
        };
        let region_graph = if self.want_region_graph {
            let edges = self.parhac.region_graph()?;
            Some(edges.into_iter().map(|e| ScoredEdge { u: map(e.u), v: map(e.v), score: e.score }).collect())
        } else {
            None
        };
        Ok((merge_history, region_graph))
    }

    /// Merges up to the next threshold; returns it and its segmentation as
    /// dense u32 region ids (C order) on the device, or `None` after the
    /// last. With user fragments the ids are dense fragment ids.
    pub(crate) fn next_threshold_dense(&mut self) -> Result<Option<(f64, DeviceBuffer<u32>)>> {
        let Some((threshold, _)) = self.advance()? else {
            return Ok(None);
        };
        let t = Instant::now();
        let segmentation = self.parhac.segmentation(&self.fragments)?;
        self.timings.extraction_s += secs(t);
        Ok(Some((threshold, segmentation)))
    }

    /// The device table from every fragment (dense id) to the caller's id
    /// of its region at the current threshold, and the regions themselves
    /// (one per node, as `GpuParhac::roots` gives them), downloaded.
    fn region_table(&self) -> Result<(DeviceBuffer<u64>, Vec<u32>)> {
        let roots = self.gpu.download(&self.parhac.roots()?)?;
        let table: Vec<u64> = roots.iter().map(|&r| self.original_id(r as u64)).collect();
        Ok((self.gpu.upload(&table)?, roots))
    }

    /// Merges up to the next threshold; returns its result with the
    /// segmentation left on the device, as waterz's uint64 ids.
    pub(crate) fn next_threshold_device(&mut self) -> Result<Option<DeviceThresholdResult>> {
        let Some((threshold, history_start)) = self.advance()? else {
            return Ok(None);
        };
        let t = Instant::now();
        let (table, roots) = self.region_table()?;
        let segmentation = gpu_waterz_parhac::gpu::segment_u64(&self.gpu, &self.fragments, &table)?;
        let (merge_history, region_graph) = self.extras(history_start)?;
        self.timings.extraction_s += secs(t);
        let metrics = self.evaluate(&roots)?;
        Ok(Some(DeviceThresholdResult { threshold, segmentation, metrics, merge_history, region_graph }))
    }

    /// Merges up to the next threshold and returns its result, downloaded:
    /// the voxels are relabelled to the caller's ids on the device and
    /// copied straight into the result (through page-locked staging).
    pub(crate) fn next_threshold(&mut self) -> Result<Option<ThresholdResult>> {
        let Some((threshold, history_start)) = self.advance()? else {
            return Ok(None);
        };
        let t = Instant::now();
        let (table, roots) = self.region_table()?;
        let segmentation = gpu_waterz_parhac::gpu::segment_u64(&self.gpu, &self.fragments, &table)?;
        self.gpu.synchronize()?;
        self.timings.extraction_s += secs(t);
        let t = Instant::now();
        let segmentation = self.download(&segmentation)?;
        self.timings.download_s += secs(t);
        let t = Instant::now();
        let (merge_history, region_graph) = self.extras(history_start)?;
        self.timings.extraction_s += secs(t);
        let metrics = self.evaluate(&roots)?;
        Ok(Some(ThresholdResult { threshold, segmentation, metrics, merge_history, region_graph }))
    }

    /// Merges up to the next threshold and downloads its segmentation into
    /// `segmentation` (whose contents are not read).
    pub(crate) fn next_threshold_in_place(
        &mut self,
        segmentation: ndarray::ArrayViewMut3<'_, u64>,
    ) -> Result<Option<InPlaceResult>> {
        let Some(result) = self.next_threshold_device()? else {
            return Ok(None);
        };
        let t = Instant::now();
        self.download_into(&result.segmentation, segmentation)?;
        self.timings.download_s += secs(t);
        Ok(Some(InPlaceResult::from(result)))
    }

    /// Downloads a device segmentation into a host volume of this run's
    /// shape (straight into it when it is contiguous).
    pub(crate) fn download_into(
        &self,
        segmentation: &DeviceBuffer<u64>,
        mut volume: ndarray::ArrayViewMut3<'_, u64>,
    ) -> Result<()> {
        check_volume_shape("the segmentation volume", volume.shape(), self.dims)?;
        match volume.as_slice_mut() {
            Some(flat) => self.gpu.download_to_slice(segmentation, flat)?,
            None => {
                let values = self.download(segmentation)?;
                volume.assign(&values);
            }
        }
        Ok(())
    }

    /// waterz's metrics of the segmentation whose fragments have the
    /// regions `roots` (one per node, as `GpuParhac::roots` gives them)
    /// against the configured ground truth (`None` without one). The first
    /// call builds the (ground truth, fragment) table on the GPU (sort and
    /// reduce-by-key over the volume, once); every threshold then maps it
    /// through its regions, as the CPU backend does, so the metrics are the
    /// CPU evaluation's bit for bit.
    fn evaluate(&mut self, roots: &[u32]) -> Result<Option<gpu_waterz_eval::Metrics>> {
        if let Some(GroundTruth::Host(gt)) = &self.ground_truth {
            let t = Instant::now();
            let gt = gt.as_standard_layout();
            let device = DeviceGroundTruth::upload(&self.gpu, gt.as_slice().expect("standard layout"))?;
            let host = self.ground_truth.replace(GroundTruth::Device(device));
            // Giving gigabytes back to the operating system takes it a
            // while: a thread of its own frees the host copy.
            std::thread::spawn(move || drop(host));
            self.timings.upload_s += secs(t);
        }
        if let Some(GroundTruth::Device(device)) = &self.ground_truth {
            let t = Instant::now();
            let bound = self.fragments.n_fragments() + 1;
            let labels = self.fragments.labels();
            let table = contingency_on_gpu(&self.gpu, labels, bound, &|f| f as u64, device, DEFAULT_CHUNK_VOXELS)?;
            self.ground_truth = Some(GroundTruth::FragmentTable(table));
            self.timings.evaluation_s += secs(t);
        }
        let t = Instant::now();
        let metrics = match &self.ground_truth {
            Some(GroundTruth::FragmentTable(table)) => {
                Some(gpu_waterz_eval::metrics_of_regions(table, |f| self.original_id(roots[f as usize] as u64))?)
            }
            _ => None,
        };
        tracing::debug!(seconds = secs(t), "metrics from the fragment table");
        self.timings.evaluation_s += secs(t);
        Ok(metrics)
    }

    /// The fragments (the watershed's, or the configured ones) in the
    /// caller's ids, downloaded.
    pub(crate) fn fragments(&self) -> Result<Array3<u64>> {
        let table: Vec<u64> = (0..=self.fragments.n_fragments()).map(|f| self.original_id(f)).collect();
        let table = self.gpu.upload(&table)?;
        let labels = gpu_waterz_parhac::gpu::segment_u64(&self.gpu, &self.fragments, &table)?;
        self.download(&labels)
    }

    /// Downloads a device segmentation as a host volume (through
    /// page-locked staging, straight into the volume's memory).
    pub(crate) fn download(&self, segmentation: &DeviceBuffer<u64>) -> Result<Array3<u64>> {
        let values = self.gpu.download_prefix(segmentation, self.n_voxels() as usize)?;
        Ok(Array3::from_shape_vec(self.shape(), values).expect("one label per voxel"))
    }

    pub(crate) fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub(crate) fn timings(&self) -> &StageTimings {
        &self.timings
    }

    pub(crate) fn rounds(&self) -> &[GpuRoundInfo] {
        self.parhac.rounds()
    }

    pub(crate) fn n_compactions(&self) -> u64 {
        self.parhac.n_compactions()
    }

    pub(crate) fn n_fragments(&self) -> u64 {
        self.fragments.n_fragments()
    }

    pub(crate) fn n_edges(&self) -> u64 {
        self.n_edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_shapes_fit_the_cap() {
        let dims = [100, 200, 300];
        let grown_need = |block: [u64; 3]| {
            let grown: u64 = (0..3).map(|a| (block[a] + 4).min(dims[a])).product();
            bytes_needed(grown, grown * 12)
        };
        for cap in [1_000, 30_000, 1 << 20, 1 << 24, 1 << 40] {
            let Some(block) = block_shape_within(dims, cap, 12) else {
                assert!(grown_need([1, 1, 1]) > cap, "{cap}");
                continue;
            };
            assert!(grown_need(block) <= cap, "{cap}: {block:?}");
            assert!(block.iter().zip(dims).all(|(&b, d)| (1..=d).contains(&b)));
            // A cube one voxel larger would not fit, unless the block is the volume.
            if block != dims {
                let side = block.iter().max().unwrap() + 1;
                assert!(grown_need(dims.map(|d| side.min(d))) > cap, "{cap}: {block:?}");
            }
        }
        assert_eq!(block_shape_within(dims, 1 << 40, 12), Some(dims));
        assert_eq!(block_shape_within(dims, 10, 12), None);
        assert_eq!(block_shape_within([1, 1, 1], 1 << 20, 12), Some([1, 1, 1]));
    }
}
