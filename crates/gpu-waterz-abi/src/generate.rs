//! The generated volume of the blockwise scale tests (`ImplicitCells` in
//! `gpu_waterz_core::generate`) made on the GPU: the kernels' argument
//! structs and the per-voxel arithmetic that the host generator and the
//! kernels share, so that both make the same bits.
//!
//! The steps, each a kernel over a region of the volume grown by a halo:
//! labels (the nearest of the seeds of the 27 grid cells around a voxel's
//! own), the boundary mask (a face neighbour with another label), its
//! dilation, the inside map (0.05 on the membrane, 0.95 elsewhere), box
//! blurs along z, y and x, smooth noise interpolated from a lattice of
//! hashed values, and the affinities `min(q[v], q[v - e_c])`.

use crate::Dims3;

/// A voxel's coordinate in units of its grid cell: `(g + 0.5) / cell`.
#[inline(always)]
pub fn cell_coordinate(g: u64, cell: u64) -> f32 {
    (g as f32 + 0.5) / cell as f32
}

/// The squared distance from `p` to seed `s` in cell units, summed z, y,
/// then x.
#[inline(always)]
pub fn seed_distance(p: [f32; 3], s: [f32; 3]) -> f32 {
    let zy = (p[0] - s[0]) * (p[0] - s[0]) + (p[1] - s[1]) * (p[1] - s[1]);
    zy + (p[2] - s[2]) * (p[2] - s[2])
}

/// The label of grid cell `c` (each coordinate at least -1, below 1023).
#[inline(always)]
pub fn cell_label(c: [i64; 3]) -> u32 {
    1 + (((c[0] + 1) as u32) << 20) + (((c[1] + 1) as u32) << 10) + (c[2] + 1) as u32
}

/// Whether seed `(distance, label)` is nearer than `best`: the smaller
/// distance, then the smaller label (so the nearest seed does not depend
/// on the order the candidates are visited in).
#[inline(always)]
pub fn nearer(candidate: (f32, u32), best: (f32, u32)) -> bool {
    candidate.0 < best.0 || (candidate.0 == best.0 && candidate.1 < best.1)
}

/// The trilinear interpolation at voxel `at` of the values `corner(a, b,
/// c)` on a lattice of `spacing` (0 taken as 1), summed over the corners in
/// C order of `(dz, dy, dx)`.
#[inline(always)]
pub fn trilinear(spacing: u64, at: [u64; 3], corner: impl Fn(u64, u64, u64) -> f32) -> f32 {
    let s = if spacing == 0 { 1 } else { spacing };
    let [z, y, x] = at;
    let (fz, fy, fx) = ((z % s) as f32 / s as f32, (y % s) as f32 / s as f32, (x % s) as f32 / s as f32);
    let (lz, ly, lx) = (z / s, y / s, x / s);
    let mut v = 0.0;
    for (dz, wz) in [(0, 1.0 - fz), (1, fz)] {
        for (dy, wy) in [(0, 1.0 - fy), (1, fy)] {
            for (dx, wx) in [(0, 1.0 - fx), (1, fx)] {
                v += wz * wy * wx * corner(lz + dz, ly + dy, lx + dx);
            }
        }
    }
    v
}

/// The lattice spacing of the generator's smooth noise.
pub const NOISE_SPACING: u64 = 3;

/// The inside map's value on the membrane.
pub const MEMBRANE_INSIDE: f32 = 0.05;

/// The inside map's value off the membrane.
pub const CELL_INSIDE: f32 = 0.95;

/// `gen_implicit_labels`: the labels of a region from the seeds of the
/// grid cells around it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenImplicitLabelsArgs {
    /// Three f32 (z, y, x, in cell units) per grid cell of the table, in C
    /// order.
    pub seeds: *const f32,
    /// The table's extent in grid cells: from one cell before the region's
    /// first voxel's to one after its last voxel's, along each axis.
    pub table: Dims3,
    /// The grid cell's extent in voxels (each at least 1).
    pub cell: Dims3,
    /// The region's first voxel in the volume.
    pub origin: Dims3,
    /// The region's extent (fewer than 2^32 voxels).
    pub dims: Dims3,
    /// One u32 per region voxel.
    pub labels: *mut u32,
}

/// `gen_boundary`: 1 where a face neighbour inside the region has another
/// label, else 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenBoundaryArgs {
    /// One label per voxel.
    pub labels: *const u32,
    /// The region's extent.
    pub dims: Dims3,
    /// One u8 per voxel.
    pub mask: *mut u8,
}

