//! The per-voxel rules of waterz's watershed (`basic_watershed.hpp`).
//!
//! The six faces of a voxel are numbered in waterz's order: the faces to the
//! previous voxel along z, y, x (`-z, -y, -x`), then to the next one
//! (`+z, +y, +x`). Face `d` of a voxel is face `OPPOSITE[d]` of the neighbour
//! it leads to.
//!
//! The kernels' launch constants, sentinels and argument structs are in
//! the private `kernels` module, re-exported here.

mod kernels;

pub use kernels::*;

/// Bit of the face to the previous voxel along z.
pub const NEG_Z: u8 = 0x01;
/// Bit of the face to the previous voxel along y.
pub const NEG_Y: u8 = 0x02;
/// Bit of the face to the previous voxel along x.
pub const NEG_X: u8 = 0x04;
/// Bit of the face to the next voxel along z.
pub const POS_Z: u8 = 0x08;
/// Bit of the face to the next voxel along y.
pub const POS_Y: u8 = 0x10;
/// Bit of the face to the next voxel along x.
pub const POS_X: u8 = 0x20;

/// The direction bits in waterz's order `-z, -y, -x, +z, +y, +x`.
pub const DIRECTION_BITS: [u8; 6] = [NEG_Z, NEG_Y, NEG_X, POS_Z, POS_Y, POS_X];

/// For direction `d`, the index of the direction that leads back.
pub const OPPOSITE: [usize; 6] = [3, 4, 5, 0, 1, 2];

/// Extent along z of one tile of the components stage: each GPU block
/// joins the voxels of one tile in shared memory before the tiles are
/// joined along their faces.
pub const UF_TILE_Z: u64 = 8;
/// Extent along y of one components tile.
pub const UF_TILE_Y: u64 = 8;
/// Extent along x of one components tile (one warp reads one row).
pub const UF_TILE_X: u64 = 32;
/// Voxels per components tile.
pub const UF_TILE: u64 = UF_TILE_Z * UF_TILE_Y * UF_TILE_X;

/// Whether the remaining edges join a voxel with mask `bits` to its
/// neighbour in direction `d`, whose mask is `neighbour_bits`: either
/// voxel may mark the shared face (components are weakly connected).
#[inline(always)]
pub fn joined(bits: u8, neighbour_bits: u8, d: usize) -> bool {
    bits & DIRECTION_BITS[d] != 0 || neighbour_bits & DIRECTION_BITS[OPPOSITE[d]] != 0
}

/// The number of components tiles along z, y and x.
#[inline(always)]
pub fn uf_tile_grid(dims: crate::Dims3) -> [u64; 3] {
    [dims.z.div_ceil(UF_TILE_Z), dims.y.div_ceil(UF_TILE_Y), dims.x.div_ceil(UF_TILE_X)]
}

/// The first voxel `(z, y, x)` of components tile `tile` (tiles in C
/// order over [`uf_tile_grid`]).
#[inline(always)]
pub fn uf_tile_origin(tile: u64, dims: crate::Dims3) -> (u64, u64, u64) {
    let [_, tiles_y, tiles_x] = uf_tile_grid(dims);
    let tx = tile % tiles_x;
    let rest = tile / tiles_x;
    let ty = rest % tiles_y;
    let tz = rest / tiles_y;
    (tz * UF_TILE_Z, ty * UF_TILE_Y, tx * UF_TILE_X)
}

/// The offset `(z, y, x)` inside a components tile of its voxel `local`
/// (C order within the tile).
#[inline(always)]
pub fn uf_tile_offset(local: u32) -> (u32, u32, u32) {
    let (tile_y, tile_x) = (UF_TILE_Y as u32, UF_TILE_X as u32);
    (local / (tile_y * tile_x), (local / tile_x) % tile_y, local % tile_x)
}

/// Thresholds of the watershed, as waterz takes them (`float32`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WatershedParams {
    /// Affinities at or below this never connect voxels; a voxel with no
    /// face above it is background (label 0). Faces outside the volume count
    /// as this value.
    pub aff_threshold_low: f32,
    /// Faces at or above this always connect their voxels.
    pub aff_threshold_high: f32,
}

impl WatershedParams {
    /// Whether [`steepest_mask`] with these thresholds never marks a face
    /// that leaves the volume. Such faces count as `aff_threshold_low`, so
    /// they never equal a maximum above it; they are marked only as faces
    /// at or above `aff_threshold_high`, which needs `low >= high`. The
    /// kernels that follow marked faces rely on this.
    #[inline(always)]
    pub fn keeps_masks_inside(&self) -> bool {
        !(self.aff_threshold_low >= self.aff_threshold_high)
    }
}

