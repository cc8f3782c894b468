//! A generator of CNN-like affinities with ground truth, seeded and
//! deterministic, for tests and benchmarks.
//!
//! Labels are either given (e.g. crops of the real pinky40 segmentation) or
//! drifting-Voronoi neurites: cells seeded in the (y, x) plane whose seeds
//! drift slowly along z, so that cells are elongated in z like neurites.
//! Affinities are made as a CNN's look: a membrane a few voxels wide along
//! every label boundary, blurred, with smooth noise; a few weak spots in
//! membranes (merge bait) and a few false walls inside cells (split bait);
//! then waterz's layout, `aff[c][v] = min(q[v], q[v - e_c])`.

use gpu_waterz_core::synthetic::{value_noise, SplitMix64};
use ndarray::{Array3, Array4, Axis, Zip};
use rayon::prelude::*;

/// The generator's knobs; [`GeneratorParams::default`] gives stock waterz
/// VOIs in the range of real data (about 1 to 3 bits at mid thresholds).
#[derive(Clone, Debug)]
pub struct GeneratorParams {
    /// Seed of every random choice.
    pub seed: u64,
    /// Voxels of membrane on each side of a boundary.
    pub membrane_half_width: usize,
    /// Box-blur passes over the inside map (each a 3-wide box per axis).
    pub blur_passes: usize,
    /// Amplitude of the smooth noise.
    pub noise: f32,
    /// Number of weak membrane spots (merge bait).
    pub weak_spots: usize,
    /// Number of false walls inside cells (split bait).
    pub false_walls: usize,
}

impl Default for GeneratorParams {
    fn default() -> Self {
        Self { seed: 1, membrane_half_width: 1, blur_passes: 1, noise: 0.45, weak_spots: 40, false_walls: 40 }
    }
}

/// Drifting-Voronoi neurite labels `1..=n_cells` of `shape` `(z, y, x)`.
pub fn neurite_labels(seed: u64, shape: (usize, usize, usize), n_cells: usize) -> Array3<u32> {
    let mut rng = SplitMix64::new(seed);
    let (zd, yd, xd) = shape;
    // Each seed: position and velocity in (y, x); velocities change slowly.
    let mut seeds: Vec<[f32; 4]> = (0..n_cells.max(1))
        .map(|_| {
            [
                rng.next_f32() * yd as f32,
                rng.next_f32() * xd as f32,
                (rng.next_f32() - 0.5) * 0.6,
                (rng.next_f32() - 0.5) * 0.6,
            ]
        })
        .collect();
    let mut labels = Array3::<u32>::zeros(shape);
    let flat = labels.as_slice_mut().expect("a new array is in standard layout");
    for z in 0..zd {
        let section = &mut flat[z * yd * xd..(z + 1) * yd * xd];
        // Rows in parallel: each voxel's label depends only on the seeds.
        section.par_chunks_mut(xd.max(1)).enumerate().for_each(|(y, row)| {
            for (x, l) in row.iter_mut().enumerate() {
                let mut best = (f32::INFINITY, 0usize);
                for (k, s) in seeds.iter().enumerate() {
                    let d = (y as f32 - s[0]).powi(2) + (x as f32 - s[1]).powi(2);
                    if d < best.0 {
                        best = (d, k);
                    }
                }
                *l = best.1 as u32 + 1;
            }
        });
        for s in seeds.iter_mut() {
            s[2] = (s[2] + (rng.next_f32() - 0.5) * 0.1).clamp(-0.5, 0.5);
            s[3] = (s[3] + (rng.next_f32() - 0.5) * 0.1).clamp(-0.5, 0.5);
            s[0] = (s[0] + s[2]).clamp(0.0, yd as f32);
            s[1] = (s[1] + s[3]).clamp(0.0, xd as f32);
        }
    }
    labels
}

/// `Array3::from_shape_fn` with the voxels computed in parallel.
fn par_from_shape_fn<T: Copy + Default + Send + Sync>(
    shape: (usize, usize, usize),
    f: impl Fn((usize, usize, usize)) -> T + Sync + Send,
) -> Array3<T> {
    let mut out = Array3::from_elem(shape, T::default());
    Zip::indexed(&mut out).par_for_each(|p, v| *v = f(p));
    out
}

fn boundary_mask(labels: &Array3<u32>) -> Array3<bool> {
    let (zd, yd, xd) = labels.dim();
    par_from_shape_fn((zd, yd, xd), |(z, y, x)| {
        let l = labels[[z, y, x]];
        (z + 1 < zd && labels[[z + 1, y, x]] != l)
            || (y + 1 < yd && labels[[z, y + 1, x]] != l)
            || (x + 1 < xd && labels[[z, y, x + 1]] != l)
            || (z > 0 && labels[[z - 1, y, x]] != l)
            || (y > 0 && labels[[z, y - 1, x]] != l)
            || (x > 0 && labels[[z, y, x - 1]] != l)
    })
}

fn dilate(mask: &Array3<bool>) -> Array3<bool> {
    let (zd, yd, xd) = mask.dim();
    par_from_shape_fn((zd, yd, xd), |(z, y, x)| {
        mask[[z, y, x]]
            || (z + 1 < zd && mask[[z + 1, y, x]])
            || (y + 1 < yd && mask[[z, y + 1, x]])
            || (x + 1 < xd && mask[[z, y, x + 1]])
            || (z > 0 && mask[[z - 1, y, x]])
            || (y > 0 && mask[[z, y - 1, x]])
            || (x > 0 && mask[[z, y, x - 1]])
    })
}

