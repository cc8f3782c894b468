//! The contingency table on the GPU: every voxel's `(ground truth,
//! segment)` pair packed into a 64-bit key, sorted (radix sort) and reduced
//! by key with integer counts, a chunk of voxels at a time; only the table
//! (one entry per distinct pair) comes to the host, where
//! [`metrics_from_table`] computes the metrics.
//! The table is the one [`contingency`](crate::contingency) builds from
//! the same volumes, entry for entry, so the metrics are the CPU
//! evaluation's bit for bit.

use crate::{metrics_from_table, EvalError, Metrics};
use gpu_waterz_runtime::primitives::{digit_shifts, pack_u32_pairs, radix_sort_pairs, reduce_by_key};
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
    /// Uploads `labels` (one per voxel, in the segmentation's order).
    /// Fails with more than `u32::MAX` distinct labels.
    pub fn upload(gpu: &Gpu, labels: &[u64]) -> Result<Self, EvalError> {
        let max = labels.par_iter().copied().max().unwrap_or(0);
        let (dense, original): (Vec<u32>, Option<Vec<u64>>) = if max <= u32::MAX as u64 {
            (labels.par_iter().map(|&l| l as u32).collect(), None)
        } else {
            let mut ids: Vec<u64> = labels.par_iter().copied().filter(|&l| l != 0).collect();
            ids.par_sort_unstable();
            ids.dedup();
            if ids.len() as u64 >= u32::MAX as u64 {
                return Err(EvalError::TooManyLabels { n_labels: ids.len() as u64 });
            }
            let index: HashMap<u64, u32> = ids.iter().enumerate().map(|(i, &l)| (l, i as u32 + 1)).collect();
            let dense = labels.par_iter().map(|l| if *l == 0 { 0 } else { index[l] }).collect();
            let mut original = vec![0];
            original.extend(ids);
            (dense, Some(original))
        };
        let bits = match &original {
            Some(o) => bits_of(o.len() as u64 - 1),
            None => bits_of(max),
        };
        Ok(Self { labels: gpu.upload(&dense).map_err(EvalError::Gpu)?, original, n_voxels: labels.len() as u64, bits })
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
/// `segment_id` maps an id to the segment's label. Sorts `chunk_voxels` at
/// a time ([`DEFAULT_CHUNK_VOXELS`] bounds the device memory).
pub fn contingency_on_gpu(
    gpu: &Gpu,
    segmentation: &DeviceBuffer<u32>,
    segment_bound: u64,
    segment_id: &(dyn Fn(u32) -> u64 + Sync),
    ground_truth: &DeviceGroundTruth,
    chunk_voxels: u64,
) -> Result<HashMap<(u64, u64), u64>, EvalError> {
    let n = ground_truth.n_voxels;
    if (segmentation.len() as u64) < n {
        return Err(EvalError::Gpu(RuntimeError::InvalidLaunch {
            kernel: "pack_u32_pairs",
            reason: format!("a segmentation of {} voxels for a ground truth of {n}", segmentation.len()),
        }));
    }
    let shifts = digit_shifts(bits_of(segment_bound.saturating_sub(1)), ground_truth.bits);
    let chunk = chunk_voxels.max(1);
    let mut table: HashMap<(u64, u64), u64> = HashMap::new();
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
            let g = key >> 32;
            if g == 0 {
                continue;
            }
            let s = key & u32::MAX as u64;
            if s >= segment_bound {
                return Err(EvalError::Gpu(RuntimeError::InvalidLaunch {
                    kernel: "pack_u32_pairs",
                    reason: format!("segment id {s} is not below the bound {segment_bound}"),
                }));
            }
            *table.entry((ground_truth.label(g), segment_id(s as u32))).or_insert(0) += count;
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