/// The affinities of the six faces of voxel `(z, y, x)`, in waterz's
/// direction order, with faces outside the volume set to `low`.
///
/// `load(c, i)` returns channel `c` of the `(3, z, y, x)` affinities at
/// linear voxel index `i`; channel `c` holds the face between a voxel and its
/// predecessor along axis `c`. Host and device call this with their own
/// loads (a slice, a raw pointer, uint8 data).
#[inline(always)]
pub fn face_affinities_with(
    dims: crate::Dims3,
    z: u64,
    y: u64,
    x: u64,
    low: f32,
    load: impl Fn(u64, u64) -> f32,
) -> [f32; 6] {
    let idx = dims.index(z, y, x);
    let [sz, sy, _] = dims.strides();
    [
        if z > 0 { load(0, idx) } else { low },
        if y > 0 { load(1, idx) } else { low },
        if x > 0 { load(2, idx) } else { low },
        if z + 1 < dims.z { load(0, idx + sz) } else { low },
        if y + 1 < dims.y { load(1, idx + sy) } else { low },
        if x + 1 < dims.x { load(2, idx + 1) } else { low },
    ]
}

/// [`face_affinities_with`] over a C-ordered `(3, z, y, x)` float slice.
#[inline(always)]
pub fn face_affinities(affs: &[f32], dims: crate::Dims3, z: u64, y: u64, x: u64, low: f32) -> [f32; 6] {
    let n = dims.z * dims.y * dims.x;
    face_affinities_with(dims, z, y, x, low, |c, i| affs[(c * n + i) as usize])
}

/// The linear index of the neighbour of voxel `idx` in direction `d`
/// (waterz's order). Only valid when that neighbour is inside the volume,
/// which holds for every direction a voxel's edge mask marks.
#[inline(always)]
pub fn neighbour(idx: u64, d: usize, dims: crate::Dims3) -> u64 {
    let [sz, sy, _] = dims.strides();
    match d {
        0 => idx - sz,
        1 => idx - sy,
        2 => idx - 1,
        3 => idx + sz,
        4 => idx + sy,
        _ => idx + 1,
    }
}

/// Whether the face of `bits` in direction `d` is marked back by the
/// neighbour with mask `neighbour_bits` (a plateau edge).
#[inline(always)]
pub fn is_mutual(neighbour_bits: u8, d: usize) -> bool {
    neighbour_bits & DIRECTION_BITS[OPPOSITE[d]] != 0
}

/// The single direction a plateau voxel keeps after waterz's plateau
/// division: the last marked direction `d` whose neighbour does not mark
/// it back, or was processed earlier in the breadth-first queue.
///
/// `neighbour_bits[d]` is the original mask of the neighbour in direction
/// `d` (unused where `bits` has no bit `d`); `neighbour_order[d]` is its
/// position in the queue (`u32::MAX` if never queued); `order` is this
/// voxel's position.
#[inline(always)]
pub fn plateau_direction(bits: u8, neighbour_bits: [u8; 6], neighbour_order: [u32; 6], order: u32) -> u8 {
    let mut to_set = 0u8;
    let mut d = 0;
    while d < 6 {
        if bits & DIRECTION_BITS[d] != 0 && (!is_mutual(neighbour_bits[d], d) || neighbour_order[d] < order) {
            to_set = DIRECTION_BITS[d];
        }
        d += 1;
    }
    to_set
}

/// waterz's edge mask of one voxel: the bit of every face whose affinity
/// equals the voxel's maximum, or is at least `high`; no bit at all when the
/// maximum is not above `low` (the voxel is background).
///
/// `faces` is in waterz's order (`-z, -y, -x, +z, +y, +x`).
#[inline(always)]
pub fn steepest_mask(faces: [f32; 6], low: f32, high: f32) -> u8 {
    // waterz takes std::max over {negx, negy, negz, posx, posy, posz}; the
    // maximum of finite values does not depend on the order.
    let mut m = faces[0];
    let mut d = 1;
    while d < 6 {
        if faces[d] > m {
            m = faces[d];
        }
        d += 1;
    }
    if !(m > low) {
        return 0;
    }
    let mut mask = 0u8;
    let mut d = 0;
    while d < 6 {
        if faces[d] == m || faces[d] >= high {
            mask |= DIRECTION_BITS[d];
        }
        d += 1;
    }
    mask
}

