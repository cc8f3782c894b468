//! The contingency table on the GPU: every voxel's `(ground truth,
//! segment)` pair packed into a 64-bit key, sorted (radix sort) and reduced
//! by key with integer counts, a chunk of voxels at a time; only the table
//! (one entry per distinct pair) comes to the host, where
//! [`metrics_from_table`] computes the metrics.
//! The table is the one [`contingency`](crate::contingency) builds from
//! the same volumes, entry for entry, so the metrics are the CPU
//! evaluation's bit for bit.

use crate::{metrics_from_table, ContingencyTable, EvalError, FastHash, Metrics};
use gpu_waterz_runtime::primitives::{
    count_u32_pairs, digit_shifts, narrow_u64_to_u32, pack_u32_pairs, radix_sort_pairs, reduce_by_key,
};
use gpu_waterz_runtime::{DeviceBuffer, Gpu, RuntimeError};
use rayon::prelude::*;
use std::collections::HashMap;

/// Voxels sorted at once: the sort's scratch is about 40 bytes a voxel, so
/// a chunk takes about 1.3 GB of device memory whatever the volume.
pub const DEFAULT_CHUNK_VOXELS: u64 = 1 << 25;

/// A ground truth on the device, as u32 labels (0 ignored): its own labels
/// when they all fit u32, else dense ids `1..=k` in the order of the
/// labels, mapped back when the table is read.
#[derive(Debug)]
pub struct DeviceGroundTruth {
    labels: DeviceBuffer<u32>,
    /// The label of each dense id, when the labels were renumbered.
    original: Option<Vec<u64>>,
    n_voxels: u64,
    /// Bits of the largest (dense) label.
    bits: u32,
}

/// Bits needed for `x` (0 for 0).
fn bits_of(x: u64) -> u32 {
    64 - x.leading_zeros()
}

impl DeviceGroundTruth {
    /// Uploads `labels` (one per voxel, in the segmentation's order): as
    /// they are, narrowed to u32 on the device (no host copy) when every
    /// label fits, else renumbered densely on the host first. Fails with
    /// more than `u32::MAX` distinct labels.
    pub fn upload(gpu: &Gpu, labels: &[u64]) -> Result<Self, EvalError> {
        let device = gpu.upload(labels).map_err(EvalError::Gpu)?;
        if let Some(narrow) = Self::from_device(gpu, &device)? {
            return Ok(narrow);
        }
        drop(device);
        let mut ids: Vec<u64> = labels.par_iter().copied().filter(|&l| l != 0).collect();
        ids.par_sort_unstable();
        ids.dedup();
        if ids.len() as u64 >= u32::MAX as u64 {
            return Err(EvalError::TooManyLabels { n_labels: ids.len() as u64 });
        }
        let index: HashMap<u64, u32, FastHash> = ids.iter().enumerate().map(|(i, &l)| (l, i as u32 + 1)).collect();
        let dense: Vec<u32> = labels.par_iter().map(|l| if *l == 0 { 0 } else { index[l] }).collect();
        let mut original = vec![0];
        original.extend(ids);
        let bits = bits_of(original.len() as u64 - 1);
        Ok(Self {
            labels: gpu.upload(&dense).map_err(EvalError::Gpu)?,
            original: Some(original),
            n_voxels: labels.len() as u64,
            bits,
        })
    }

    /// Takes labels already on the device (one u64 per voxel), narrowed to
    /// u32 there; `None` when a label exceeds `u32::MAX` (then download them
    /// and use [`DeviceGroundTruth::upload`], which renumbers them).
    pub fn from_device(gpu: &Gpu, labels: &DeviceBuffer<u64>) -> Result<Option<Self>, EvalError> {
        let (narrow, max) = narrow_u64_to_u32(gpu, labels).map_err(EvalError::Gpu)?;
        if max > u32::MAX as u64 {
            return Ok(None);
        }
        Ok(Some(Self { labels: narrow, original: None, n_voxels: labels.len() as u64, bits: bits_of(max) }))
    }

    /// The number of voxels.
    pub fn n_voxels(&self) -> u64 {
        self.n_voxels
    }

    fn label(&self, dense: u64) -> u64 {
        self.original.as_ref().map_or(dense, |o| o[dense as usize])
    }
}

