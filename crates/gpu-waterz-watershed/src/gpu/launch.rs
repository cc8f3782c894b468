//! Every launch of the watershed kernels (`kernels-rs/src/watershed/`), and
//! the only `unsafe` code of this crate.
//!
//! Each function here is safe: it checks what its kernel's `# Safety`
//! section asks for, or receives it from a type that only this module
//! makes. Those types carry the invariants that one kernel establishes and
//! a later one relies on, so that no index a kernel follows comes from
//! outside this module:
//! - [`EdgeMasks`]: one mask per voxel, none marking a face that leaves the
//!   volume (made by [`mask`], which checks the thresholds, and by
//!   [`plateau_direction`], which keeps a subset of each mask);
//! - [`Frontier`]: voxel indices of one volume, each below its voxel count
//!   (made by [`corners`] and [`bfs_level`]);
//! - [`TileForest`] and [`Components`]: the union-find forest over the
//!   voxels, every entry a voxel at or below its own index, before and
//!   after the tiles are joined (made by [`tile_components`] and
//!   [`join_tile_faces`]), with the edges it joins.

use super::affinities::{AffinityBuffer, DeviceAffinities};
use gpu_waterz_abi::watershed::{
    uf_tile_grid, UfTileFacesArgs, UfTileLocalArgs, WatershedParams, WsBfsClaimArgs, WsBfsEmitArgs, WsBfsInitArgs,
    WsBfsProposeArgs, WsBlockDirectionsArgs, WsBlockInsideEdgesArgs, WsBlockOpenRootsArgs, WsBlockPlateauInfoArgs,
    WsCheckF32Args, WsCornerCompactArgs, WsCornerCountArgs, WsFragmentCountArgs, WsFragmentNumberArgs, WsLabelsArgs,
    WsMaskF32Args, WsMaskU8Args, WsPlateauDirectionArgs, UF_SHARED_BYTES, UF_THREADS,
};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::primitives::{exclusive_scan, tile_compaction};
use gpu_waterz_runtime::{check_len, tiled_config, DeviceBuffer, Gpu, Result, RuntimeError};

impl DeviceAffinities {
    /// Views C-ordered float32 affinities `(3, z, y, x)` that another
    /// library owns (a CUDA torch tensor, a cupy array), at device address
    /// `ptr` on this device, without a copy. The driver checks that the
    /// range is one allocation of this device, suitably aligned; the memory
    /// is never freed here.
    ///
    /// # Safety
    /// The owner keeps the memory allocated, and nobody writes it, for as
    /// long as the returned value (or anything made from it, such as the
    /// buffers the kernels read it through) is used.
    pub unsafe fn borrow_f32(gpu: &Gpu, ptr: u64, dims: Dims3) -> Result<Self> {
        let n = super::affinities::check_dims(dims)?;
        // SAFETY: the caller keeps the memory alive and unchanged while the
        // affinities live; the driver checks where it is.
        let buffer = unsafe { gpu.borrow_device_memory::<f32>(ptr, 3 * n as usize) }?;
        Self::from_buffer(AffinityBuffer::F32(buffer), dims)
    }

    /// As [`DeviceAffinities::borrow_f32`], for uint8 affinities (`k / 255`).
    ///
    /// # Safety
    /// As [`DeviceAffinities::borrow_f32`].
    pub unsafe fn borrow_u8(gpu: &Gpu, ptr: u64, dims: Dims3) -> Result<Self> {
        let n = super::affinities::check_dims(dims)?;
        // SAFETY: as in `borrow_f32`.
        let buffer = unsafe { gpu.borrow_device_memory::<u8>(ptr, 3 * n as usize) }?;
        Self::from_buffer(AffinityBuffer::U8(buffer), dims)
    }
}

fn invalid(kernel: &'static str, reason: String) -> RuntimeError {
    RuntimeError::InvalidLaunch { kernel, reason }
}

/// Edge masks of a volume: one u8 per voxel of `dims`, none of which marks
/// a face that leaves the volume, so that every marked direction leads to
/// a voxel. `n` is the voxel count, at most `MAX_VOXELS`.
#[derive(Debug)]
pub(crate) struct EdgeMasks {
    bits: DeviceBuffer<u8>,
    dims: Dims3,
    n: u64,
}

