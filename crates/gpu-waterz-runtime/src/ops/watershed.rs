//! The watershed kernels, one wrapper each (see `kernels-rs/src/watershed.rs`).

use super::primitives::tile_compaction;
use super::{check_len, grid_stride_config, launch, tiled_config};
use crate::gpu::{DeviceBuffer, Gpu, Param};
use crate::{Result, RuntimeError};
use gpu_waterz_abi::watershed::{uf_tile_grid, WatershedParams, UF_SHARED_BYTES, UF_THREADS};
use gpu_waterz_abi::Dims3;

/// The most voxels a device volume may have: indices, queue positions and
/// labels are u32, and `u32::MAX` marks an unqueued voxel.
pub const MAX_VOXELS: u64 = u32::MAX as u64 - 1;

/// Affinity values in device memory.
#[derive(Debug)]
pub enum AffinityBuffer {
    /// float32 in `[0, 1]`.
    F32(DeviceBuffer<f32>),
    /// uint8, meaning `k / 255`.
    U8(DeviceBuffer<u8>),
}

/// An affinity graph `(3, z, y, x)` in device memory, owned or borrowed
/// from another library (see [`DeviceAffinities::borrow_f32`]).
#[derive(Debug)]
pub struct DeviceAffinities {
    data: std::mem::ManuallyDrop<AffinityBuffer>,
    dims: Dims3,
    /// Borrowed memory is not freed on drop.
    borrowed: bool,
}

impl Drop for DeviceAffinities {
    fn drop(&mut self) {
        // SAFETY: `data` is taken once, here, and not used afterwards.
        let data = unsafe { std::mem::ManuallyDrop::take(&mut self.data) };
        if self.borrowed {
            match data {
                AffinityBuffer::F32(b) => {
                    b.inner.leak();
                }
                AffinityBuffer::U8(b) => {
                    b.inner.leak();
                }
            }
        }
    }
}

/// Checks `dims` against [`MAX_VOXELS`] before anything is allocated.
pub fn check_dims(dims: Dims3) -> Result<u64> {
    let n = dims.checked_voxels().unwrap_or(u64::MAX);
    if n == 0 {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "watershed",
            reason: format!("the volume {dims:?} is empty"),
        });
    }
    if n > MAX_VOXELS {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "watershed",
            reason: format!(
                "the volume has {n} voxels; the GPU backend supports at most {MAX_VOXELS} (u32 indices) per volume"
            ),
        });
    }
    Ok(n)
}

impl DeviceAffinities {
    /// Uploads C-ordered float32 affinities of shape `(3, dims.z, dims.y, dims.x)`.
    pub fn upload_f32(gpu: &Gpu, host: &[f32], dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        Self::check_host_len(host.len(), n)?;
        Ok(Self::owned(AffinityBuffer::F32(gpu.upload(host)?), dims))
    }

    /// Uploads C-ordered uint8 affinities (`k / 255`).
    pub fn upload_u8(gpu: &Gpu, host: &[u8], dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        Self::check_host_len(host.len(), n)?;
        Ok(Self::owned(AffinityBuffer::U8(gpu.upload(host)?), dims))
    }

    /// Wraps affinities already on the device.
    pub fn from_buffer(data: AffinityBuffer, dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        let len = match &data {
            AffinityBuffer::F32(b) => b.len(),
            AffinityBuffer::U8(b) => b.len(),
        };
        Self::check_host_len(len, n)?;
        Ok(Self::owned(data, dims))
    }

    fn owned(data: AffinityBuffer, dims: Dims3) -> Self {
        Self { data: std::mem::ManuallyDrop::new(data), dims, borrowed: false }
    }

