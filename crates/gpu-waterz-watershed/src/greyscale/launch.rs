//! Every launch of the greyscale watershed's kernels
//! (`kernels-rs/src/greyscale.rs`), and the only `unsafe` code of the
//! greyscale module. Each function checks the lengths its kernel reads and
//! writes (one value per cell, one flag per tile) before it launches;
//! distinct input and output buffers are distinct borrows.

use gpu_waterz_abi::greyscale::{
    halo_cells, tile_for_depth, GreyDescendArgs, GreyDistanceInitArgs, GreyLinesArgs, GreyMinimumNumberArgs,
    GreyMinimumRootsArgs, GreyPrepareArgs, GreyRelaxArgs, GreyRule, GREY_TILE_THREADS,
};
use gpu_waterz_abi::Dims3;
use gpu_waterz_runtime::{check_len, DeviceBuffer, DeviceElement, Gpu, LaunchConfig, Result};

/// Checks that each buffer is on `gpu` and holds at least `n` values.
fn check_all<T: DeviceElement>(
    gpu: &Gpu,
    kernel: &'static str,
    n: u64,
    buffers: &[(&str, &DeviceBuffer<T>)],
) -> Result<()> {
    for (what, b) in buffers {
        gpu.check_device(b, what)?;
        check_len(kernel, what, b, n)?;
    }
    Ok(())
}

fn cells(dims: Dims3) -> u64 {
    dims.z * dims.y * dims.x
}