impl EdgeMasks {
    /// The number of voxels.
    pub(crate) fn n_voxels(&self) -> u64 {
        self.n
    }
}

/// A frontier of the plateau search: `len` voxel indices (at least one
/// slot allocated), each below `n_voxels`, the voxel count of the volume
/// whose masks produced it.
#[derive(Debug)]
pub(crate) struct Frontier {
    voxels: DeviceBuffer<u32>,
    len: u64,
    n_voxels: u64,
}

impl Frontier {
    /// The number of voxels on the frontier.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

/// The forest of `uf_tile_local`: one entry per voxel of `edges`, each a
/// voxel at or below its own index (so following it ends at a root).
#[derive(Debug)]
pub(crate) struct TileForest {
    edges: EdgeMasks,
    parent: DeviceBuffer<u32>,
}

/// The complete forest of `uf_tile_faces`: as [`TileForest`], every
/// component of `edges` one tree rooted at its smallest voxel.
#[derive(Debug)]
pub(crate) struct Components {
    edges: EdgeMasks,
    parent: DeviceBuffer<u32>,
}

/// waterz's edge mask of every voxel (`ws_mask_f32` or `ws_mask_u8`).
///
/// Fails unless the thresholds keep every mask inside the volume
/// ([`WatershedParams::keeps_masks_inside`]): the later kernels follow
/// marked faces.
pub(crate) fn mask(gpu: &Gpu, affs: &DeviceAffinities, params: WatershedParams) -> Result<EdgeMasks> {
    let kernel = match affs.data() {
        AffinityBuffer::F32(_) => "ws_mask_f32",
        AffinityBuffer::U8(_) => "ws_mask_u8",
    };
    if !params.keeps_masks_inside() {
        return Err(invalid(
            kernel,
            format!(
                "aff_threshold_low ({}) must be below aff_threshold_high ({}): otherwise faces outside the volume are marked",
                params.aff_threshold_low, params.aff_threshold_high
            ),
        ));
    }
    let (dims, n) = (affs.dims(), affs.n_voxels());
    let mut bits = gpu.uninit::<u8>(n as usize)?;
    let cfg = gpu.grid_stride_config(n);
    match affs.data() {
        AffinityBuffer::F32(a) => {
            check_len(kernel, "affinities", a, 3 * n)?;
            let args = WsMaskF32Args { affs: a.as_ptr(), dims, params, bits: bits.as_mut_ptr() };
            // SAFETY: the affinities hold 3 n f32s (checked above) for the
            // n < 2^32 voxels of `dims` (`DeviceAffinities` checks the
            // extent), `bits` n bytes; any grid-stride launch covers them.
            unsafe { gpu.launch(cfg, args) }?;
        }
        AffinityBuffer::U8(a) => {
            check_len(kernel, "affinities", a, 3 * n)?;
            let args = WsMaskU8Args { affs: a.as_ptr(), dims, params, bits: bits.as_mut_ptr() };
            // SAFETY: as above, with 3 n u8s.
            unsafe { gpu.launch(cfg, args) }?;
        }
    }
    // The thresholds were checked above: no mask leaves the volume.
    Ok(EdgeMasks { bits, dims, n })
}

/// The affinities' values that the host checks of host affinities, counted
/// on the device (`ws_check_f32`; uint8 affinities are always in range):
/// the values that are NaN or infinite, the first of them, and the finite
/// values outside `[0, 1]`.
pub(crate) fn check_values(gpu: &Gpu, affs: &DeviceAffinities) -> Result<super::AffinityValues> {
    let AffinityBuffer::F32(a) = affs.data() else {
        return Ok(super::AffinityValues { n_non_finite: 0, first_non_finite: None, n_outside_unit_interval: 0 });
    };
    affs.check_device(gpu)?;
    let n_values = 3 * affs.n_voxels();
    check_len("ws_check_f32", "affinities", a, n_values)?;
    let mut counts = gpu.zeros::<u64>(2)?;
    let mut first = gpu.upload(&[u64::MAX])?;
    let cfg = gpu.grid_stride_config(n_values);
    let args = WsCheckF32Args {
        affs: a.as_ptr(),
        n_values,
        counts: counts.as_mut_ptr(),
        first_non_finite: first.as_mut_ptr(),
    };
    // SAFETY: the affinities hold `n_values` f32s (checked above), `counts`
    // two zeroed u64s, `first` one u64 at u64::MAX; grid-stride blocks are
    // whole warps.
    unsafe { gpu.launch(cfg, args) }?;
    let counts = gpu.download(&counts)?;
    let first = gpu.download(&first)?[0];
    Ok(super::AffinityValues {
        n_non_finite: counts[0],
        first_non_finite: (first != u64::MAX).then_some(first),
        n_outside_unit_interval: counts[1],
    })
}

/// The plateau corners (see the kernel `ws_corner_count`) in index order,
/// waterz's initial queue (`ws_corner_count`, a scan, `ws_corner_compact`).
pub(crate) fn corners(gpu: &Gpu, masks: &EdgeMasks) -> Result<Frontier> {
    let EdgeMasks { bits, dims, n } = masks;
    let (dims, n) = (*dims, *n);
    let mut out = None;
    let count = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            let args = WsCornerCountArgs { bits: bits.as_ptr(), dims, tile_sums };
            // SAFETY: `bits` holds the n masks of `dims`, none leaving the
            // volume (an `EdgeMasks` invariant); `tile_sums` holds one u64
            // per scan tile and `cfg` is the scan-tile launch, as
            // `tile_compaction` documents.
            unsafe { gpu.launch(cfg, args) }
        },
        |cfg, tile_offsets, count| {
            let mut corners = gpu.uninit::<u32>(count as usize)?;
            let args = WsCornerCompactArgs { bits: bits.as_ptr(), dims, tile_offsets, corners: corners.as_mut_ptr() };
            // SAFETY: as above; `tile_offsets` is the scan of the counts of
            // the same predicate, and `corners` holds one u32 per corner.
            unsafe { gpu.launch(cfg, args) }?;
            out = Some(corners);
            Ok(())
        },
    )?;
    // The corners are voxels below n, compacted from the voxels of `dims`.
    Ok(Frontier { voxels: out.map_or_else(|| gpu.zeros(1), Ok)?, len: count, n_voxels: n })
}

