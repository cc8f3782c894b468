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
    // Written out (a loop over arrays of weights put them in the GPU's
    // local memory): the same products and sums in the same order.
    let (wz, wy, wx) = ([1.0 - fz, fz], [1.0 - fy, fy], [1.0 - fx, fx]);
    let mut v = 0.0;
    v += wz[0] * wy[0] * wx[0] * corner(lz, ly, lx);
    v += wz[0] * wy[0] * wx[1] * corner(lz, ly, lx + 1);
    v += wz[0] * wy[1] * wx[0] * corner(lz, ly + 1, lx);
    v += wz[0] * wy[1] * wx[1] * corner(lz, ly + 1, lx + 1);
    v += wz[1] * wy[0] * wx[0] * corner(lz + 1, ly, lx);
    v += wz[1] * wy[0] * wx[1] * corner(lz + 1, ly, lx + 1);
    v += wz[1] * wy[1] * wx[0] * corner(lz + 1, ly + 1, lx);
    v += wz[1] * wy[1] * wx[1] * corner(lz + 1, ly + 1, lx + 1);
    v
}

/// One step of the SplitMix64 generator from `state`: the next state and
/// its 64 random bits.
#[inline(always)]
pub fn splitmix64(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (state, z ^ (z >> 31))
}

/// A float in `[0, 1)` from the top 24 of 64 random bits.
#[inline(always)]
pub fn unit_f32(bits: u64) -> f32 {
    (bits >> 40) as f32 / (1u64 << 24) as f32
}

/// The smooth noise's hashed value in `[0, 1)` at lattice point `(a, b,
/// c)` for `seed`: the first float of the SplitMix64 generator started
/// from the point's hash.
#[inline(always)]
pub fn lattice_value(seed: u64, a: u64, b: u64, c: u64) -> f32 {
    let start =
        seed ^ a.wrapping_mul(0x9E37_79B9) ^ b.wrapping_mul(0x85EB_CA6B) << 1 ^ c.wrapping_mul(0xC2B2_AE35) << 2;
    unit_f32(splitmix64(start).1)
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

/// `gen_noise_lattice`: the smooth noise's values ([`lattice_value`]) at
/// the lattice points of a table.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GenNoiseLatticeArgs {
    /// The noise's seed.
    pub seed: u64,
    /// The table's first lattice point.
    pub first: Dims3,
    /// The table's extent (fewer than 2^32 points).
    pub table: Dims3,
    /// One f32 per point of the table, C order.
    pub values: *mut f32,
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
    GenNoiseLatticeArgs => GenNoiseLattice { seed, first, table, values },
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

    #[test]
    fn splitmix64_gives_the_reference_sequence_and_lattice_values_lie_in_the_unit_interval() {
        // SplitMix64 from state 0 (Vigna's reference generator).
        let (state, first) = splitmix64(0);
        assert_eq!(first, 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(state).1, 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(unit_f32(u64::MAX), 1.0 - 1.0 / (1u64 << 24) as f32);
        assert_eq!(unit_f32(0), 0.0);
        let values: [f32; 64] = core::array::from_fn(|i| {
            let i = i as u64;
            lattice_value(7, i / 16, (i / 4) % 4, i % 4)
        });
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        // Neighbouring points differ, and the seed changes the value.
        assert!(values.windows(2).all(|w| w[0] != w[1]));
        assert_ne!(lattice_value(7, 1, 2, 3), lattice_value(8, 1, 2, 3));
    }
}
