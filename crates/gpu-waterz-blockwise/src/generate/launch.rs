//! Every launch of the generator's kernels (`kernels-rs/src/generate.rs`),
//! and the only `unsafe` code of this crate. Each function is safe: it
//! checks what its kernel's `# Safety` section asks for (buffer lengths,
//! extents, tables that cover every index the kernel reads) before the
//! launch.

use gpu_waterz_abi::generate::{
    GenAddNoiseArgs, GenAffinitiesArgs, GenBoundaryArgs, GenBoxBlurArgs, GenDilateArgs, GenImplicitLabelsArgs,
    GenInsideArgs, GenNoiseLatticeArgs, NOISE_SPACING,
};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, Result, RuntimeError};

fn refuse(kernel: &'static str, reason: String) -> RuntimeError {
    RuntimeError::InvalidLaunch { kernel, reason }
}

/// The voxels of `dims`, which must number 1 to 2^32 - 1 (the kernels'
/// coordinates are 32-bit).
fn voxels(kernel: &'static str, dims: Dims3) -> Result<u64> {
    match dims.checked_voxels() {
        Some(n) if n > 0 && n < u32::MAX as u64 => Ok(n),
        _ => Err(refuse(kernel, format!("a region of {dims:?}: 1 to 2^32 - 1 voxels are taken"))),
    }
}

/// The labels of the region `origin + dims` from `seeds` (three f32 per
/// grid cell of `table`, which must span one cell before the region's
/// first voxel's to one after its last voxel's along each axis).
pub(super) fn labels(
    gpu: &Gpu,
    seeds: &DeviceBuffer<f32>,
    table: Dims3,
    cell: Dims3,
    origin: Dims3,
    dims: Dims3,
) -> Result<DeviceBuffer<u32>> {
    const KERNEL: &str = "gen_implicit_labels";
    let n = voxels(KERNEL, dims)?;
    let (c, o, d, t) = (
        [cell.z, cell.y, cell.x],
        [origin.z, origin.y, origin.x],
        [dims.z, dims.y, dims.x],
        [table.z, table.y, table.x],
    );
    for a in 0..3 {
        let last = o[a].checked_add(d[a] - 1).ok_or_else(|| refuse(KERNEL, format!("origin {origin:?} overflows")))?;
        // The kernel's coordinates are 32-bit.
        if last >= u32::MAX as u64 || c[a] >= u32::MAX as u64 {
            return Err(refuse(
                KERNEL,
                format!("a region of {dims:?} at {origin:?} with cells of {cell:?}: coordinates below 2^32 are taken"),
            ));
        }
        if c[a] == 0 || t[a] < last / c[a] - o[a] / c[a] + 3 {
            return Err(refuse(
                KERNEL,
                format!("a seed table of {table:?} does not span the cells of {dims:?} at {origin:?}"),
            ));
        }
    }
    // The kernel's slots in the table are 32-bit, three f32 per cell.
    let cells = table
        .checked_voxels()
        .filter(|&cells| cells < u32::MAX as u64 / 3)
        .ok_or_else(|| refuse(KERNEL, format!("a seed table of {table:?}: fewer than 2^32 / 3 cells are taken")))?;
    check_len(KERNEL, "seeds", seeds, cells.saturating_mul(3))?;
    let mut labels = gpu.uninit::<u32>(n as usize)?;
    let args = GenImplicitLabelsArgs { seeds: seeds.as_ptr(), table, cell, origin, dims, labels: labels.as_mut_ptr() };
    // SAFETY: the table spans one cell before the region's first voxel's to
    // one after its last's and holds three f32 per cell; the cells are
    // positive; the region has fewer than 2^32 voxels, one label each, and
    // 32-bit coordinates; the table fewer than 2^32 / 3 cells.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(labels)
}

/// The boundary mask of `labels` over `dims`.
pub(super) fn boundary(gpu: &Gpu, labels: &DeviceBuffer<u32>, dims: Dims3) -> Result<DeviceBuffer<u8>> {
    const KERNEL: &str = "gen_boundary";
    let n = voxels(KERNEL, dims)?;
    check_len(KERNEL, "labels", labels, n)?;
    let mut mask = gpu.uninit::<u8>(n as usize)?;
    let args = GenBoundaryArgs { labels: labels.as_ptr(), dims, mask: mask.as_mut_ptr() };
    // SAFETY: one label and one mask byte per voxel of fewer than 2^32.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(mask)
}

/// `mask` dilated by one face, over `dims`.
pub(super) fn dilate(gpu: &Gpu, mask: &DeviceBuffer<u8>, dims: Dims3) -> Result<DeviceBuffer<u8>> {
    const KERNEL: &str = "gen_dilate";
    let n = voxels(KERNEL, dims)?;
    check_len(KERNEL, "mask", mask, n)?;
    let mut out = gpu.uninit::<u8>(n as usize)?;
    let args = GenDilateArgs { mask: mask.as_ptr(), dims, out: out.as_mut_ptr() };
    // SAFETY: two distinct buffers (`out` is new) of one byte per voxel.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(out)
}

/// The inside map of `mask`.
pub(super) fn inside(gpu: &Gpu, mask: &DeviceBuffer<u8>) -> Result<DeviceBuffer<f32>> {
    let n = mask.len() as u64;
    let mut q = gpu.uninit::<f32>(n as usize)?;
    let args = GenInsideArgs { mask: mask.as_ptr(), n, q: q.as_mut_ptr() };
    // SAFETY: `n` mask bytes and `n` f32s.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(q)
}