/// `order[frontier[k]] = k` for the first frontier (`ws_bfs_init`).
pub(crate) fn bfs_init(gpu: &Gpu, frontier: &Frontier, order: &mut DeviceBuffer<u32>) -> Result<()> {
    check_len("ws_bfs_init", "order", order, frontier.n_voxels)?;
    let f = frontier.len;
    if f == 0 {
        return Ok(());
    }
    let args = WsBfsInitArgs { frontier: frontier.voxels.as_ptr(), f, order: order.as_mut_ptr() };
    // SAFETY: the frontier holds f voxel indices, each below its volume's
    // voxel count (a `Frontier` invariant), which `order` covers (checked
    // above).
    unsafe { gpu.launch(gpu.grid_stride_config(f), args) }
}

/// One level of the ordered breadth-first search (`ws_bfs_propose`,
/// `ws_bfs_claim`, a scan, `ws_bfs_emit`): the next frontier, in waterz's
/// queue order; its queue positions start at `base`.
pub(crate) fn bfs_level(
    gpu: &Gpu,
    frontier: &Frontier,
    masks: &EdgeMasks,
    order: &mut DeviceBuffer<u32>,
    best: &mut DeviceBuffer<u32>,
    base: u64,
) -> Result<Frontier> {
    let EdgeMasks { bits, dims, n } = masks;
    let (dims, n) = (*dims, *n);
    if frontier.n_voxels != n {
        return Err(invalid(
            "ws_bfs_propose",
            format!("the frontier belongs to a volume of {} voxels, the masks to one of {n}", frontier.n_voxels),
        ));
    }
    check_len("ws_bfs_propose", "order", order, n)?;
    check_len("ws_bfs_propose", "best", best, n)?;
    let f = frontier.len;
    if f == 0 {
        return Ok(Frontier { voxels: gpu.zeros(1)?, len: 0, n_voxels: n });
    }
    let cfg = gpu.grid_stride_config(f);
    let args = WsBfsProposeArgs {
        frontier: frontier.voxels.as_ptr(),
        f,
        bits: bits.as_ptr(),
        dims,
        order: order.as_ptr(),
        best: best.as_mut_ptr(),
    };
    // SAFETY: the frontier holds f voxels of this volume (a `Frontier`
    // invariant; the voxel counts match, checked above); `bits`, `order`,
    // `best` hold one entry per voxel; no mask leaves the volume, so every
    // neighbour the kernel visits is a voxel.
    unsafe { gpu.launch(cfg, args) }?;
    let mut flags = gpu.uninit::<u32>((6 * f) as usize)?;
    let args = WsBfsClaimArgs {
        frontier: frontier.voxels.as_ptr(),
        f,
        bits: bits.as_ptr(),
        dims,
        order: order.as_ptr(),
        best: best.as_ptr(),
        flags: flags.as_mut_ptr(),
    };
    // SAFETY: as above; `flags` holds 6 f u32s.
    unsafe { gpu.launch(cfg, args) }?;
    let (offsets, next_f) = exclusive_scan(gpu, &flags, 6 * f)?;
    let mut next = gpu.uninit::<u32>(next_f.max(1) as usize)?;
    if next_f > 0 {
        let args = WsBfsEmitArgs {
            frontier: frontier.voxels.as_ptr(),
            f,
            dims,
            flags: flags.as_ptr(),
            offsets: offsets.as_ptr(),
            base,
            next: next.as_mut_ptr(),
            order: order.as_mut_ptr(),
        };
        // SAFETY: `flags` are `ws_bfs_claim`'s (0 or 1, set only where a
        // marked direction leads to a voxel of the volume), `offsets` their
        // exclusive scan, whose total `next_f` is the length of `next`;
        // `order` covers the volume.
        unsafe { gpu.launch(cfg, args) }?;
    }
    // The next frontier holds the neighbours of frontier voxels along
    // marked directions: voxels of the same volume.
    Ok(Frontier { voxels: next, len: next_f, n_voxels: n })
}

