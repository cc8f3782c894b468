//! Launch constants, sentinels and argument structs of the watershed
//! kernels (`kernels-rs/src/watershed/`).
//!
//! The grid-stride kernels run with the runtime's grid-stride launch; the
//! corner and fragment kernels are scan-tile kernels, launched like
//! `scan_tile_sums` (see [`crate::primitives`]); the components kernels run
//! one block of [`UF_THREADS`] per tile of [`uf_tile_grid`](super::uf_tile_grid).

use super::{WatershedParams, UF_TILE, UF_TILE_X, UF_TILE_Y, UF_TILE_Z};
use crate::Dims3;

/// The most voxels a volume on the GPU may have: voxel indices, queue
/// positions and labels are u32, and [`UNQUEUED`] (`u32::MAX`) must stay
/// distinct from every queue position.
pub const MAX_VOXELS: u64 = u32::MAX as u64 - 1;

/// The queue position of a voxel that was never queued (and the starting
/// value of the search's earliest-parent proposals).
pub const UNQUEUED: u32 = u32::MAX;

const _: () = assert!(MAX_VOXELS < UNQUEUED as u64, "queue positions stay below UNQUEUED");

/// Threads per block of the components kernels (at least the voxels of
/// a tile's largest face).
pub const UF_THREADS: u32 = 256;

/// Dynamic shared memory of a components tile in `uf_tile_local`: one u32
/// parent and one u32 mask per voxel.
pub const UF_SHARED_BYTES: u32 = (2 * UF_TILE * 4) as u32;

// One thread per voxel of each low face of a tile.
const _: () = assert!(
    UF_THREADS as u64 >= UF_TILE_Y * UF_TILE_X
        && UF_THREADS as u64 >= UF_TILE_Z * UF_TILE_X
        && UF_THREADS as u64 >= UF_TILE_Z * UF_TILE_Y
);

/// `ws_mask_f32`: each voxel's edge mask from float32 affinities.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsMaskF32Args {
    /// `3 * n` f32s, `(3, z, y, x)` in C order, with `n` the voxels of `dims`.
    pub affs: *const f32,
    /// The volume's extent.
    pub dims: Dims3,
    /// waterz's thresholds.
    pub params: WatershedParams,
    /// `n` u8s: each voxel's mask.
    pub bits: *mut u8,
}

/// `ws_check_f32`: counts float32 affinities that are not finite (with
/// the first one's index) and finite ones outside `[0, 1]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsCheckF32Args {
    /// `n_values` f32s.
    pub affs: *const f32,
    /// The number of values.
    pub n_values: u64,
    /// Two zeroed u64s: the values that are NaN or infinite, and the finite
    /// values outside `[0, 1]`.
    pub counts: *mut u64,
    /// One u64 set to `u64::MAX`: receives the smallest index of a value
    /// that is not finite.
    pub first_non_finite: *mut u64,
}

/// `ws_mask_u8`: each voxel's edge mask from uint8 affinities (`k / 255`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsMaskU8Args {
    /// `3 * n` u8s, `(3, z, y, x)` in C order, with `n` the voxels of `dims`.
    pub affs: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// waterz's thresholds.
    pub params: WatershedParams,
    /// `n` u8s: each voxel's mask.
    pub bits: *mut u8,
}

/// `ws_corner_count`: each scan tile's number of plateau corners.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsCornerCountArgs {
    /// One mask per voxel of `dims`; no mask marks a face out of the volume.
    pub bits: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// One u64 per scan tile of the voxels.
    pub tile_sums: *mut u64,
}

/// `ws_corner_compact`: the plateau corners in index order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsCornerCompactArgs {
    /// As in [`WsCornerCountArgs`].
    pub bits: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// One u64 per scan tile: the exclusive scan of `ws_corner_count`'s counts.
    pub tile_offsets: *const u64,
    /// One u32 per corner.
    pub corners: *mut u32,
}

/// `ws_bfs_init`: `order[frontier[k]] = k`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBfsInitArgs {
    /// `f` voxel indices, each below the length of `order`.
    pub frontier: *const u32,
    /// The frontier's length.
    pub f: u64,
    /// Queue positions, one per voxel.
    pub order: *mut u32,
}

/// `ws_bfs_propose`: each unqueued mutual neighbour of the frontier records
/// its earliest parent.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBfsProposeArgs {
    /// `f` voxels of `dims`.
    pub frontier: *const u32,
    /// The frontier's length.
    pub f: u64,
    /// One mask per voxel; no mask marks a face out of the volume.
    pub bits: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// Queue positions so far, one per voxel.
    pub order: *const u32,
    /// The earliest parent's frontier position, one per voxel (atomic min).
    pub best: *mut u32,
}

