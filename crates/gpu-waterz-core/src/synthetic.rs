//! Small deterministic test volumes (seeded, no dependencies): random and
//! quantized affinities, coarse plateaus, and cell-like affinities from
//! labels. Tests and benchmarks share them; the realistic generator of the
//! benchmark builds on [`cell_affinities`].

use ndarray::{Array3, Array4};

/// A tiny seeded generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let (state, bits) = gpu_waterz_abi::generate::splitmix64(self.0);
        self.0 = state;
        bits
    }

    /// A float in `[0, 1)` with 24 random bits.
    pub fn next_f32(&mut self) -> f32 {
        gpu_waterz_abi::generate::unit_f32(self.next_u64())
    }

    /// An integer in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Uniform random affinities `(3, z, y, x)`.
pub fn random_affinities(seed: u64, shape: (usize, usize, usize)) -> Array4<f32> {
    let mut rng = SplitMix64::new(seed);
    Array4::from_shape_simple_fn((3, shape.0, shape.1, shape.2), || rng.next_f32())
}

/// Affinities quantized to `levels + 1` values `k / levels` (many ties).
pub fn quantized_affinities(seed: u64, shape: (usize, usize, usize), levels: u32) -> Array4<f32> {
    let mut rng = SplitMix64::new(seed);
    Array4::from_shape_simple_fn((3, shape.0, shape.1, shape.2), || rng.below(levels as u64 + 1) as f32 / levels as f32)
}

/// Voronoi-like cell labels `1..=n_cells` (cells stretched along z).
pub fn cell_labels(seed: u64, shape: (usize, usize, usize), n_cells: usize) -> Array3<u32> {
    let mut rng = SplitMix64::new(seed);
    let seeds: Vec<[f32; 3]> = (0..n_cells.max(1))
        .map(|_| [rng.next_f32() * shape.0 as f32, rng.next_f32() * shape.1 as f32, rng.next_f32() * shape.2 as f32])
        .collect();
    Array3::from_shape_fn(shape, |(z, y, x)| {
        let mut best = (f32::INFINITY, 0);
        for (k, s) in seeds.iter().enumerate() {
            let d = (0.3 * (z as f32 - s[0])).powi(2) + (y as f32 - s[1]).powi(2) + (x as f32 - s[2]).powi(2);
            if d < best.0 {
                best = (d, k);
            }
        }
        best.1 as u32 + 1
    })
}

/// Smooth value noise in `[0, 1)`: hashed values on a lattice of spacing
/// `spacing`, interpolated trilinearly.
pub fn value_noise(seed: u64, z: usize, y: usize, x: usize, spacing: usize) -> f32 {
    interpolate_lattice(spacing, [z, y, x], |a, b, c| lattice_value(seed, a, b, c))
}

/// The hashed value in `[0, 1)` at lattice point `(a, b, c)` of
/// [`value_noise`] (the GPU generator's lattice table holds these).
pub fn lattice_value(seed: u64, a: usize, b: usize, c: usize) -> f32 {
    gpu_waterz_abi::generate::lattice_value(seed, a as u64, b as u64, c as u64)
}

/// The trilinear interpolation at voxel `at` of the values `corner(a, b,
/// c)` on a lattice of `spacing` (at least 1): the arithmetic of
/// [`value_noise`] ([`gpu_waterz_abi::generate::trilinear`], which the GPU
/// generator runs too), shared by the generator's tabled lattice so that
/// both give the same bits.
pub(crate) fn interpolate_lattice(spacing: usize, at: [usize; 3], corner: impl Fn(usize, usize, usize) -> f32) -> f32 {
    gpu_waterz_abi::generate::trilinear(spacing as u64, at.map(|a| a as u64), |a, b, c| {
        corner(a as usize, b as usize, c as usize)
    })
}

/// CNN-like affinities for `labels`: a membrane two voxels wide on each
/// side of every boundary (0.1 at the boundary, 0.5 one voxel in, 0.9
/// inside), plus smooth noise of amplitude `noise` ([`value_noise`],
/// spacing 4), as `min(inside[v], inside[v - e_c])`.
pub fn cell_affinities(seed: u64, labels: &Array3<u32>, noise: f32) -> Array4<f32> {
    let (zd, yd, xd) = labels.dim();
    let differs_within = |z: usize, y: usize, x: usize, r: i64| {
        let l = labels[[z, y, x]];
        for axis in 0..3 {
            for step in [-r, r] {
                let mut p = [z as i64, y as i64, x as i64];
                p[axis] += step;
                let dims = [zd as i64, yd as i64, xd as i64];
                if p[axis] >= 0 && p[axis] < dims[axis] && labels[[p[0] as usize, p[1] as usize, p[2] as usize]] != l {
                    return true;
                }
            }
        }
        false
    };
    let inside = Array3::from_shape_fn((zd, yd, xd), |(z, y, x)| {
        let base = if differs_within(z, y, x, 1) {
            0.1
        } else if differs_within(z, y, x, 2) {
            0.5
        } else {
            0.9
        };
        (base + noise * (value_noise(seed, z, y, x, 4) - 0.5)).clamp(0.0, 1.0)
    });
    Array4::from_shape_fn((3, zd, yd, xd), |(c, z, y, x)| {
        let p = [z, y, x];
        if p[c] == 0 {
            return 0.0;
        }
        let (pz, py, px) = (z - (c == 0) as usize, y - (c == 1) as usize, x - (c == 2) as usize);
        inside[[z, y, x]].min(inside[[pz, py, px]])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic_and_in_range() {
        let a = random_affinities(3, (2, 3, 4));
        assert_eq!(a, random_affinities(3, (2, 3, 4)));
        assert!(a.iter().all(|&v| (0.0..1.0).contains(&v)));
        let q = quantized_affinities(1, (2, 3, 4), 3);
        assert!(q.iter().all(|&v| [0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0].contains(&v)));
        let l = cell_labels(5, (4, 8, 8), 6);
        assert!(l.iter().all(|&v| (1..=6).contains(&v)));
        let c = cell_affinities(5, &l, 0.2);
        assert!(c.iter().all(|&v| (0.0..=1.0).contains(&v)));
    }
}