/// The edges left after plateau division (`ws_plateau_direction`).
pub(crate) fn plateau_direction(gpu: &Gpu, masks: &EdgeMasks, order: &DeviceBuffer<u32>) -> Result<EdgeMasks> {
    let EdgeMasks { bits, dims, n } = masks;
    let (dims, n) = (*dims, *n);
    check_len("ws_plateau_direction", "order", order, n)?;
    let mut edges = gpu.uninit::<u8>(n as usize)?;
    let args = WsPlateauDirectionArgs { bits: bits.as_ptr(), dims, order: order.as_ptr(), edges: edges.as_mut_ptr() };
    // SAFETY: `bits` (an `EdgeMasks` invariant), `order` (checked above) and
    // `edges` hold n entries; no mask leaves the volume, so the neighbours
    // the kernel reads are voxels.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    // Each voxel keeps a subset of its marked directions: the new masks
    // stay inside the volume too.
    Ok(EdgeMasks { bits: edges, dims, n })
}

/// The number of components tiles of `dims`.
fn n_tiles(dims: Dims3) -> u64 {
    let [tiles_z, tiles_y, tiles_x] = uf_tile_grid(dims);
    tiles_z * tiles_y * tiles_x
}

/// Components, step 1 (`uf_tile_local`): a forest in which each voxel's
/// tree is rooted at the smallest voxel of its component within its tile.
/// [`join_tile_faces`] completes it.
pub(crate) fn tile_components(gpu: &Gpu, edges: EdgeMasks) -> Result<TileForest> {
    let (dims, n) = (edges.dims, edges.n);
    let mut parent = gpu.uninit::<u32>(n as usize)?;
    let cfg = tiled_config(n_tiles(dims), 1, UF_THREADS, UF_SHARED_BYTES)?;
    let args = UfTileLocalArgs { edges: edges.bits.as_ptr(), dims, parent: parent.as_mut_ptr() };
    // SAFETY: `edges` (an `EdgeMasks` invariant) and `parent` hold n
    // entries; one block of UF_THREADS per tile of `uf_tile_grid(dims)`,
    // with UF_SHARED_BYTES of shared memory.
    unsafe { gpu.launch(cfg, args) }?;
    // The kernel writes every voxel's parent: a voxel of its tile at or
    // below it.
    Ok(TileForest { edges, parent })
}

