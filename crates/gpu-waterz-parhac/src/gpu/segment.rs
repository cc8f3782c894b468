//! Regions and segmentations (the kernels of
//! `kernels-rs/src/parhac/segment.rs`): the roots of the merge forest, and
//! every voxel's fragment replaced by its region.

use super::launch;
use super::node_state::NodeState;
use crate::ParhacError;
use gpu_waterz_runtime::{DeviceBuffer, Gpu, Result};
use gpu_waterz_watershed::gpu::DeviceFragments;

/// The region of every node (the root of its merge tree; the forest of all
/// nodes is complete between thresholds).
pub(super) fn find_roots(gpu: &Gpu, state: &NodeState) -> Result<DeviceBuffer<u32>> {
    launch::find_roots(gpu, &state.parent, state.n_nodes)
}

/// Fails unless every label of `fragments` indexes a table of `n_table`
/// entries (labels are at most the fragment count).
pub(super) fn check_fragments(fragments: &DeviceFragments, n_table: u64) -> Result<(), ParhacError> {
    if fragments.n_fragments() >= n_table {
        return Err(ParhacError::FragmentsOutsideGraph { n_fragments: fragments.n_fragments(), n_nodes: n_table });
    }
    Ok(())
}

/// A segmentation in waterz's uint64 ids: every voxel's fragment `k`
/// replaced by `table[k]` (the id of its region), on the device. The table
/// must hold an id for every fragment (`n_fragments + 1` ids at least,
/// background included), else this fails before anything is launched; a
/// label outside it would be an error too (checked on the device; this
/// synchronizes).
pub fn segment_u64(
    gpu: &Gpu,
    fragments: &DeviceFragments,
    table: &DeviceBuffer<u64>,
) -> Result<DeviceBuffer<u64>, ParhacError> {
    check_fragments(fragments, table.len() as u64)?;
    gpu.check_device(fragments.labels(), "the fragments")?;
    gpu.check_device(table, "the table")?;
    let labels = fragments.labels();
    Ok(launch::segment_u64(gpu, labels, labels.len() as u64, table)?)
}