/// `grey_prepare`: kinds, starting levels, the reserved-key flag.
#[allow(clippy::too_many_arguments)]
pub(super) fn prepare(
    gpu: &Gpu,
    n: u64,
    image: &DeviceBuffer<u32>,
    markers: Option<&DeviceBuffer<u32>>,
    mask: Option<&DeviceBuffer<u8>>,
    kinds: &mut DeviceBuffer<u8>,
    level: &mut DeviceBuffer<u32>,
    reserved: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_prepare";
    check_all(gpu, K, n, &[("image", image), ("level", level)])?;
    check_all(gpu, K, n, &[("kinds", kinds)])?;
    check_all(gpu, K, 1, &[("reserved", reserved)])?;
    if let Some(m) = markers {
        check_all(gpu, K, n, &[("markers", m)])?;
    }
    if let Some(m) = mask {
        check_all(gpu, K, n, &[("mask", m)])?;
    }
    let args = GreyPrepareArgs {
        n,
        image: image.as_ptr(),
        markers: markers.map_or(std::ptr::null(), |m| m.as_ptr()),
        mask: mask.map_or(std::ptr::null(), |m| m.as_ptr()),
        kinds: kinds.as_mut_ptr(),
        level: level.as_mut_ptr(),
        reserved: reserved.as_mut_ptr(),
    };
    // SAFETY: every array holds n values (checked), `reserved` one.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `grey_distance_init`: distance 0 at sources, infinite elsewhere.
pub(super) fn distance_init(
    gpu: &Gpu,
    dims: Dims3,
    connectivity: u32,
    kinds: &DeviceBuffer<u8>,
    level: &DeviceBuffer<u32>,
    distance: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_distance_init";
    let n = cells(dims);
    check_all(gpu, K, n, &[("kinds", kinds)])?;
    check_all(gpu, K, n, &[("level", level), ("distance", distance)])?;
    let args = GreyDistanceInitArgs {
        dims,
        connectivity,
        kinds: kinds.as_ptr(),
        level: level.as_ptr(),
        distance: distance.as_mut_ptr(),
    };
    // SAFETY: every array holds one value per cell (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `grey_descend`: parent codes and the labels of markers and minima.
#[allow(clippy::too_many_arguments)]
pub(super) fn descend(
    gpu: &Gpu,
    dims: Dims3,
    connectivity: u32,
    kinds: &DeviceBuffer<u8>,
    level: &DeviceBuffer<u32>,
    distance: &DeviceBuffer<u32>,
    markers: Option<&DeviceBuffer<u32>>,
    parents: &mut DeviceBuffer<u8>,
    labels: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_descend";
    let n = cells(dims);
    if n >= u32::MAX as u64 {
        return Err(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
            kernel: K,
            reason: format!("{n} cells: minima labels are an index + 1 in a u32"),
        });
    }
    check_all(gpu, K, n, &[("kinds", kinds), ("parents", parents)])?;
    check_all(gpu, K, n, &[("level", level), ("distance", distance), ("labels", labels)])?;
    if let Some(m) = markers {
        check_all(gpu, K, n, &[("markers", m)])?;
    }
    let args = GreyDescendArgs {
        dims,
        connectivity,
        has_markers: markers.is_some() as u32,
        kinds: kinds.as_ptr(),
        level: level.as_ptr(),
        distance: distance.as_ptr(),
        markers: markers.map_or(std::ptr::null(), |m| m.as_ptr()),
        parents: parents.as_mut_ptr(),
        labels: labels.as_mut_ptr(),
    };
    // SAFETY: every array holds one value per cell (checked); n < u32::MAX.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `grey_minimum_roots`: flags the first cell of each minimum.
pub(super) fn minimum_roots(
    gpu: &Gpu,
    n: u64,
    parents: &DeviceBuffer<u8>,
    labels: &DeviceBuffer<u32>,
    flags: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_minimum_roots";
    check_all(gpu, K, n, &[("parents", parents)])?;
    check_all(gpu, K, n, &[("labels", labels), ("flags", flags)])?;
    let args =
        GreyMinimumRootsArgs { n, parents: parents.as_ptr(), labels: labels.as_ptr(), flags: flags.as_mut_ptr() };
    // SAFETY: every array holds n values (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `grey_minimum_number`: minima renumbered `1..` through the roots' scan.
pub(super) fn minimum_number(
    gpu: &Gpu,
    n: u64,
    parents: &DeviceBuffer<u8>,
    offsets: &DeviceBuffer<u64>,
    labels: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_minimum_number";
    check_all(gpu, K, n, &[("parents", parents)])?;
    check_all(gpu, K, n, &[("offsets", offsets)])?;
    check_all(gpu, K, n, &[("labels", labels)])?;
    let args =
        GreyMinimumNumberArgs { n, parents: parents.as_ptr(), offsets: offsets.as_ptr(), labels: labels.as_mut_ptr() };
    // SAFETY: every array holds n values (checked); the kernel reads
    // `offsets` only at a label in 1..=n, minus one.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `grey_lines`: `labels_out` is `labels_in` with the watershed lines at 0.
#[allow(clippy::too_many_arguments)]
pub(super) fn lines(
    gpu: &Gpu,
    dims: Dims3,
    connectivity: u32,
    parents: &DeviceBuffer<u8>,
    level: &DeviceBuffer<u32>,
    distance: &DeviceBuffer<u32>,
    labels_in: &DeviceBuffer<u32>,
    labels_out: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_lines";
    let n = cells(dims);
    check_all(gpu, K, n, &[("parents", parents)])?;
    check_all(
        gpu,
        K,
        n,
        &[("level", level), ("distance", distance), ("labels_in", labels_in), ("labels_out", labels_out)],
    )?;
    let args = GreyLinesArgs {
        dims,
        connectivity,
        parents: parents.as_ptr(),
        level: level.as_ptr(),
        distance: distance.as_ptr(),
        labels_in: labels_in.as_ptr(),
        labels_out: labels_out.as_mut_ptr(),
    };
    // SAFETY: every array holds one value per cell (checked); the two label
    // arrays are distinct borrows.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// What one global step of the tile automaton reads and writes.
pub(super) struct RelaxStep<'a> {
    pub dims: Dims3,
    pub rule: GreyRule,
    pub connectivity: u32,
    pub step: u32,
    pub max_local_steps: u32,
    pub keys: &'a DeviceBuffer<u32>,
    pub kinds: &'a DeviceBuffer<u8>,
    pub parents: Option<&'a DeviceBuffer<u8>>,
    pub companion: Option<&'a DeviceBuffer<u32>>,
}

/// The number of tiles of `dims`.
pub(super) fn tile_count(dims: Dims3) -> u64 {
    let tile = tile_for_depth(dims.z);
    dims.z.div_ceil(tile[0] as u64) * dims.y.div_ceil(tile[1] as u64) * dims.x.div_ceil(tile[2] as u64)
}

/// `grey_relax`: one global step over the active tiles, `state_in` to
/// `state_out`; `changed` is set to the step's number if any cell changed.
#[allow(clippy::too_many_arguments)]
pub(super) fn relax_step(
    gpu: &Gpu,
    s: &RelaxStep<'_>,
    state_in: &DeviceBuffer<u32>,
    state_out: &mut DeviceBuffer<u32>,
    active_in: &DeviceBuffer<u32>,
    active_out: &mut DeviceBuffer<u32>,
    changed: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "grey_relax";
    let n = cells(s.dims);
    let n_tiles = tile_count(s.dims);
    if n_tiles > i32::MAX as u64 {
        return Err(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
            kernel: K,
            reason: format!("{n_tiles} tiles exceed the grid"),
        });
    }
    check_all(gpu, K, n, &[("keys", s.keys), ("state_in", state_in), ("state_out", state_out)])?;
    check_all(gpu, K, n, &[("kinds", s.kinds)])?;
    if let Some(p) = s.parents {
        check_all(gpu, K, n, &[("parents", p)])?;
    } else if s.rule == GreyRule::Label {
        return Err(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
            kernel: K,
            reason: "the label rule reads the parents".into(),
        });
    }
    if let Some(c) = s.companion {
        check_all(gpu, K, n, &[("companion", c)])?;
    }
    check_all(gpu, K, n_tiles, &[("active_in", active_in), ("active_out", active_out)])?;
    check_all(gpu, K, 1, &[("changed", changed)])?;
    let tile = tile_for_depth(s.dims.z);
    let config = LaunchConfig {
        blocks: n_tiles as u32,
        threads: GREY_TILE_THREADS,
        shared_bytes: (2 * halo_cells(tile) + 1) * 4,
    };
    let args = GreyRelaxArgs {
        dims: s.dims,
        rule: s.rule as u32,
        connectivity: s.connectivity,
        step: s.step,
        max_local_steps: s.max_local_steps,
        image: s.keys.as_ptr(),
        kinds: s.kinds.as_ptr(),
        parents: s.parents.map_or(std::ptr::null(), |p| p.as_ptr()),
        companion: s.companion.map_or(std::ptr::null(), |c| c.as_ptr()),
        state_in: state_in.as_ptr(),
        state_out: state_out.as_mut_ptr(),
        active_in: active_in.as_ptr(),
        active_out: active_out.as_mut_ptr(),
        changed: changed.as_mut_ptr(),
    };
    // SAFETY: every per-cell array holds one value per cell and the tile
    // flags one per tile (checked); the two states are distinct borrows; one
    // block of GREY_TILE_THREADS per tile with the shared memory the kernel
    // documents.
    unsafe { gpu.launch(config, args) }
}