/// One box-blur pass of `q` over `dims` along `axis` (0, 1 or 2).
pub(super) fn box_blur(gpu: &Gpu, q: &DeviceBuffer<f32>, dims: Dims3, axis: u64) -> Result<DeviceBuffer<f32>> {
    const KERNEL: &str = "gen_box_blur";
    let n = voxels(KERNEL, dims)?;
    check_len(KERNEL, "q", q, n)?;
    if axis > 2 {
        return Err(refuse(KERNEL, format!("axis {axis}")));
    }
    let mut out = gpu.uninit::<f32>(n as usize)?;
    let args = GenBoxBlurArgs { q: q.as_ptr(), dims, axis, out: out.as_mut_ptr() };
    // SAFETY: two distinct buffers (`out` is new) of one f32 per voxel; the
    // axis is 0, 1 or 2.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(out)
}

/// The smooth noise's lattice values for `seed` at the points of `table`
/// from point `first` (fewer than 2^32 points).
pub(super) fn noise_lattice(gpu: &Gpu, seed: u64, first: Dims3, table: Dims3) -> Result<DeviceBuffer<f32>> {
    const KERNEL: &str = "gen_noise_lattice";
    let n = voxels(KERNEL, table)?;
    let mut values = gpu.uninit::<f32>(n as usize)?;
    let args = GenNoiseLatticeArgs { seed, first, table, values: values.as_mut_ptr() };
    // SAFETY: one f32 per point of a table of fewer than 2^32 points.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(values)
}

/// Adds the smooth noise to `q` (the region `origin + dims`) from
/// `lattice` (one value per point of `table` from point `first`, which
/// must cover every corner of the region's voxels).
#[allow(clippy::too_many_arguments)]
pub(super) fn add_noise(
    gpu: &Gpu,
    q: &mut DeviceBuffer<f32>,
    dims: Dims3,
    origin: Dims3,
    lattice: &DeviceBuffer<f32>,
    first: Dims3,
    table: Dims3,
    amplitude: f32,
) -> Result<()> {
    const KERNEL: &str = "gen_add_noise";
    let n = voxels(KERNEL, dims)?;
    check_len(KERNEL, "q", q, n)?;
    let (o, d, f, t) = (
        [origin.z, origin.y, origin.x],
        [dims.z, dims.y, dims.x],
        [first.z, first.y, first.x],
        [table.z, table.y, table.x],
    );
    for a in 0..3 {
        let last = o[a].checked_add(d[a] - 1).ok_or_else(|| refuse(KERNEL, format!("origin {origin:?} overflows")))?;
        if f[a] > o[a] / NOISE_SPACING || f[a] + t[a] < last / NOISE_SPACING + 2 {
            return Err(refuse(
                KERNEL,
                format!("a lattice of {table:?} at {first:?} does not cover {dims:?} at {origin:?}"),
            ));
        }
    }
    let points = table.checked_voxels().ok_or_else(|| refuse(KERNEL, format!("a lattice of {table:?}")))?;
    check_len(KERNEL, "lattice", lattice, points)?;
    let args = GenAddNoiseArgs { q: q.as_mut_ptr(), dims, origin, lattice: lattice.as_ptr(), first, table, amplitude };
    // SAFETY: one f32 per voxel of fewer than 2^32; the lattice table covers
    // every corner of the region's voxels and holds one value per point.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    Ok(())
}

/// The affinities `(3, block)` of the block at `offset` in the region of
/// `dims` at `origin`, from the inside map `q`; the block must lie in the
/// region at least one voxel in from its lower faces along every axis
/// where the volume does not start at the block.
pub(super) fn affinities(
    gpu: &Gpu,
    q: &DeviceBuffer<f32>,
    dims: Dims3,
    origin: Dims3,
    offset: Dims3,
    block: Dims3,
) -> Result<DeviceBuffer<f32>> {
    const KERNEL: &str = "gen_affinities";
    let n = voxels(KERNEL, dims)?;
    let voxels_in_block = voxels(KERNEL, block)?;
    check_len(KERNEL, "q", q, n)?;
    let (o, at, b, d) = (
        [origin.z, origin.y, origin.x],
        [offset.z, offset.y, offset.x],
        [block.z, block.y, block.x],
        [dims.z, dims.y, dims.x],
    );
    for a in 0..3 {
        let inside = at[a].checked_add(b[a]).is_some_and(|end| end <= d[a]);
        if !inside || (at[a] == 0 && o[a] != 0) {
            return Err(refuse(
                KERNEL,
                format!("a block of {block:?} at {offset:?} in a region of {dims:?} at {origin:?}"),
            ));
        }
    }
    let mut out = gpu.uninit::<f32>(3 * voxels_in_block as usize)?;
    let args = GenAffinitiesArgs { q: q.as_ptr(), dims, origin, offset, block, affinities: out.as_mut_ptr() };
    // SAFETY: the block lies in the region, one voxel in from its lower
    // faces unless the volume starts there; three f32s per block voxel.
    unsafe { gpu.launch(gpu.grid_stride_config(voxels_in_block), args) }?;
    Ok(out)
}