/// The contingency table of `(ground truth, segment)` over the voxels with
/// a ground-truth label (not 0), as [`contingency`](crate::contingency)
/// gives it: `segmentation` holds one u32 id per voxel (the first
/// `ground_truth.n_voxels()` elements), every id below `segment_bound`, and
/// `segment_id` maps an id to the segment's label. The pairs are counted in
/// one pass through a hash table on the device (a few slots per segment,
/// then 8 times more if those did not suffice); when that still does not
/// suffice, or the memory is not there, they are sorted `chunk_voxels` at a
/// time ([`DEFAULT_CHUNK_VOXELS`] bounds the device memory) and reduced by
/// key. Either way the counts are exact integers.
pub fn contingency_on_gpu(
    gpu: &Gpu,
    segmentation: &DeviceBuffer<u32>,
    segment_bound: u64,
    segment_id: &(dyn Fn(u32) -> u64 + Sync),
    ground_truth: &DeviceGroundTruth,
    chunk_voxels: u64,
) -> Result<ContingencyTable, EvalError> {
    let n = ground_truth.n_voxels;
    if (segmentation.len() as u64) < n {
        return Err(EvalError::Gpu(RuntimeError::InvalidLaunch {
            kernel: "pack_u32_pairs",
            reason: format!("a segmentation of {} voxels for a ground truth of {n}", segmentation.len()),
        }));
    }
    let mut table = ContingencyTable::default();
    let add = |table: &mut ContingencyTable, key: u64, count: u64| -> Result<(), EvalError> {
        let g = key >> 32;
        if g == 0 {
            return Ok(());
        }
        let s = key & u32::MAX as u64;
        if s >= segment_bound {
            return Err(EvalError::Gpu(RuntimeError::InvalidLaunch {
                kernel: "count_u32_pairs",
                reason: format!("segment id {s} is not below the bound {segment_bound}"),
            }));
        }
        *table.entry((ground_truth.label(g), segment_id(s as u32))).or_insert(0) += count;
        Ok(())
    };
    // The table in one pass through a hash table on the device, sized for
    // a few ground-truth labels per segment; a larger one if that was too
    // small; past that (or when the memory would not be there), sort.
    let distinct_bound = n.max(1);
    let mut capacity = (4 * segment_bound.max(1024)).min(2 * distinct_bound);
    for _ in 0..2 {
        let free = gpu.memory_info().map(|(free, _)| free).unwrap_or(0);
        if capacity.saturating_mul(32) > free {
            break;
        }
        let started = std::time::Instant::now();
        if let Some(pairs) = count_u32_pairs(gpu, &ground_truth.labels, segmentation, 0, n, capacity)? {
            let counted = started.elapsed();
            let n_pairs = pairs.len();
            table.reserve(n_pairs);
            for (key, count) in pairs {
                add(&mut table, key, count)?;
            }
            tracing::debug!(n_pairs, capacity, ?counted, tabled = ?started.elapsed(), "contingency table by hashing on the GPU");
            return Ok(table);
        }
        tracing::debug!(capacity, "the contingency table overflowed its hash table");
        capacity = (capacity * 8).min(2 * distinct_bound);
    }
    let shifts = digit_shifts(bits_of(segment_bound.saturating_sub(1)), ground_truth.bits);
    let chunk = chunk_voxels.max(1);
    let mut start = 0;
    while start < n {
        let len = chunk.min(n - start);
        let keys = pack_u32_pairs(gpu, &ground_truth.labels, segmentation, start, len)?;
        let values = gpu.zeros::<u64>(len as usize)?;
        let (keys, values) = radix_sort_pairs(gpu, keys, values, len, &shifts)?;
        let runs = reduce_by_key(gpu, &keys, &values, len)?;
        drop((keys, values));
        let run_keys = gpu.download_prefix(&runs.keys, runs.n_runs as usize)?;
        let counts = gpu.download_prefix(&runs.counts, runs.n_runs as usize)?;
        for (key, count) in run_keys.into_iter().zip(counts) {
            add(&mut table, key, count)?;
        }
        start += len;
    }
    Ok(table)
}

/// waterz's metrics of a device segmentation (see [`contingency_on_gpu`])
/// against a device ground truth: the CPU evaluation's values, bit for bit.
pub fn evaluate_on_gpu(
    gpu: &Gpu,
    segmentation: &DeviceBuffer<u32>,
    segment_bound: u64,
    segment_id: &(dyn Fn(u32) -> u64 + Sync),
    ground_truth: &DeviceGroundTruth,
) -> Result<Metrics, EvalError> {
    let table = contingency_on_gpu(gpu, segmentation, segment_bound, segment_id, ground_truth, DEFAULT_CHUNK_VOXELS)?;
    metrics_from_table(&table)
}