    /// Views C-ordered float32 affinities `(3, z, y, x)` that another
    /// library owns (a CUDA torch tensor, a cupy array), at device address
    /// `ptr` on this device, without a copy. The driver checks that the
    /// range is one allocation of this device; the owner must keep it alive
    /// and unchanged while the returned value lives (it is never freed here).
    pub fn borrow_f32(gpu: &Gpu, ptr: u64, dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        let buffer = gpu.borrow_device_memory::<f32>(ptr, 3 * n as usize)?;
        Ok(Self { data: std::mem::ManuallyDrop::new(AffinityBuffer::F32(buffer)), dims, borrowed: true })
    }

    /// As [`DeviceAffinities::borrow_f32`], for uint8 affinities (`k / 255`).
    pub fn borrow_u8(gpu: &Gpu, ptr: u64, dims: Dims3) -> Result<Self> {
        let n = check_dims(dims)?;
        let buffer = gpu.borrow_device_memory::<u8>(ptr, 3 * n as usize)?;
        Ok(Self { data: std::mem::ManuallyDrop::new(AffinityBuffer::U8(buffer)), dims, borrowed: true })
    }

    fn check_host_len(len: usize, n: u64) -> Result<()> {
        if len as u64 != 3 * n {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "upload",
                reason: format!("affinities hold {len} values, 3 * {n} are needed"),
            });
        }
        Ok(())
    }

    /// The volume's extent.
    pub fn dims(&self) -> Dims3 {
        self.dims
    }

    /// The number of voxels.
    pub fn n_voxels(&self) -> u64 {
        self.dims.z * self.dims.y * self.dims.x
    }

    /// The values.
    pub fn data(&self) -> &AffinityBuffer {
        &self.data
    }
}

/// waterz's edge mask of every voxel.
pub fn mask(gpu: &Gpu, affs: &DeviceAffinities, params: WatershedParams) -> Result<DeviceBuffer<u8>> {
    let n = affs.n_voxels();
    let bits = gpu.uninit::<u8>(n as usize)?;
    let cfg = grid_stride_config(gpu, n)?;
    let (dims, params) = (Param(affs.dims), Param(params));
    match affs.data() {
        // SAFETY: the affinities hold 3 n values (checked at construction),
        // `bits` n bytes.
        AffinityBuffer::F32(a) => launch!(gpu, "ws_mask_f32", cfg, &a.inner, &dims, &params, &bits.inner),
        // SAFETY: as above.
        AffinityBuffer::U8(a) => launch!(gpu, "ws_mask_u8", cfg, &a.inner, &dims, &params, &bits.inner),
    }
    Ok(bits)
}

/// The plateau corners (see the kernel `ws_corner_count`) in index order,
/// waterz's initial queue, and their number.
pub fn corners(gpu: &Gpu, bits: &DeviceBuffer<u8>, dims: Dims3) -> Result<(DeviceBuffer<u32>, u64)> {
    let n = check_dims(dims)?;
    let p_dims = Param(dims);
    check_len("ws_corner_count", "bits", bits, n)?;
    let mut out = None;
    let count = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            // SAFETY: `bits` holds n masks, `tile_sums` one u64 per scan
            // tile; launched as `tile_compaction` documents.
            launch!(gpu, "ws_corner_count", *cfg, &bits.inner, &p_dims, &tile_sums.inner);
            Ok(())
        },
        |cfg, tile_offsets, count| {
            let corners = gpu.uninit::<u32>(count as usize)?;
            // SAFETY: as above; `tile_offsets` is the scan of the counts and
            // `corners` holds one u32 per corner.
            launch!(gpu, "ws_corner_compact", *cfg, &bits.inner, &p_dims, &tile_offsets.inner, &corners.inner);
            out = Some(corners);
            Ok(())
        },
    )?;
    Ok((out.map_or_else(|| gpu.zeros(1), Ok)?, count))
}

/// A buffer of `n` u32s set to `u32::MAX` (the kernels' `UNQUEUED`),
/// for queue positions and the search's proposals.
pub fn unqueued(gpu: &Gpu, n: u64) -> Result<DeviceBuffer<u32>> {
    let mut buffer = gpu.uninit::<u32>(n as usize)?;
    gpu.memset_bytes(&mut buffer, 0xFF)?;
    Ok(buffer)
}

