//! The region graph on the GPU: boundary faces, aggregated per tile of
//! 4,096 voxels into `(EdgeKey, count and fixed-point sum)` entries,
//! a radix sort by key, a reduce-by-key with integer sums. Edges come out
//! sorted by `(u, v)` (waterz's order) with exactly the statistics of
//! [`crate::RegionGraph::contact_stats`]: the entries' order varies between
//! runs, but integer sums do not depend on it, so every run gives the same
//! bytes. The result is a [`DeviceEdges`], the edge list that the GPU
//! ParHAC takes.

mod edges;
#[allow(unsafe_code)]
mod launch;

pub use edges::{validate_edges, DeviceEdges, EdgeEntries, HostRegionGraph, MAX_NODES};

use crate::GraphError;
use gpu_waterz_runtime::primitives::{digit_shifts, radix_sort_pairs, reduce_packed_by_key};
use gpu_waterz_runtime::{Gpu, StageTimer};
use gpu_waterz_watershed::gpu::{DeviceAffinities, DeviceFragments};

/// The region graph of `fragments` over `affs` (of the same extent); the
/// result stays on the device, over nodes `0..=n_fragments`.
pub fn region_graph(
    gpu: &Gpu,
    affs: &DeviceAffinities,
    fragments: &DeviceFragments,
) -> Result<DeviceEdges, GraphError> {
    affs.check_device(gpu)?;
    gpu.check_device(fragments.labels(), "the fragments")?;
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    let (keys, values, n_entries) = launch::aggregated_faces(gpu, fragments, affs)?;
    timer.mark("face entries")?;
    let max_label = fragments.n_fragments();
    let label_bits = 64 - max_label.leading_zeros();
    let (keys, values) = radix_sort_pairs(gpu, keys, values, n_entries, &digit_shifts(label_bits, label_bits))?;
    timer.mark("sort")?;
    let runs = reduce_packed_by_key(gpu, &keys, &values, n_entries)?;
    timer.mark("reduce")?;
    tracing::debug!(n_entries, n_edges = runs.n_runs, stages_ms = ?timer.stages(), max_used_bytes = timer.max_used_bytes(), "GPU region graph");
    Ok(DeviceEdges::from_region_graph(runs, max_label + 1, n_entries))
}
