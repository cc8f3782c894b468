//! The watershed on the GPU, label for label equal to the reference.
//!
//! The kernels (`kernels-rs/src/watershed.rs`) and the reasoning for
//! exactness are documented there; this module runs them in order:
//! edge masks, plateau corners (compacted in index order), an ordered
//! level-synchronous breadth-first search that reproduces waterz's queue
//! positions, plateau directions, union-find components (tiles in shared memory, then
//! their faces), labels by the smallest voxel of each component.

use crate::WatershedError;
use gpu_waterz_core::{Dims3, WatershedParams};
use gpu_waterz_runtime::ops::watershed as ws;
use gpu_waterz_runtime::{DeviceAffinities, DeviceBuffer, Gpu, StageTimer};
use ndarray::Array3;

/// Fragments in device memory.
#[derive(Debug)]
pub struct DeviceFragments {
    /// One label per voxel (C order), 0 = background, fragments `1..=n_fragments`.
    pub labels: DeviceBuffer<u32>,
    /// The number of fragments.
    pub n_fragments: u64,
    /// The volume's extent.
    pub dims: Dims3,
    /// Levels of the plateau breadth-first search (its depth).
    pub plateau_levels: usize,
}

impl DeviceFragments {
    /// Copies the labels to the host as waterz's uint64 volume.
    pub fn download(&self, gpu: &Gpu) -> Result<Array3<u64>, WatershedError> {
        let labels = gpu.download(&self.labels)?;
        let shape = (self.dims.z as usize, self.dims.y as usize, self.dims.x as usize);
        Ok(Array3::from_shape_vec(shape, labels.into_iter().map(u64::from).collect()).expect("one label per voxel"))
    }
}

/// waterz's watershed of device affinities; the result stays on the device.
pub fn watershed(
    gpu: &Gpu,
    affs: &DeviceAffinities,
    params: WatershedParams,
) -> Result<DeviceFragments, WatershedError> {
    let dims = affs.dims();
    let n = affs.n_voxels();
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    let bits = ws::mask(gpu, affs, params)?;
    timer.mark("edge masks")?;
    let (mut frontier, mut f) = ws::corners(gpu, &bits, dims)?;
    timer.mark("corners")?;
    let mut order = ws::unqueued(gpu, n)?;
    let mut best = ws::unqueued(gpu, n)?;
    ws::bfs_init(gpu, &frontier, f, &mut order)?;
    timer.mark("queue init")?;
    let mut base = f;
    let mut plateau_levels = 0;
    while f > 0 {
        let (next, next_f) = ws::bfs_level(gpu, &frontier, f, &bits, dims, &mut order, &mut best, base)?;
        base += next_f;
        frontier = next;
        f = next_f;
        plateau_levels += 1;
    }
    drop(best);
    drop(frontier);
    timer.mark("plateau search")?;
    let edges = ws::plateau_direction(gpu, &bits, dims, &order)?;
    drop(bits);
    drop(order);
    timer.mark("plateau directions")?;
    let parent = ws::tile_components(gpu, &edges, dims)?;
    timer.mark("components in tiles")?;
    ws::join_tile_faces(gpu, &edges, dims, &parent)?;
    timer.mark("components across tiles")?;
    let (labels, n_fragments) = ws::labels(gpu, &edges, &parent, n)?;
    timer.mark("labels")?;
    tracing::debug!(n_fragments, plateau_levels, queued = base, stages_ms = ?timer.stages(), max_used_bytes = timer.max_used_bytes(), "GPU watershed");
    Ok(DeviceFragments { labels, n_fragments, dims, plateau_levels })
}