/// `order[frontier[k]] = k` for the first frontier.
pub fn bfs_init(gpu: &Gpu, frontier: &DeviceBuffer<u32>, f: u64, order: &mut DeviceBuffer<u32>) -> Result<()> {
    check_len("ws_bfs_init", "frontier", frontier, f)?;
    if f == 0 {
        return Ok(());
    }
    // SAFETY: `frontier` holds f voxel indices from a compaction over the
    // voxels of the volume `order` covers.
    launch!(gpu, "ws_bfs_init", grid_stride_config(gpu, f)?, &frontier.inner, &f, &order.inner);
    Ok(())
}

/// One level of the ordered breadth-first search: the next frontier (in
/// waterz's queue order) and its size; queue positions start at `base`.
#[allow(clippy::too_many_arguments)]
pub fn bfs_level(
    gpu: &Gpu,
    frontier: &DeviceBuffer<u32>,
    f: u64,
    bits: &DeviceBuffer<u8>,
    dims: Dims3,
    order: &mut DeviceBuffer<u32>,
    best: &mut DeviceBuffer<u32>,
    base: u64,
) -> Result<(DeviceBuffer<u32>, u64)> {
    let n = check_dims(dims)?;
    check_len("ws_bfs_propose", "frontier", frontier, f)?;
    check_len("ws_bfs_propose", "bits", bits, n)?;
    check_len("ws_bfs_propose", "order", order, n)?;
    check_len("ws_bfs_propose", "best", best, n)?;
    if f == 0 {
        return Ok((gpu.zeros(1)?, 0));
    }
    let cfg = grid_stride_config(gpu, f)?;
    let p_dims = Param(dims);
    // SAFETY: lengths checked above; frontier entries are voxels of `dims`.
    launch!(gpu, "ws_bfs_propose", cfg, &frontier.inner, &f, &bits.inner, &p_dims, &order.inner, &best.inner);
    let flags = gpu.uninit::<u32>((6 * f) as usize)?;
    // SAFETY: as above; `flags` holds 6 f u32s.
    launch!(
        gpu,
        "ws_bfs_claim",
        cfg,
        &frontier.inner,
        &f,
        &bits.inner,
        &p_dims,
        &order.inner,
        &best.inner,
        &flags.inner
    );
    let (offsets, next_f) = super::primitives::exclusive_scan(gpu, &flags, 6 * f)?;
    let next = gpu.uninit::<u32>(next_f.max(1) as usize)?;
    if next_f > 0 {
        // SAFETY: `offsets` is the scan of `flags`; `next` has one slot per
        // claimed voxel; `order` covers the volume.
        launch!(
            gpu,
            "ws_bfs_emit",
            cfg,
            &frontier.inner,
            &f,
            &p_dims,
            &flags.inner,
            &offsets.inner,
            &base,
            &next.inner,
            &order.inner
        );
    }
    Ok((next, next_f))
}

