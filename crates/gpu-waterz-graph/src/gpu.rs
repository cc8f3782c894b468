//! The region graph on the GPU: boundary faces, aggregated per warp of 32
//! consecutive voxels into `(u << 32 | v, count and fixed-point sum)`
//! entries, a radix sort by key, a reduce-by-key with integer sums. Edges
//! come out sorted by `(u, v)` (waterz's order) with exactly the statistics
//! of [`crate::RegionGraph::contact_stats`]: the entries' order varies
//! between runs, but integer sums do not depend on it, so every run gives
//! the same bytes.

use crate::GraphError;
use gpu_waterz_core::ContactStats;
use gpu_waterz_runtime::ops::graph::aggregated_faces;
use gpu_waterz_runtime::ops::primitives::{digit_shifts, radix_sort_pairs, reduce_packed_by_key};
use gpu_waterz_runtime::{DeviceAffinities, DeviceBuffer, Gpu, StageTimer};

/// A region graph in device memory.
#[derive(Debug)]
pub struct DeviceRegionGraph {
    /// Edge keys `u << 32 | v`, `u < v`, ascending.
    pub edge_keys: DeviceBuffer<u64>,
    /// Contact count per edge.
    pub contact_counts: DeviceBuffer<u64>,
    /// Fixed-point affinity sum per edge.
    pub affinity_sums: DeviceBuffer<u64>,
    /// The number of edges.
    pub n_edges: u64,
    /// The number of warp-aggregated face entries that were sorted.
    pub n_entries: u64,
}

/// A region graph downloaded to the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRegionGraph {
    /// Edges `[u, v]`, `u < v`, sorted.
    pub edges: Vec<[u64; 2]>,
    /// Their statistics.
    pub stats: Vec<ContactStats>,
}

impl DeviceRegionGraph {
    /// Copies the graph to the host.
    pub fn download(&self, gpu: &Gpu) -> Result<HostRegionGraph, GraphError> {
        let n = self.n_edges as usize;
        let keys = gpu.download(&self.edge_keys)?;
        let counts = gpu.download(&self.contact_counts)?;
        let sums = gpu.download(&self.affinity_sums)?;
        Ok(HostRegionGraph {
            edges: keys[..n].iter().map(|&k| [k >> 32, k & 0xFFFF_FFFF]).collect(),
            stats: (0..n).map(|e| ContactStats { contact_count: counts[e], affinity_sum: sums[e] }).collect(),
        })
    }
}

/// The region graph of device `labels` (u32, 0 = background, largest label
/// `max_label`) over `affs`; the result stays on the device.
pub fn region_graph(
    gpu: &Gpu,
    affs: &DeviceAffinities,
    labels: &DeviceBuffer<u32>,
    max_label: u64,
) -> Result<DeviceRegionGraph, GraphError> {
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    let (keys, values, n_entries) = aggregated_faces(gpu, labels, affs)?;
    timer.mark("face entries")?;
    let label_bits = 64 - max_label.leading_zeros();
    let (keys, values) = radix_sort_pairs(gpu, keys, values, n_entries, &digit_shifts(label_bits, label_bits))?;
    timer.mark("sort")?;
    let runs = reduce_packed_by_key(gpu, &keys, &values, n_entries)?;
    timer.mark("reduce")?;
    tracing::debug!(n_entries, n_edges = runs.n_runs, stages_ms = ?timer.stages(), max_used_bytes = timer.max_used_bytes(), "GPU region graph");
    Ok(DeviceRegionGraph {
        edge_keys: runs.keys,
        contact_counts: runs.counts,
        affinity_sums: runs.sums,
        n_edges: runs.n_runs,
        n_entries,
    })
}