/// Set in a block voxel's byte from `ws_block_plateau_info` when the voxel
/// is a plateau corner (it marks a face its neighbour does not mark back);
/// the blockwise decode's open voxels keep it.
pub const BLOCK_CORNER: u8 = 0x80;

/// Set in a block voxel's byte from `ws_block_plateau_info` when the voxel
/// shares a face both mark with a voxel outside the block; in the bytes of
/// `ws_block_directions`, set on the voxels of open plateaus (those that
/// reach outside the block), whose division is left to the whole volume.
pub const BLOCK_OPEN: u8 = 0x40;

/// Set in an edge mask of `ws_block_inside_edges` on every voxel that is
/// not background, so that a voxel whose directions all leave the block is
/// still a component of its own (the components kernels read only the six
/// direction bits; the labels kernels take a zero mask for background).
pub const BLOCK_PRESENT: u8 = 0x40;

/// One block voxel's plateau faces, from its mask and its neighbours'
/// masks (`neighbour_masks[d]`, read only where `mask` marks `d`):
/// `(mutual, info)`. `mutual` marks the faces both voxels mark whose
/// neighbour lies inside the block (`inside[d]`), the plateau edges for the
/// block's union-find; `info` is the mask with [`BLOCK_CORNER`] when some
/// marked face is not marked back and [`BLOCK_OPEN`] when a face both mark
/// leads outside the block.
#[inline(always)]
pub fn block_plateau_info(mask: u8, neighbour_masks: [u8; 6], inside: [bool; 6]) -> (u8, u8) {
    let (mut mutual, mut info) = (0u8, mask);
    let mut d = 0;
    while d < 6 {
        if mask & DIRECTION_BITS[d] != 0 {
            if !is_mutual(neighbour_masks[d], d) {
                info |= BLOCK_CORNER;
            } else if inside[d] {
                mutual |= DIRECTION_BITS[d];
            } else {
                info |= BLOCK_OPEN;
            }
        }
        d += 1;
    }
    (mutual, info)
}

/// A block voxel's edges for the block's basins: its directions that lead
/// to voxels inside the block (`inside[d]`), with [`BLOCK_PRESENT`] unless
/// it has none at all (background).
#[inline(always)]
pub fn block_inside_edges(bits: u8, inside: [bool; 6]) -> u8 {
    let mut edges = 0u8;
    let mut d = 0;
    while d < 6 {
        if bits & DIRECTION_BITS[d] != 0 && inside[d] {
            edges |= DIRECTION_BITS[d];
        }
        d += 1;
    }
    if bits & 0x3f != 0 {
        edges | BLOCK_PRESENT
    } else {
        0
    }
}