fn box_blur(q: &Array3<f32>) -> Array3<f32> {
    let mut out = q.clone();
    for axis in 0..3 {
        let src = out.clone();
        let len = src.len_of(Axis(axis));
        Zip::indexed(&mut out).par_for_each(|(z, y, x), v| {
            let p = [z, y, x];
            let mut sum = 0.0;
            let mut n = 0.0;
            for off in [-1i64, 0, 1] {
                let i = p[axis] as i64 + off;
                if i >= 0 && (i as usize) < len {
                    let mut q = p;
                    q[axis] = i as usize;
                    sum += src[[q[0], q[1], q[2]]];
                    n += 1.0;
                }
            }
            *v = sum / n;
        });
    }
    out
}

/// A centred crop of `source` to `(zd, yd, xd)`; mirrored where the shape
/// is larger than the source (0, 1, ..., n-1, n-1, ..., 0, 0, 1, ...), so
/// that a larger volume stays one contiguous segmentation (no seams between
/// copies). Labels keep their low 32 bits.
pub fn crop_or_mirror(source: &Array3<u64>, (zd, yd, xd): (usize, usize, usize)) -> Array3<u32> {
    let (sz, sy, sx) = source.dim();
    let offset = |want: usize, have: usize| have.saturating_sub(want) / 2;
    let (oz, oy, ox) = (offset(zd, sz), offset(yd, sy), offset(xd, sx));
    let mirror = |i: usize, n: usize| {
        let k = i % (2 * n);
        if k < n {
            k
        } else {
            2 * n - 1 - k
        }
    };
    par_from_shape_fn((zd, yd, xd), |(z, y, x)| {
        source[[mirror(z + oz, sz), mirror(y + oy, sy), mirror(x + ox, sx)]] as u32
    })
}

/// CNN-like affinities `(3, z, y, x)` for `labels`.
pub fn affinities(labels: &Array3<u32>, params: &GeneratorParams) -> Array4<f32> {
    let (zd, yd, xd) = labels.dim();
    let mut membrane = boundary_mask(labels);
    for _ in 1..params.membrane_half_width {
        membrane = dilate(&membrane);
    }
    let mut q = Zip::from(&membrane).par_map_collect(|&m| if m { 0.05f32 } else { 0.95 });
    let mut rng = SplitMix64::new(params.seed ^ 0x5EED);
    // Merge bait: weak membrane spots of radius 2 at random boundary voxels.
    let boundary: Vec<(usize, usize, usize)> =
        membrane.indexed_iter().filter(|(_, &m)| m).map(|(p, _)| p).step_by(97).collect();
    for _ in 0..params.weak_spots.min(boundary.len()) {
        let (cz, cy, cx) = boundary[rng.below(boundary.len() as u64) as usize];
        for z in cz.saturating_sub(2)..(cz + 3).min(zd) {
            for y in cy.saturating_sub(2)..(cy + 3).min(yd) {
                for x in cx.saturating_sub(2)..(cx + 3).min(xd) {
                    q[[z, y, x]] = q[[z, y, x]].max(0.75);
                }
            }
        }
    }
    // Split bait: false walls, discs of radius 4 perpendicular to a random axis.
    for _ in 0..params.false_walls {
        let (cz, cy, cx) = (rng.below(zd as u64) as i64, rng.below(yd as u64) as i64, rng.below(xd as u64) as i64);
        let axis = rng.below(3) as usize;
        for a in -4i64..=4 {
            for b in -4i64..=4 {
                if a * a + b * b > 16 {
                    continue;
                }
                let p = match axis {
                    0 => (cz, cy + a, cx + b),
                    1 => (cz + a, cy, cx + b),
                    _ => (cz + a, cy + b, cx),
                };
                if p.0 >= 0 && p.1 >= 0 && p.2 >= 0 && (p.0 as usize) < zd && (p.1 as usize) < yd && (p.2 as usize) < xd
                {
                    let v = &mut q[[p.0 as usize, p.1 as usize, p.2 as usize]];
                    *v = v.min(0.2);
                }
            }
        }
    }
    for _ in 0..params.blur_passes {
        q = box_blur(&q);
    }
    let seed = params.seed;
    Zip::indexed(&mut q).par_for_each(|(z, y, x), v| {
        *v = (*v + params.noise * (value_noise(seed, z, y, x, 3) - 0.5)).clamp(0.0, 1.0);
    });
    gpu_waterz_core::affinities::from_inside_probability(&q)
}

/// Quantizes affinities to uint8, `round(a * 255)` with halves rounded away
/// from zero; `k` stands for `k / 255`.
pub fn quantize(affs: &Array4<f32>) -> Array4<u8> {
    affs.mapv(|a| (a * 255.0).round().clamp(0.0, 255.0) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_in_range_and_elongated() {
        let labels = neurite_labels(3, (8, 32, 32), 6);
        assert_eq!(labels, neurite_labels(3, (8, 32, 32), 6));
        assert!(labels.iter().all(|&l| (1..=6).contains(&l)));
        // Neurites run along z: most voxels keep their label one section up.
        // (slice_axis, not s![]: the macro's allow(unsafe_code) clashes
        // with the crate's forbid.)
        let same = labels
            .slice_axis(Axis(0), ndarray::Slice::from(1..))
            .iter()
            .zip(labels.slice_axis(Axis(0), ndarray::Slice::from(..7)).iter())
            .filter(|(a, b)| a == b)
            .count();
        assert!(same as f64 > 0.8 * (7 * 32 * 32) as f64, "{same}");
        let p = GeneratorParams::default();
        let a = affinities(&labels, &p);
        assert_eq!(a, affinities(&labels, &p));
        assert_eq!(a.dim(), (3, 8, 32, 32));
        assert!(a.iter().all(|&v| (0.0..=1.0).contains(&v)));
        let q = quantize(&a);
        assert_eq!(q[[2, 3, 4, 5]], (a[[2, 3, 4, 5]] * 255.0).round() as u8);
    }
}
