//! The blockwise decode's per-block steps: the plateaus of one block of a
//! larger volume, whose masks were computed over the block and a margin
//! (`gpu_waterz_blockwise` divides the plateaus that reach outside the
//! block over the whole volume), and the block's basins.

use super::coords;
use super::labels::find_root;
use crate::device::*;
use gpu_waterz_abi::watershed::{
    block_inside_edges, block_plateau_info, neighbour, neighbours_inside, WsBlockDirectionsArgs,
    WsBlockInsideEdgesArgs, WsBlockOpenRootsArgs, WsBlockPlateauInfoArgs, BLOCK_CORNER, BLOCK_OPEN, DIRECTION_BITS,
};

kernel! {
    /// A block's plateau edges (faces both voxels mark, inside the block)
    /// and each voxel's mask with its corner and open-face flags
    /// (`block_plateau_info`).
    ///
    /// # Safety
    /// `masks` holds one mask per voxel of `region` (fewer than 2^32), none
    /// marking a face that leaves it; the block (`offset + block`) lies in
    /// the region; `mutual` and `info` hold one u8 per block voxel.
    ///
    /// # Parameters
    /// - `masks`, `region`: the region's edge masks; `offset`, `block`: the
    ///   block's first voxel in the region and its extent; `mutual`, `info`:
    ///   the outputs, per block voxel in C order.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one block voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ws_block_plateau_info(
        masks: *const u8,
        region: gpu_waterz_abi::Dims3,
        offset: gpu_waterz_abi::Dims3,
        block: gpu_waterz_abi::Dims3,
        mutual: *mut u8,
        info: *mut u8,
    ) as WsBlockPlateauInfoArgs {
        let n = block.z * block.y * block.x;
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, block);
            let h = region.index(z + offset.z, y + offset.y, x + offset.x);
            // SAFETY: `h` is a voxel of the region; a marked face leads to a
            // voxel of the region (no mask leaves it); `i < n`.
            unsafe {
                let mask = *masks.add(h as usize);
                let mut neighbour_masks = [0u8; 6];
                for (d, m) in neighbour_masks.iter_mut().enumerate() {
                    if mask & DIRECTION_BITS[d] != 0 {
                        *m = *masks.add(neighbour(h, d, region) as usize);
                    }
                }
                let (m, flags) = block_plateau_info(mask, neighbour_masks, neighbours_inside(block, z, y, x));
                *mutual.add(i as usize) = m;
                *info.add(i as usize) = flags;
            }
        });
    }
}

kernel! {
    /// Flags the root of every plateau one of whose voxels shares a face
    /// both mark with a voxel outside the block.
    ///
    /// # Safety
    /// `info` and `flags` hold `n` u8s, `flags` zeroed; `parent` is a
    /// complete forest over `n` voxels (`uf_tile_faces` has run).
    ///
    /// # Parameters
    /// - `info`: `ws_block_plateau_info`'s flags; `parent`: the forest of
    ///   the plateau edges; `n`: the block's voxels; `flags`: 1 at the roots
    ///   of open plateaus.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration (racing writes store the
    /// same value).
    pub unsafe extern "ptx-kernel" fn ws_block_open_roots(
        info: *const u8,
        parent: *const u32,
        n: u64,
        flags: *mut u8,
    ) as WsBlockOpenRootsArgs {
        grid_stride(n, |i| {
            // SAFETY: indices below `n`; roots are voxels of the forest.
            unsafe {
                if *info.add(i as usize) & BLOCK_OPEN != 0 {
                    *flags.add(find_root(parent, i as u32) as usize) = 1;
                }
            }
        });
    }
}

kernel! {
    /// Each block voxel's byte: the directions the region's plateau
    /// division left it when its plateau lies inside the block; its mask
    /// with `BLOCK_OPEN` (and `BLOCK_CORNER` on corners) when its plateau
    /// is open.
    ///
    /// # Safety
    /// `info`, `flags`, `out` hold one u8 and `parent` one u32 per block
    /// voxel, `parent` a complete forest and `flags` written by
    /// `ws_block_open_roots` over it; `divided` holds one u8 per voxel of
    /// `region`, in which the block (`offset + block`) lies.
    ///
    /// # Parameters
    /// - `info`, `parent`, `flags`: the block's plateau flags and forest;
    ///   `divided`, `region`: the region's directions; `offset`, `block`:
    ///   the block in the region; `out`: one byte per block voxel.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one block voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ws_block_directions(
        info: *const u8,
        parent: *const u32,
        flags: *const u8,
        divided: *const u8,
        region: gpu_waterz_abi::Dims3,
        offset: gpu_waterz_abi::Dims3,
        block: gpu_waterz_abi::Dims3,
        out: *mut u8,
    ) as WsBlockDirectionsArgs {
        let n = block.z * block.y * block.x;
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, block);
            // SAFETY: indices below `n` and in the region; roots are voxels
            // of the forest.
            unsafe {
                let flags_here = *info.add(i as usize);
                let open = *flags.add(find_root(parent, i as u32) as usize) != 0;
                *out.add(i as usize) = if open {
                    (flags_here & (0x3f | BLOCK_CORNER)) | BLOCK_OPEN
                } else {
                    *divided.add(region.index(z + offset.z, y + offset.y, x + offset.x) as usize)
                };
            }
        });
    }
}

kernel! {
    /// A block's directions reduced to the faces inside it
    /// (`block_inside_edges`), for the components kernels.
    ///
    /// # Safety
    /// `bits` and `edges` hold one u8 per voxel of `block`.
    ///
    /// # Parameters
    /// - `bits`: the block's directions; `block`: its extent; `edges`: the
    ///   output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one voxel per iteration.
    pub unsafe extern "ptx-kernel" fn ws_block_inside_edges(
        bits: *const u8,
        block: gpu_waterz_abi::Dims3,
        edges: *mut u8,
    ) as WsBlockInsideEdgesArgs {
        let n = block.z * block.y * block.x;
        grid_stride(n, |i| {
            let (z, y, x) = coords(i, block);
            // SAFETY: `i < n`.
            unsafe {
                *edges.add(i as usize) = block_inside_edges(*bits.add(i as usize), neighbours_inside(block, z, y, x));
            }
        });
    }
}