/// Which neighbours of voxel `(z, y, x)` of a volume of `dims` lie inside
/// it, in direction order.
#[inline(always)]
pub fn neighbours_inside(dims: crate::Dims3, z: u64, y: u64, x: u64) -> [bool; 6] {
    [z > 0, y > 0, x > 0, z + 1 < dims.z, y + 1 < dims.y, x + 1 < dims.x]
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    #[test]
    fn components_tiles_cover_every_voxel_once() {
        for dims in [crate::Dims3::new(1, 1, 1), crate::Dims3::new(9, 17, 33), crate::Dims3::new(16, 8, 64)] {
            let [tz, ty, tx] = uf_tile_grid(dims);
            let mut seen = std::vec![0u32; (dims.z * dims.y * dims.x) as usize];
            for tile in 0..tz * ty * tx {
                let (z0, y0, x0) = uf_tile_origin(tile, dims);
                for local in 0..UF_TILE as u32 {
                    let (lz, ly, lx) = uf_tile_offset(local);
                    let (z, y, x) = (z0 + lz as u64, y0 + ly as u64, x0 + lx as u64);
                    if z < dims.z && y < dims.y && x < dims.x {
                        seen[dims.index(z, y, x) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{dims:?}");
        }
    }

    #[test]
    fn either_voxel_may_join_a_face() {
        for d in 0..6 {
            let back = OPPOSITE[d];
            assert!(joined(DIRECTION_BITS[d], 0, d));
            assert!(joined(0, DIRECTION_BITS[back], d));
            assert!(!joined(0, 0, d));
            assert!(!joined(!DIRECTION_BITS[d] & 0x3f, !DIRECTION_BITS[back] & 0x3f, d));
            // The relation is symmetric.
            assert_eq!(joined(DIRECTION_BITS[d], 0, d), joined(0, DIRECTION_BITS[d], back));
        }
    }

    #[test]
    fn background_when_nothing_above_low() {
        assert_eq!(steepest_mask([0.1; 6], 0.1, 0.9), 0);
        assert_eq!(steepest_mask([0.0, 0.05, 0.1, 0.0, 0.0, 0.0], 0.1, 0.9), 0);
    }

    #[test]
    fn ties_mark_every_maximal_face() {
        let mask = steepest_mask([0.5, 0.7, 0.7, 0.2, 0.0, 0.7], 0.0, 0.9);
        assert_eq!(mask, NEG_Y | NEG_X | POS_X);
    }

    #[test]
    fn faces_at_or_above_high_are_always_marked() {
        let mask = steepest_mask([0.95, 0.99, 0.9, 0.2, 0.0, 0.1], 0.0, 0.9);
        assert_eq!(mask, NEG_Z | NEG_Y | NEG_X);
    }

    #[test]
    fn border_faces_are_low() {
        let dims = crate::Dims3::new(1, 1, 2);
        // Channel 2 (x) of voxel 1 is the face between voxels 0 and 1.
        let affs = [0.0, 0.0, 0.0, 0.0, 0.0, 0.8];
        assert_eq!(face_affinities(&affs, dims, 0, 0, 0, 0.25), [0.25, 0.25, 0.25, 0.25, 0.25, 0.8]);
        assert_eq!(face_affinities(&affs, dims, 0, 0, 1, 0.25), [0.25, 0.25, 0.8, 0.25, 0.25, 0.25]);
    }

    #[test]
    fn masks_mark_no_outside_face_unless_low_reaches_high() {
        let dims = crate::Dims3::new(1, 1, 2);
        let affs = [0.0, 0.0, 0.0, 0.0, 0.0, 0.8];
        for (low, high) in [(0.25, 0.9), (0.25, 0.3), (0.0, 0.8), (0.5, f32::NAN), (f32::NAN, 0.5), (0.9, 0.95)] {
            let params = WatershedParams { aff_threshold_low: low, aff_threshold_high: high };
            assert!(params.keeps_masks_inside(), "{low} {high}");
            for x in 0..2 {
                let mask = steepest_mask(face_affinities(&affs, dims, 0, 0, x, low), low, high);
                let inside = if x == 0 { POS_X } else { NEG_X };
                assert_eq!(mask & !inside, 0, "{low} {high} {x}");
            }
        }
        for (low, high) in [(0.25, 0.25), (0.5, 0.25), (0.0, -1.0)] {
            let params = WatershedParams { aff_threshold_low: low, aff_threshold_high: high };
            assert!(!params.keeps_masks_inside());
            let mask = steepest_mask(face_affinities(&affs, dims, 0, 0, 0, low), low, high);
            assert_ne!(mask & !POS_X, 0, "{low} {high}: an outside face is marked");
        }
    }

    #[test]
    fn block_plateau_info_sorts_marked_faces() {
        // Marks -z (marked back, inside), +x (marked back, outside) and +y
        // (not marked back): a corner with a plateau edge and an open face.
        let mask = NEG_Z | POS_X | POS_Y;
        let mut neighbours = [0u8; 6];
        neighbours[0] = POS_Z;
        neighbours[5] = NEG_X;
        neighbours[4] = POS_Y;
        let inside = [true, true, true, true, true, false];
        let (mutual, info) = block_plateau_info(mask, neighbours, inside);
        assert_eq!(mutual, NEG_Z);
        assert_eq!(info, mask | BLOCK_CORNER | BLOCK_OPEN);
        let (mutual, info) = block_plateau_info(NEG_Z, neighbours, inside);
        assert_eq!((mutual, info), (NEG_Z, NEG_Z));
        assert_eq!(block_plateau_info(0, neighbours, inside), (0, 0));
    }

    #[test]
    fn block_inside_edges_keep_present_voxels() {
        let inside = [false, true, true, true, true, true];
        assert_eq!(block_inside_edges(NEG_Z, inside), BLOCK_PRESENT);
        assert_eq!(block_inside_edges(NEG_Z | POS_X, inside), POS_X | BLOCK_PRESENT);
        assert_eq!(block_inside_edges(0, inside), 0);
        assert_eq!(neighbours_inside(crate::Dims3::new(1, 2, 3), 0, 1, 2), [false, true, true, false, false, false]);
    }

    #[test]
    fn opposite_is_an_involution() {
        for d in 0..6 {
            assert_eq!(OPPOSITE[OPPOSITE[d]], d);
            assert_ne!(OPPOSITE[d], d);
        }
    }
}