/// Components, step 2 (`uf_tile_faces`): joins the trees of
/// [`tile_components`] across the tiles' faces; afterwards every component
/// is one tree rooted at its smallest voxel.
pub(crate) fn join_tile_faces(gpu: &Gpu, forest: TileForest) -> Result<Components> {
    let TileForest { edges, mut parent } = forest;
    let dims = edges.dims;
    let cfg = tiled_config(n_tiles(dims), 1, UF_THREADS, 0)?;
    let args = UfTileFacesArgs { edges: edges.bits.as_ptr(), dims, parent: parent.as_mut_ptr() };
    // SAFETY: `edges` and `parent` hold n entries, `parent` the forest of
    // `uf_tile_local` over the same edges (a `TileForest` invariant); one
    // block of UF_THREADS per tile.
    unsafe { gpu.launch(cfg, args) }?;
    // Unions only lower roots to smaller roots: entries stay voxels at or
    // below their own index.
    Ok(Components { edges, parent })
}

/// Labels from the complete forest (`ws_fragment_count`, a scan,
/// `ws_fragment_number`, `ws_labels`): 0 for background, else 1 + the
/// rank of the component's smallest voxel; also the number of fragments.
///
/// Every label is at most the number of fragments, which later kernels
/// rely on (they index per-fragment arrays with labels). Without NaN
/// affinities a component's voxels are all background or none are (a
/// marked face is above the low threshold for both its voxels), so every
/// voxel's label comes from a numbered root. NaN affinities can join
/// a voxel to a background root, whose label is never numbered: the
/// labels start zeroed, so such a voxel reads 0, never an unwritten value.
pub(crate) fn labels(gpu: &Gpu, components: &Components) -> Result<(DeviceBuffer<u32>, u64)> {
    let Components { edges, parent } = components;
    let n = edges.n;
    let mut labels = gpu.zeros::<u32>(n as usize)?;
    let n_fragments = tile_compaction(
        gpu,
        n,
        |cfg, tile_sums| {
            let args = WsFragmentCountArgs { edges: edges.bits.as_ptr(), parent: parent.as_ptr(), n, tile_sums };
            // SAFETY: `edges` and `parent` hold n entries, `parent` a
            // complete forest (a `Components` invariant); `tile_sums` holds
            // one u64 per scan tile and `cfg` is the scan-tile launch.
            unsafe { gpu.launch(cfg, args) }
        },
        |cfg, tile_offsets, _| {
            let args = WsFragmentNumberArgs {
                edges: edges.bits.as_ptr(),
                parent: parent.as_ptr(),
                n,
                tile_offsets,
                labels: labels.as_mut_ptr(),
            };
            // SAFETY: as above; `tile_offsets` is the scan of the counts of
            // the same predicate; `labels` holds n u32s.
            unsafe { gpu.launch(cfg, args) }
        },
    )?;
    let args = WsLabelsArgs { edges: edges.bits.as_ptr(), parent: parent.as_ptr(), n, labels: labels.as_mut_ptr() };
    // SAFETY: all hold n entries; `parent` is a complete forest over them
    // whose roots' labels were written above.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok((labels, n_fragments))
}

/// Checks that a block of `block` voxels at `offset` lies in `region` and
/// has between one and `MAX_VOXELS` voxels; returns its voxel count.
fn check_block_in(kernel: &'static str, region: Dims3, offset: Dims3, block: Dims3) -> Result<u64> {
    let n = super::affinities::check_dims(block)?;
    let fits = |o: u64, b: u64, r: u64| o.checked_add(b).is_some_and(|end| end <= r);
    if !(fits(offset.z, block.z, region.z) && fits(offset.y, block.y, region.y) && fits(offset.x, block.x, region.x)) {
        return Err(invalid(
            kernel,
            format!("a block of {block:?} at {offset:?} does not lie in a region of {region:?}"),
        ));
    }
    Ok(n)
}

