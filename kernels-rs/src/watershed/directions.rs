//! Step 3: plateau division, the one direction each voxel keeps.

use crate::device::*;
use gpu_waterz_abi::watershed::{
    is_mutual, neighbour, plateau_direction, WsPlateauDirectionArgs, DIRECTION_BITS, UNQUEUED,
};

kernel! {
    /// The edges that remain after plateau division: a queued voxel keeps the
    /// one direction waterz's queue gives it; so does a corner with no mutual
    /// edge (which waterz queues too; every neighbour qualifies); a plateau
    /// voxel the queue never reached (a closed plateau) keeps its mask. Every
    /// voxel keeps a subset of its marked directions.
    ///
    /// # Safety
    /// `bits`, `order`, `edges` hold one entry per voxel of `dims`; no mask
    /// of `bits` marks a face out of the volume.
    ///
    /// # Parameters
    /// - `bits`: original masks; `dims`; `order`: queue positions
    ///   (`UNQUEUED`); `edges`: the remaining edges.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ws_plateau_direction(
        bits: *const u8,
        dims: gpu_waterz_abi::Dims3,
        order: *const u32,
        edges: *mut u8,
    ) as WsPlateauDirectionArgs {
        let n = dims.z * dims.y * dims.x;
        grid_stride(n, |i| {
            // SAFETY: indices in bounds; marked neighbours are inside.
            unsafe {
                let b = *bits.add(i as usize);
                let mut nb = [0u8; 6];
                let mut plateau = false;
                for d in 0..6 {
                    if b & DIRECTION_BITS[d] != 0 {
                        nb[d] = *bits.add(neighbour(i, d, dims) as usize);
                        plateau |= is_mutual(nb[d], d);
                    }
                }
                // Queue positions only matter on plateaus: elsewhere every
                // marked face descends and the last one is kept.
                let result = if !plateau {
                    plateau_direction(b, nb, [UNQUEUED; 6], UNQUEUED)
                } else {
                    let o = *order.add(i as usize);
                    if o == UNQUEUED {
                        b
                    } else {
                        let mut no = [UNQUEUED; 6];
                        for d in 0..6 {
                            if b & DIRECTION_BITS[d] != 0 {
                                no[d] = *order.add(neighbour(i, d, dims) as usize);
                            }
                        }
                        plateau_direction(b, nb, no, o)
                    }
                };
                *edges.add(i as usize) = result;
            }
        });
    }
}