/// `ws_bfs_claim`: `flags[6 k + d] = 1` where frontier voxel `k` queues its
/// neighbour in direction `d`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBfsClaimArgs {
    /// `f` voxels of `dims`.
    pub frontier: *const u32,
    /// The frontier's length.
    pub f: u64,
    /// One mask per voxel; no mask marks a face out of the volume.
    pub bits: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// Queue positions so far, one per voxel.
    pub order: *const u32,
    /// `ws_bfs_propose`'s earliest parents, one per voxel.
    pub best: *const u32,
    /// `6 f` u32s.
    pub flags: *mut u32,
}

/// `ws_bfs_emit`: the next frontier and its queue positions.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBfsEmitArgs {
    /// `f` voxels of `dims`.
    pub frontier: *const u32,
    /// The frontier's length.
    pub f: u64,
    /// The volume's extent.
    pub dims: Dims3,
    /// `ws_bfs_claim`'s `6 f` flags (0 or 1).
    pub flags: *const u32,
    /// `6 f` u64s: the exclusive scan of `flags`.
    pub offsets: *const u64,
    /// The queue position of the next frontier's first voxel.
    pub base: u64,
    /// One u32 per set flag: the next frontier.
    pub next: *mut u32,
    /// Queue positions, one per voxel.
    pub order: *mut u32,
}

/// `ws_plateau_direction`: the edges that remain after plateau division.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsPlateauDirectionArgs {
    /// One mask per voxel of `dims`; no mask marks a face out of the volume.
    pub bits: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// Queue positions (or [`UNQUEUED`]), one per voxel.
    pub order: *const u32,
    /// One u8 per voxel: the remaining edges.
    pub edges: *mut u8,
}

/// `uf_tile_local`: components within each tile.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UfTileLocalArgs {
    /// One edge mask per voxel of `dims`.
    pub edges: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// One u32 per voxel: the forest.
    pub parent: *mut u32,
}

/// `uf_tile_faces`: joins the tiles' components along their faces.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UfTileFacesArgs {
    /// One edge mask per voxel of `dims`.
    pub edges: *const u8,
    /// The volume's extent.
    pub dims: Dims3,
    /// `uf_tile_local`'s forest, one u32 per voxel, joined in place.
    pub parent: *mut u32,
}

/// `ws_fragment_count`: each scan tile's number of fragment roots.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsFragmentCountArgs {
    /// `n` edge masks (0 = background).
    pub edges: *const u8,
    /// `n` u32s: the complete forest.
    pub parent: *const u32,
    /// The number of voxels.
    pub n: u64,
    /// One u64 per scan tile.
    pub tile_sums: *mut u64,
}

/// `ws_fragment_number`: the roots' labels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsFragmentNumberArgs {
    /// `n` edge masks (0 = background).
    pub edges: *const u8,
    /// `n` u32s: the complete forest.
    pub parent: *const u32,
    /// The number of voxels.
    pub n: u64,
    /// One u64 per scan tile: the exclusive scan of `ws_fragment_count`'s counts.
    pub tile_offsets: *const u64,
    /// `n` u32s: the labels, written at the roots.
    pub labels: *mut u32,
}

/// `ws_labels`: every voxel's label from its root's.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsLabelsArgs {
    /// `n` edge masks (0 = background).
    pub edges: *const u8,
    /// `n` u32s: the complete forest.
    pub parent: *const u32,
    /// The number of voxels.
    pub n: u64,
    /// `n` u32s: the labels, completed in place.
    pub labels: *mut u32,
}

/// `ws_block_plateau_info`: a block's plateau edges and voxel flags, from
/// the masks of a region that holds the block and one voxel around it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBlockPlateauInfoArgs {
    /// One mask per voxel of `region`; no mask marks a face out of it.
    pub masks: *const u8,
    /// The region's extent.
    pub region: Dims3,
    /// The block's first voxel in the region.
    pub offset: Dims3,
    /// The block's extent.
    pub block: Dims3,
    /// One u8 per block voxel: the faces both voxels mark, inside the block.
    pub mutual: *mut u8,
    /// One u8 per block voxel: `block_plateau_info`'s flags.
    pub info: *mut u8,
}

/// `ws_block_open_roots`: flags the roots of the plateaus that reach
/// outside the block.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBlockOpenRootsArgs {
    /// `n` bytes of `ws_block_plateau_info`.
    pub info: *const u8,
    /// `n` u32s: the complete forest of the plateau edges.
    pub parent: *const u32,
    /// The block's voxel count.
    pub n: u64,
    /// `n` zeroed u8s: 1 at the roots of open plateaus.
    pub flags: *mut u8,
}