/// A block's plateau edges (an [`EdgeMasks`] over the block: the faces both
/// voxels mark, inside it) and each block voxel's mask with its corner and
/// open-face flags (`ws_block_plateau_info`), from the masks of a region
/// in which the block lies at `offset`.
pub(crate) fn block_plateau_info(
    gpu: &Gpu,
    masks: &EdgeMasks,
    offset: Dims3,
    block: Dims3,
) -> Result<(EdgeMasks, DeviceBuffer<u8>)> {
    let n = check_block_in("ws_block_plateau_info", masks.dims, offset, block)?;
    let mut mutual = gpu.uninit::<u8>(n as usize)?;
    let mut info = gpu.uninit::<u8>(n as usize)?;
    let args = WsBlockPlateauInfoArgs {
        masks: masks.bits.as_ptr(),
        region: masks.dims,
        offset,
        block,
        mutual: mutual.as_mut_ptr(),
        info: info.as_mut_ptr(),
    };
    // SAFETY: the masks cover their region (an `EdgeMasks` invariant) and
    // mark no face out of it; the block lies in the region (checked above);
    // `mutual` and `info` hold one byte per block voxel.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    // The plateau edges mark only faces whose neighbour is in the block.
    Ok((EdgeMasks { bits: mutual, dims: block, n }, info))
}

/// Each block voxel's directions from the region's plateau division
/// `divided`, or, for the voxels of plateaus that reach outside the block
/// (the trees of `plateaus` with a voxel whose `info` has `BLOCK_OPEN`),
/// its mask with `BLOCK_CORNER` and `BLOCK_OPEN` (`ws_block_open_roots`,
/// `ws_block_directions`).
pub(crate) fn block_directions(
    gpu: &Gpu,
    info: &DeviceBuffer<u8>,
    plateaus: &Components,
    divided: &EdgeMasks,
    offset: Dims3,
) -> Result<DeviceBuffer<u8>> {
    let block = plateaus.edges.dims;
    let n = check_block_in("ws_block_directions", divided.dims, offset, block)?;
    check_len("ws_block_open_roots", "info", info, n)?;
    let mut flags = gpu.zeros::<u8>(n as usize)?;
    let cfg = gpu.grid_stride_config(n);
    let args =
        WsBlockOpenRootsArgs { info: info.as_ptr(), parent: plateaus.parent.as_ptr(), n, flags: flags.as_mut_ptr() };
    // SAFETY: `info` (checked) and `flags` hold n bytes, `flags` zeroed;
    // `parent` is a complete forest over the block's n voxels (a
    // `Components` invariant).
    unsafe { gpu.launch(cfg, args) }?;
    let mut out = gpu.uninit::<u8>(n as usize)?;
    let args = WsBlockDirectionsArgs {
        info: info.as_ptr(),
        parent: plateaus.parent.as_ptr(),
        flags: flags.as_ptr(),
        divided: divided.bits.as_ptr(),
        region: divided.dims,
        offset,
        block,
        out: out.as_mut_ptr(),
    };
    // SAFETY: as above, and `divided` covers its region, in which the block
    // lies (checked above); `out` holds n bytes.
    unsafe { gpu.launch(cfg, args) }?;
    Ok(out)
}

/// A block's directions `bits` (one byte per voxel of `block`) reduced to
/// the faces inside the block, with `BLOCK_PRESENT` on every voxel that is
/// not background (`ws_block_inside_edges`): edges for the components and
/// labels kernels.
pub(crate) fn block_inside_edges(gpu: &Gpu, bits: &DeviceBuffer<u8>, block: Dims3) -> Result<EdgeMasks> {
    let n = super::affinities::check_dims(block)?;
    check_len("ws_block_inside_edges", "bits", bits, n)?;
    let mut edges = gpu.uninit::<u8>(n as usize)?;
    let args = WsBlockInsideEdgesArgs { bits: bits.as_ptr(), block, edges: edges.as_mut_ptr() };
    // SAFETY: `bits` (checked) and `edges` hold one byte per block voxel.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    // Only faces whose neighbour is in the block are kept.
    Ok(EdgeMasks { bits: edges, dims: block, n })
}
