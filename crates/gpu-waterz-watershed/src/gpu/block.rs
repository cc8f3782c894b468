//! The blockwise decode's per-block watershed steps on the GPU
//! (`gpu_waterz_blockwise` runs them on each block of a larger volume):
//! the plateaus of one block, divided where they lie inside it, and the
//! block's basins.

use super::{launch, plateau, DeviceAffinities};
use crate::WatershedError;
use gpu_waterz_abi::watershed::{BLOCK_CORNER, BLOCK_OPEN};
use gpu_waterz_core::{Dims3, WatershedParams};
use gpu_waterz_runtime::{DeviceBuffer, Gpu, StageTimer};

/// Where a block lies in the region whose affinities are on the device:
/// its first voxel in the region and its extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInRegion {
    /// The block's first voxel `(z, y, x)` in the region.
    pub offset: Dims3,
    /// The block's extent.
    pub block: Dims3,
}

/// Set in a byte of [`block_plateaus_on_device`] on the voxels of open plateaus.
pub const OPEN: u8 = BLOCK_OPEN;

/// Set in a byte of [`block_plateaus_on_device`] on open plateau corners.
pub const CORNER: u8 = BLOCK_CORNER;

/// The watershed's masks and plateau division for one block of a larger
/// volume, on the GPU: one byte per block voxel (C order).
///
/// `affs` (taken, and freed once the masks are made) are the affinities of a region of the volume that holds the
/// block grown by two voxels along every axis (clipped to the volume), so
/// that the masks of the block and of one voxel around it are the
/// volume's: the region's faces are the volume's faces or at least two
/// voxels from the block. The caller keeps that geometry; the function
/// checks only that the block lies in the region.
///
/// A voxel whose plateau (the voxels joined by faces both mark) lies
/// inside the block gets the directions the whole volume's watershed
/// gives it: plateaus are divided alone, from their corners. A voxel of a
/// plateau that reaches outside the block (an *open* plateau, divided over
/// the whole volume later) gets its mask with [`OPEN`], and [`CORNER`] when
/// it is a plateau corner. This equals `gpu_waterz_blockwise`'s
/// `local_plateaus` on the same block.
///
/// The bytes stay on the device, one per voxel of the block (C order),
/// queued but not waited for: the caller downloads them (the blockwise
/// decode with [`gpu_waterz_runtime::Gpu::download_behind`], beside its
/// next work).
pub fn block_plateaus_on_device(
    gpu: &Gpu,
    affs: DeviceAffinities,
    at: BlockInRegion,
    params: WatershedParams,
) -> Result<DeviceBuffer<u8>, WatershedError> {
    super::check_dims(at.block)?;
    affs.check_device(gpu)?;
    super::check_thresholds(params)?;
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    let masks = launch::mask(gpu, &affs, params)?;
    // The affinities are read once: their memory goes back before the search.
    drop(affs);
    let (mutual, info) = launch::block_plateau_info(gpu, &masks, at.offset, at.block)?;
    timer.mark("edge masks")?;
    let divided = plateau::divide(gpu, masks, &mut timer)?;
    let forest = launch::tile_components(gpu, mutual)?;
    let plateaus = launch::join_tile_faces(gpu, forest)?;
    timer.mark("block plateaus")?;
    let directions = launch::block_directions(gpu, &info, &plateaus, &divided.edges, at.offset)?;
    timer.mark("directions")?;
    tracing::debug!(levels = divided.levels, stages_ms = ?timer.stages(), "GPU block plateaus");
    Ok(directions)
}

/// A block's basins on the GPU: the components of its directions `bits`
/// (one byte per voxel of `block`, C order) joined by the faces inside the
/// block, numbered `1..=n` in scan order of their first voxel, 0 for
/// background (no direction), written into `labels` (one per voxel);
/// returns `n`. This equals the components of `gpu_waterz_blockwise`'s
/// `local_basins`. A caller that wrote `labels` before (its pages touched)
/// spares the download the first touch of every page.
pub fn block_basins(gpu: &Gpu, bits: &[u8], block: Dims3, labels: &mut [u32]) -> Result<u64, WatershedError> {
    let n = super::check_dims(block)?;
    if labels.len() as u64 != n {
        return Err(WatershedError::Gpu(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
            kernel: "ws_block_inside_edges",
            reason: format!("room for {} labels for a block of {n} voxels ({block:?})", labels.len()),
        }));
    }
    let (device_labels, n_components) = block_basins_on_device(gpu, bits, block)?;
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    gpu.download_to_slice(&device_labels, labels)?;
    timer.mark("labels down")?;
    tracing::debug!(stages_ms = ?timer.stages(), "GPU block basins' download");
    Ok(n_components)
}

/// [`block_basins`] with the labels left on the device (one per voxel of
/// `block`, C order), and their number of components.
pub fn block_basins_on_device(
    gpu: &Gpu,
    bits: &[u8],
    block: Dims3,
) -> Result<(DeviceBuffer<u32>, u64), WatershedError> {
    let n = super::check_dims(block)?;
    if bits.len() as u64 != n {
        return Err(WatershedError::Gpu(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
            kernel: "ws_block_inside_edges",
            reason: format!("{} direction bytes for a block of {n} voxels ({block:?})", bits.len()),
        }));
    }
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    let bits = gpu.upload(bits)?;
    timer.mark("directions up")?;
    let edges = launch::block_inside_edges(gpu, &bits, block)?;
    drop(bits);
    let forest = launch::tile_components(gpu, edges)?;
    let components = launch::join_tile_faces(gpu, forest)?;
    let (device_labels, n_components) = launch::labels(gpu, &components)?;
    drop(components);
    timer.mark("components")?;
    tracing::debug!(stages_ms = ?timer.stages(), "GPU block basins");
    Ok((device_labels, n_components))
}
