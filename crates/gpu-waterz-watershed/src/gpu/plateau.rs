//! Plateau division: the plateau corners, the ordered breadth-first search
//! that reproduces waterz's queue positions, and the one direction each
//! voxel keeps (`kernels-rs/src/watershed/{plateau,directions}.rs`).

use super::launch::{self, EdgeMasks};
use gpu_waterz_abi::watershed::UNQUEUED;
use gpu_waterz_runtime::{DeviceBuffer, Gpu, Result, StageTimer};

/// The plateau search's outcome: the edges left after plateau division.
pub(crate) struct DividedPlateaus {
    /// The remaining edges, at most one direction per queued voxel.
    pub(crate) edges: EdgeMasks,
    /// Levels of the breadth-first search (its depth).
    pub(crate) levels: usize,
    /// Voxels queued, the corners included.
    pub(crate) queued: u64,
}

const _: () = assert!(UNQUEUED == u32::MAX, "a memset of 0xFF bytes writes UNQUEUED");

/// A buffer of `n` u32s set to [`UNQUEUED`], for queue positions and the
/// search's proposals.
fn unqueued(gpu: &Gpu, n: u64) -> Result<DeviceBuffer<u32>> {
    let mut buffer = gpu.uninit::<u32>(n as usize)?;
    gpu.memset_bytes(&mut buffer, 0xFF)?;
    Ok(buffer)
}

/// Divides the plateaus of `bits` as waterz's queue does; marks the
/// timer's stages.
pub(crate) fn divide(gpu: &Gpu, bits: EdgeMasks, timer: &mut StageTimer) -> Result<DividedPlateaus> {
    let n = bits.n_voxels();
    let mut frontier = launch::corners(gpu, &bits)?;
    timer.mark("corners")?;
    let mut order = unqueued(gpu, n)?;
    let mut best = unqueued(gpu, n)?;
    launch::bfs_init(gpu, &frontier, &mut order)?;
    timer.mark("queue init")?;
    let mut base = frontier.len();
    let mut levels = 0;
    while frontier.len() > 0 {
        let next = launch::bfs_level(gpu, &frontier, &bits, &mut order, &mut best, base)?;
        base += next.len();
        frontier = next;
        levels += 1;
    }
    drop(best);
    drop(frontier);
    timer.mark("plateau search")?;
    let edges = launch::plateau_direction(gpu, &bits, &order)?;
    drop(bits);
    drop(order);
    timer.mark("plateau directions")?;
    Ok(DividedPlateaus { edges, levels, queued: base })
}