/// `gen_dilate`: 1 where the voxel or a face neighbour inside the region
/// is set in `mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenDilateArgs {
    /// One u8 (0 or 1) per voxel.
    pub mask: *const u8,
    /// The region's extent.
    pub dims: Dims3,
    /// One u8 per voxel.
    pub out: *mut u8,
}

/// `gen_inside`: [`MEMBRANE_INSIDE`] where `mask` is set, else
/// [`CELL_INSIDE`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenInsideArgs {
    /// `n` u8s.
    pub mask: *const u8,
    /// The number of voxels.
    pub n: u64,
    /// `n` f32s.
    pub q: *mut f32,
}

/// `gen_box_blur`: the mean of each voxel and its neighbours along `axis`
/// inside the region, summed in the order -1, 0, +1.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenBoxBlurArgs {
    /// One f32 per voxel.
    pub q: *const f32,
    /// The region's extent.
    pub dims: Dims3,
    /// 0, 1 or 2 (z, y, x).
    pub axis: u64,
    /// One f32 per voxel (not `q`).
    pub out: *mut f32,
}

/// `gen_add_noise`: `q = clamp(q + amplitude * (noise - 0.5), 0, 1)`, the
/// noise interpolated ([`trilinear`], spacing [`NOISE_SPACING`]) at the
/// volume's coordinates from a table of the lattice's values.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenAddNoiseArgs {
    /// One f32 per voxel, updated in place.
    pub q: *mut f32,
    /// The region's extent.
    pub dims: Dims3,
    /// The region's first voxel in the volume.
    pub origin: Dims3,
    /// The lattice's values, C order over `table` from lattice point
    /// `first`: every corner of the region's voxels.
    pub lattice: *const f32,
    /// The table's first lattice point.
    pub first: Dims3,
    /// The table's extent.
    pub table: Dims3,
    /// The noise's amplitude.
    pub amplitude: f32,
}

/// `gen_affinities`: for each voxel of a block inside the region and each
/// axis `c`, 0 where the voxel's volume coordinate along `c` is 0, else
/// `min(q[v], q[v - e_c])`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenAffinitiesArgs {
    /// One f32 per region voxel.
    pub q: *const f32,
    /// The region's extent.
    pub dims: Dims3,
    /// The region's first voxel in the volume.
    pub origin: Dims3,
    /// The block's first voxel in the region (at least 1 along an axis
    /// unless the block starts the volume along it).
    pub offset: Dims3,
    /// The block's extent.
    pub block: Dims3,
    /// `3 * block voxels` f32s, `(3, z, y, x)`.
    pub affinities: *mut f32,
}

impl_kernel_args!(
    GenImplicitLabelsArgs => GenImplicitLabels { seeds, table, cell, origin, dims, labels },
    GenBoundaryArgs => GenBoundary { labels, dims, mask },
    GenDilateArgs => GenDilate { mask, dims, out },
    GenInsideArgs => GenInside { mask, n, q },
    GenBoxBlurArgs => GenBoxBlur { q, dims, axis, out },
    GenAddNoiseArgs => GenAddNoise { q, dims, origin, lattice, first, table, amplitude },
    GenAffinitiesArgs => GenAffinities { q, dims, origin, offset, block, affinities },
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_seed_order_and_labels() {
        assert!(nearer((1.0, 9), (2.0, 1)));
        assert!(nearer((1.0, 1), (1.0, 2)));
        assert!(!nearer((1.0, 2), (1.0, 2)));
        assert_eq!(cell_label([-1, -1, -1]), 1);
        assert_eq!(cell_label([0, 1, 2]), 1 + (1 << 20) + (2 << 10) + 3);
        assert_eq!(seed_distance([1.0, 2.0, 3.0], [1.0, 0.0, 0.0]), 13.0);
        assert_eq!(cell_coordinate(5, 2), 2.75);
        // The corners' weights sum to one (up to rounding).
        assert!((trilinear(3, [4, 5, 7], |_, _, _| 1.0) - 1.0).abs() < 1e-6);
        assert_eq!(trilinear(0, [4, 5, 7], |a, b, c| (a * 100 + b * 10 + c) as f32), 457.0);
        assert_eq!(trilinear(2, [1, 0, 0], |a, _, _| a as f32), 0.5);
    }
}