/// The edges left after plateau division.
pub fn plateau_direction(
    gpu: &Gpu,
    bits: &DeviceBuffer<u8>,
    dims: Dims3,
    order: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u8>> {
    let n = check_dims(dims)?;
    let p_dims = Param(dims);
    check_len("ws_plateau_direction", "bits", bits, n)?;
    check_len("ws_plateau_direction", "order", order, n)?;
    let out = gpu.uninit::<u8>(n as usize)?;
    // SAFETY: all three hold n entries.
    launch!(gpu, "ws_plateau_direction", grid_stride_config(gpu, n)?, &bits.inner, &p_dims, &order.inner, &out.inner);
    Ok(out)
}

/// Components, step 1: a forest in which each voxel's tree is rooted at
/// the smallest voxel of its component within its tile (`uf_tile_local`:
/// the tile's voxels joined in shared memory). [`join_tile_faces`]
/// completes it.
pub fn tile_components(gpu: &Gpu, edges: &DeviceBuffer<u8>, dims: Dims3) -> Result<DeviceBuffer<u32>> {
    let n = check_dims(dims)?;
    check_len("uf_tile_local", "edges", edges, n)?;
    let parent = gpu.uninit::<u32>(n as usize)?;
    let p_dims = Param(dims);
    let cfg = tiled_config(n_tiles(dims), 1, UF_THREADS, UF_SHARED_BYTES)?;
    // SAFETY: `edges` and `parent` hold n entries; one block of UF_THREADS
    // per tile with UF_SHARED_BYTES of shared memory.
    launch!(gpu, "uf_tile_local", cfg, &edges.inner, &p_dims, &parent.inner);
    Ok(parent)
}

/// Components, step 2: joins the trees of [`tile_components`] across the
/// tiles' faces (`uf_tile_faces`); afterwards every component is one tree
/// rooted at its smallest voxel.
pub fn join_tile_faces(gpu: &Gpu, edges: &DeviceBuffer<u8>, dims: Dims3, parent: &DeviceBuffer<u32>) -> Result<()> {
    let n = check_dims(dims)?;
    check_len("uf_tile_faces", "edges", edges, n)?;
    check_len("uf_tile_faces", "parent", parent, n)?;
    let p_dims = Param(dims);
    let cfg = tiled_config(n_tiles(dims), 1, UF_THREADS, 0)?;
    // SAFETY: `edges` and `parent` hold n entries, `parent` the tiles'
    // forest; one block of UF_THREADS per tile.
    launch!(gpu, "uf_tile_faces", cfg, &edges.inner, &p_dims, &parent.inner);
    Ok(())
}

fn n_tiles(dims: Dims3) -> u64 {
    let [tiles_z, tiles_y, tiles_x] = uf_tile_grid(dims);
    tiles_z * tiles_y * tiles_x
}

/// Labels from the complete forest of [`join_tile_faces`]: 0 for
/// background, else 1 + the rank of the component's smallest voxel; also
/// the number of fragments.
pub fn labels(
    gpu: &Gpu,
    edges: &DeviceBuffer<u8>,
    parent: &DeviceBuffer<u32>,
    n: u64,
) -> Result<(DeviceBuffer<u32>, u64)> {
    check_len("ws_labels", "edges", edges, n)?;
    check_len("ws_labels", "parent", parent, n)?;
    let labels = gpu.uninit::<u32>(n as usize)?;
    let n_fragments = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            // SAFETY: `edges` and `parent` hold n entries, `parent` a
            // complete forest; `tile_sums` one u64 per scan tile.
            launch!(gpu, "ws_fragment_count", *cfg, &edges.inner, &parent.inner, &n, &tile_sums.inner);
            Ok(())
        },
        |cfg, tile_offsets, _| {
            // SAFETY: as above; `tile_offsets` is the
            // scan of the counts; `labels` holds n u32s.
            launch!(
                gpu,
                "ws_fragment_number",
                *cfg,
                &edges.inner,
                &parent.inner,
                &n,
                &tile_offsets.inner,
                &labels.inner
            );
            Ok(())
        },
    )?;
    // SAFETY: all hold n entries; the roots' labels are written.
    launch!(gpu, "ws_labels", grid_stride_config(gpu, n)?, &edges.inner, &parent.inner, &n, &labels.inner);
    Ok((labels, n_fragments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_beyond_u32_indices_fail_before_any_allocation() {
        let e = check_dims(Dims3::new(2048, 2048, 1024)).unwrap_err().to_string();
        assert!(e.contains("4294967296 voxels") && e.contains("at most"), "{e}");
        let e = check_dims(Dims3::new(u64::MAX, 2, 2)).unwrap_err().to_string();
        assert!(e.contains("at most"), "{e}");
        assert!(check_dims(Dims3::new(0, 5, 5)).unwrap_err().to_string().contains("empty"));
        assert_eq!(check_dims(Dims3::new(1024, 1024, 1024)).unwrap(), 1 << 30);
    }
}