/// `ws_block_directions`: each block voxel's directions, or its mask and
/// flags when its plateau is open.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBlockDirectionsArgs {
    /// One byte per block voxel from `ws_block_plateau_info`.
    pub info: *const u8,
    /// The forest of `ws_block_open_roots`.
    pub parent: *const u32,
    /// Its flags.
    pub flags: *const u8,
    /// The region's directions after plateau division.
    pub divided: *const u8,
    /// The region's extent.
    pub region: Dims3,
    /// The block's first voxel in the region.
    pub offset: Dims3,
    /// The block's extent.
    pub block: Dims3,
    /// One u8 per block voxel.
    pub out: *mut u8,
}

/// `ws_block_inside_edges`: a block's directions reduced to the faces
/// inside it, for its basins.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsBlockInsideEdgesArgs {
    /// One direction mask per block voxel.
    pub bits: *const u8,
    /// The block's extent.
    pub block: Dims3,
    /// One u8 per block voxel.
    pub edges: *mut u8,
}

impl_kernel_args!(
    WsMaskF32Args => WsMaskF32 { affs, dims, params, bits },
    WsMaskU8Args => WsMaskU8 { affs, dims, params, bits },
    WsCheckF32Args => WsCheckF32 { affs, n_values, counts, first_non_finite },
    WsCornerCountArgs => WsCornerCount { bits, dims, tile_sums },
    WsCornerCompactArgs => WsCornerCompact { bits, dims, tile_offsets, corners },
    WsBfsInitArgs => WsBfsInit { frontier, f, order },
    WsBfsProposeArgs => WsBfsPropose { frontier, f, bits, dims, order, best },
    WsBfsClaimArgs => WsBfsClaim { frontier, f, bits, dims, order, best, flags },
    WsBfsEmitArgs => WsBfsEmit { frontier, f, dims, flags, offsets, base, next, order },
    WsPlateauDirectionArgs => WsPlateauDirection { bits, dims, order, edges },
    UfTileLocalArgs => UfTileLocal { edges, dims, parent },
    UfTileFacesArgs => UfTileFaces { edges, dims, parent },
    WsFragmentCountArgs => WsFragmentCount { edges, parent, n, tile_sums },
    WsFragmentNumberArgs => WsFragmentNumber { edges, parent, n, tile_offsets, labels },
    WsLabelsArgs => WsLabels { edges, parent, n, labels },
    WsBlockPlateauInfoArgs => WsBlockPlateauInfo { masks, region, offset, block, mutual, info },
    WsBlockOpenRootsArgs => WsBlockOpenRoots { info, parent, n, flags },
    WsBlockDirectionsArgs => WsBlockDirections { info, parent, flags, divided, region, offset, block, out },
    WsBlockInsideEdgesArgs => WsBlockInsideEdges { bits, block, edges },
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kernel, KernelArgs};
    use core::mem::{align_of, size_of};

    /// The sizes of the argument structs, whose fields are the kernels'
    /// parameters: pointers and u64s take 8, `Dims3` 24, `WatershedParams`
    /// 8 (two f32s).
    #[test]
    fn argument_structs_have_the_expected_layout() {
        fn check<A: KernelArgs>(bytes: usize, kernel: Kernel) {
            assert_eq!(size_of::<A>(), bytes, "{}", kernel.name());
            assert_eq!(align_of::<A>(), 8, "{}", kernel.name());
            assert_eq!(A::KERNEL, kernel);
        }
        check::<WsMaskF32Args>(48, Kernel::WsMaskF32);
        check::<WsMaskU8Args>(48, Kernel::WsMaskU8);
        check::<WsCornerCountArgs>(40, Kernel::WsCornerCount);
        check::<WsCornerCompactArgs>(48, Kernel::WsCornerCompact);
        check::<WsBfsInitArgs>(24, Kernel::WsBfsInit);
        check::<WsBfsProposeArgs>(64, Kernel::WsBfsPropose);
        check::<WsBfsClaimArgs>(72, Kernel::WsBfsClaim);
        check::<WsBfsEmitArgs>(80, Kernel::WsBfsEmit);
        check::<WsPlateauDirectionArgs>(48, Kernel::WsPlateauDirection);
        check::<UfTileLocalArgs>(40, Kernel::UfTileLocal);
        check::<UfTileFacesArgs>(40, Kernel::UfTileFaces);
        check::<WsFragmentCountArgs>(32, Kernel::WsFragmentCount);
        check::<WsFragmentNumberArgs>(40, Kernel::WsFragmentNumber);
        check::<WsLabelsArgs>(32, Kernel::WsLabels);
    }

    #[test]
    fn components_shared_memory_holds_a_parent_and_a_mask_per_voxel() {
        assert_eq!(UF_SHARED_BYTES as u64, UF_TILE * 2 * 4);
    }
}
