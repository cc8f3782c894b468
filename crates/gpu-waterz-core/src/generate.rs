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

use crate::synthetic::{interpolate_lattice, lattice_value, SplitMix64};
use gpu_waterz_abi::generate::{cell_coordinate, cell_label, nearer, seed_distance, NOISE_SPACING};
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

/// A C-order array of `shape` whose sections (one z each) are filled in
/// parallel by `fill(z, section)`.
fn par_by_section<T: Copy + Default + Send + Sync>(
    shape: (usize, usize, usize),
    fill: impl Fn(usize, &mut [T]) + Sync + Send,
) -> Array3<T> {
    let mut values = vec![T::default(); shape.0 * shape.1 * shape.2];
    values.par_chunks_mut((shape.1 * shape.2).max(1)).enumerate().for_each(|(z, section)| fill(z, section));
    Array3::from_shape_vec(shape, values).expect("the values fill the shape")
}

/// Whether any face neighbour of each voxel passes `differs(voxel,
/// neighbour)` (flat indices into an array of `shape`).
fn any_face_neighbour(shape: (usize, usize, usize), differs: impl Fn(usize, usize) -> bool + Sync) -> Array3<bool> {
    let (zd, yd, xd) = shape;
    let section = yd * xd;
    par_by_section(shape, |z, out| {
        for y in 0..yd {
            for x in 0..xd {
                let i = z * section + y * xd + x;
                out[y * xd + x] = (z + 1 < zd && differs(i, i + section))
                    || (y + 1 < yd && differs(i, i + xd))
                    || (x + 1 < xd && differs(i, i + 1))
                    || (z > 0 && differs(i, i - section))
                    || (y > 0 && differs(i, i - xd))
                    || (x > 0 && differs(i, i - 1));
            }
        }
    })
}

fn boundary_mask(labels: &Array3<u32>) -> Array3<bool> {
    let labels = labels.as_standard_layout();
    let flat = labels.as_slice().expect("a standard layout");
    any_face_neighbour(labels.dim(), |i, j| flat[j] != flat[i])
}

fn dilate(mask: &Array3<bool>) -> Array3<bool> {
    let mask = mask.as_standard_layout();
    let flat = mask.as_slice().expect("a standard layout");
    any_face_neighbour(mask.dim(), |i, j| flat[i] || flat[j])
}

/// Three passes of a 3-wide box along z, y and x, each value the mean of
/// the neighbours inside the array.
fn box_blur(q: &Array3<f32>) -> Array3<f32> {
    let (zd, yd, xd) = q.dim();
    let (lens, strides) = ([zd, yd, xd], [yd * xd, xd, 1]);
    let mut out = q.as_standard_layout().into_owned();
    for axis in 0..3 {
        let src = out;
        let flat = src.as_slice().expect("a standard layout");
        out = par_by_section((zd, yd, xd), |z, section| {
            for y in 0..yd {
                for x in 0..xd {
                    let (p, i) = ([z, y, x][axis], z * strides[0] + y * xd + x);
                    // Summed in the order -1, 0, +1, as a plain loop over
                    // the offsets would.
                    let mut sum = 0.0;
                    let mut n = 0.0;
                    if p > 0 {
                        sum += flat[i - strides[axis]];
                        n += 1.0;
                    }
                    sum += flat[i];
                    n += 1.0;
                    if p + 1 < lens[axis] {
                        sum += flat[i + strides[axis]];
                        n += 1.0;
                    }
                    section[y * xd + x] = sum / n;
                }
            }
        });
    }
    out
}

/// The values of the smooth noise's lattice ([`crate::synthetic::value_noise`] of `seed`,
/// spacing [`NOISE_SPACING`]) at every corner of the voxels of the block of
/// `shape` at `origin`: the host generator's table, and the GPU
/// generator's.
#[derive(Clone, Debug, PartialEq)]
pub struct NoiseLattice {
    /// The first lattice point along each axis.
    pub first: [usize; 3],
    /// The number of lattice points along each axis.
    pub extent: [usize; 3],
    /// The values, C order.
    pub values: Vec<f32>,
}

impl NoiseLattice {
    /// The lattice around the (non-empty) block of `shape` at `origin`.
    pub fn new(seed: u64, origin: [usize; 3], shape: [usize; 3]) -> Self {
        let (first, extent) = Self::span(origin, shape);
        let n = extent;
        let values = (0..n[0] * n[1] * n[2])
            .into_par_iter()
            .map(|i| {
                lattice_value(seed, first[0] + i / (n[1] * n[2]), first[1] + (i / n[2]) % n[1], first[2] + i % n[2])
            })
            .collect();
        Self { first, extent, values }
    }

    /// The first lattice point and the extent of the lattice around the
    /// (non-empty) block of `shape` at `origin`: every corner of its
    /// voxels, without the values.
    pub fn span(origin: [usize; 3], shape: [usize; 3]) -> ([usize; 3], [usize; 3]) {
        let spacing = NOISE_SPACING as usize;
        let first: [usize; 3] = std::array::from_fn(|a| origin[a] / spacing);
        let extent: [usize; 3] = std::array::from_fn(|a| (origin[a] + shape[a] - 1) / spacing + 2 - first[a]);
        (first, extent)
    }
}

/// Adds smooth noise of amplitude `amplitude` ([`value_noise`] of `seed`,
/// spacing 3, at the volume's coordinates: `q` stands at `origin`) to `q`
/// and clamps to `[0, 1]`. The lattice's values are hashed once each
/// instead of eight times per voxel; the interpolation is
/// [`value_noise`]'s own.
fn add_value_noise(q: &mut Array3<f32>, seed: u64, amplitude: f32, origin: (usize, usize, usize)) {
    let (zd, yd, xd) = q.dim();
    if zd * yd * xd == 0 {
        return;
    }
    let o = [origin.0, origin.1, origin.2];
    let NoiseLattice { first: lo, extent: n, values: lattice } = NoiseLattice::new(seed, o, [zd, yd, xd]);
    let corner = |a: usize, b: usize, c: usize| lattice[((a - lo[0]) * n[1] + (b - lo[1])) * n[2] + (c - lo[2])];
    if !q.is_standard_layout() {
        *q = q.as_standard_layout().into_owned();
    }
    q.as_slice_mut().expect("a standard layout").par_chunks_mut((yd * xd).max(1)).enumerate().for_each(
        |(z, section)| {
            for y in 0..yd {
                for x in 0..xd {
                    let noise = interpolate_lattice(NOISE_SPACING as usize, [o[0] + z, o[1] + y, o[2] + x], corner);
                    let v = &mut section[y * xd + x];
                    *v = (*v + amplitude * (noise - 0.5)).clamp(0.0, 1.0);
                }
            }
        },
    );
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
    affinities_at(labels, params, (0, 0, 0))
}

/// [`affinities`] of `labels` standing at `origin` of a larger volume: the
/// smooth noise is taken at the volume's coordinates.
fn affinities_at(labels: &Array3<u32>, params: &GeneratorParams, origin: (usize, usize, usize)) -> Array4<f32> {
    let (zd, yd, xd) = labels.dim();
    let mut membrane = boundary_mask(labels);
    for _ in 1..params.membrane_half_width {
        membrane = dilate(&membrane);
    }
    let mut q = Zip::from(&membrane).par_map_collect(|&m| if m { 0.05f32 } else { 0.95 });
    let mut rng = SplitMix64::new(params.seed ^ 0x5EED);
    // Merge bait: weak membrane spots of radius 2 at random boundary voxels.
    let boundary: Vec<(usize, usize, usize)> = match params.weak_spots {
        0 => Vec::new(),
        _ => membrane.indexed_iter().filter(|(_, &m)| m).map(|(p, _)| p).step_by(97).collect(),
    };
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
    add_value_noise(&mut q, params.seed, params.noise, origin);
    crate::affinities::from_inside_probability(&q)
}

/// [`ImplicitCells::seed_table`]: the seeds of a box of grid cells.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedTable {
    /// The first grid cell along each axis (may be -1).
    pub first: [i64; 3],
    /// The number of grid cells along each axis.
    pub extent: [usize; 3],
    /// Each cell's seed (z, y, x in cell units), C order.
    pub seeds: Vec<[f32; 3]>,
}

/// A label field that any block of a volume computes alone, for volumes
/// too large to generate (or hold) whole: cells seeded on a grid of
/// `cell` voxels (elongated along z, like neurites), one seed per grid
/// cell at a position hashed from the cell and `seed`, jittered within the
/// middle 40 % of the cell on each axis; a voxel takes the nearest seed
/// (distances in cell units, the smallest label among equals). The jitter
/// keeps every voxel's nearest seed within the 27 grid cells around its
/// own, so a voxel's label needs only those. Labels are
/// `1 + (cz + 1) * 2^20 + (cy + 1) * 2^10 + (cx + 1)` for grid cell
/// `(cz, cy, cx)`: volumes up to 1022 cells per axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImplicitCells {
    /// Seed of the seeds' positions.
    pub seed: u64,
    /// Grid cell size `(z, y, x)` in voxels.
    pub cell: (usize, usize, usize),
}

/// Cells of a seed table made by one task ([`ImplicitCells::seed_table`]).
const SEEDS_PER_TASK: usize = 1 << 15;

impl ImplicitCells {
    /// The default grid: cells of 48 × 24 × 24 voxels.
    pub fn new(seed: u64) -> Self {
        Self { seed, cell: (48, 24, 24) }
    }

    /// Whether a volume of `shape` fits the label numbering.
    pub fn check(&self, shape: (usize, usize, usize)) -> Result<(), String> {
        let (cz, cy, cx) = self.cell;
        if cz == 0 || cy == 0 || cx == 0 {
            return Err(format!("cell sizes must be positive, not {:?}", self.cell));
        }
        let cells = [shape.0.div_ceil(cz), shape.1.div_ceil(cy), shape.2.div_ceil(cx)];
        if cells.iter().any(|&c| c > 1022) {
            return Err(format!("{shape:?} needs {cells:?} cells of {:?}; at most 1022 per axis", self.cell));
        }
        Ok(())
    }

    /// The seed of grid cell `c` (each coordinate at least -1), in cell
    /// units.
    pub fn seed_of(&self, c: [i64; 3]) -> [f32; 3] {
        let mut rng = SplitMix64::new(
            self.seed
                ^ (c[0] as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (c[1] as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F).rotate_left(17)
                ^ (c[2] as u64).wrapping_mul(0x1656_67B1_9E37_79F9).rotate_left(34),
        );
        [0, 1, 2].map(|a| c[a] as f32 + 0.3 + 0.4 * rng.next_f32())
    }

    /// The seeds of the grid cells from one before the first voxel's to
    /// one after the last voxel's, along each axis, of the (non-empty)
    /// block of `shape` at `origin`: every seed a voxel of the block may
    /// take ([`ImplicitCells::labels`]'s table, and the GPU generator's).
    pub fn seed_table(&self, origin: [usize; 3], shape: [usize; 3]) -> SeedTable {
        let cell = [self.cell.0, self.cell.1, self.cell.2];
        let first: [i64; 3] = std::array::from_fn(|a| (origin[a] / cell[a]) as i64 - 1);
        let n: [usize; 3] = std::array::from_fn(|a| (origin[a] + shape[a] - 1) / cell[a] + 3 - origin[a] / cell[a]);
        // A block's table has a few thousand cells: made on one thread
        // (waking the pool's threads for it cost more than it saves, and
        // the GPU generator makes it inside the GPU's turn); a whole
        // volume's on all of them.
        let seeds = (0..n[0] * n[1] * n[2])
            .into_par_iter()
            .with_min_len(SEEDS_PER_TASK)
            .map(|i| {
                self.seed_of([
                    first[0] + (i / (n[1] * n[2])) as i64,
                    first[1] + ((i / n[2]) % n[1]) as i64,
                    first[2] + (i % n[2]) as i64,
                ])
            })
            .collect();
        SeedTable { first, extent: n, seeds }
    }

    /// The label of voxel `(z, y, x)`: the reference that the tabled
    /// [`ImplicitCells::labels`] and the GPU generator are tested against,
    /// with their arithmetic (`gpu_waterz_abi::generate`).
    pub fn label(&self, z: usize, y: usize, x: usize) -> u32 {
        let cell = [self.cell.0, self.cell.1, self.cell.2];
        let g = [z, y, x];
        let p = [0, 1, 2].map(|a| cell_coordinate(g[a] as u64, cell[a] as u64));
        let own = [0, 1, 2].map(|a| (g[a] / cell[a]) as i64);
        let mut best = (f32::INFINITY, u32::MAX);
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let c = [own[0] + dz, own[1] + dy, own[2] + dx];
                    let candidate = (seed_distance(p, self.seed_of(c)), cell_label(c));
                    if nearer(candidate, best) {
                        best = candidate;
                    }
                }
            }
        }
        best.1
    }

    /// The labels of the block of `shape` at `origin`.
    ///
    /// The same values as [`ImplicitCells::label`] voxel by voxel, with
    /// the seeds of the grid cells around the block computed once each and,
    /// per row, the z and y terms of each distance once per grid cell.
    pub fn labels(&self, origin: (usize, usize, usize), shape: (usize, usize, usize)) -> Array3<u32> {
        let (zd, yd, xd) = shape;
        if zd * yd * xd == 0 {
            return Array3::zeros(shape);
        }
        let (o, s, cell) = ([origin.0, origin.1, origin.2], [zd, yd, xd], [self.cell.0, self.cell.1, self.cell.2]);
        let SeedTable { first: lo, extent: n, seeds } = self.seed_table(o, s);
        let slot =
            |c: [i64; 3]| (((c[0] - lo[0]) as usize * n[1]) + (c[1] - lo[1]) as usize) * n[2] + (c[2] - lo[2]) as usize;
        let mut labels = vec![0u32; zd * yd * xd];
        // Per row, each grid cell along x with its nine (dz, dy)
        // neighbours: the z and y terms of the distance to their seeds
        // (summed first, as label() sums them), the seeds' x and their
        // labels. The nearest seed is the smallest (distance, label) pair,
        // whatever the order the candidates are visited in.
        labels.par_chunks_mut(xd).enumerate().for_each_init(
            || vec![(0f32, 0f32, 0u32); 9 * n[2]],
            |candidates, (row, out)| {
                let at = [o[0] + row / yd, o[1] + row % yd];
                let p = [0, 1].map(|a| cell_coordinate(at[a] as u64, cell[a] as u64));
                let own = [0, 1].map(|a| (at[a] / cell[a]) as i64);
                for (k, candidate) in candidates.iter_mut().enumerate() {
                    let c = [own[0] + (k % 9 / 3) as i64 - 1, own[1] + (k % 3) as i64 - 1, lo[2] + (k / 9) as i64];
                    let seed = seeds[slot(c)];
                    let zy = (p[0] - seed[0]) * (p[0] - seed[0]) + (p[1] - seed[1]) * (p[1] - seed[1]);
                    *candidate = (zy, seed[2], cell_label(c));
                }
                for (x, label) in out.iter_mut().enumerate() {
                    let gx = o[2] + x;
                    let px = cell_coordinate(gx as u64, cell[2] as u64);
                    // The grid cells own_x - 1 ..= own_x + 1, from lo[2].
                    let first = ((gx / cell[2]) as i64 - 1 - lo[2]) as usize;
                    let mut best = (f32::INFINITY, u32::MAX);
                    for &(zy, sx, l) in &candidates[first * 9..(first + 3) * 9] {
                        // seed_distance's sum, its z and y terms tabled.
                        let candidate = (zy + (px - sx) * (px - sx), l);
                        if nearer(candidate, best) {
                            best = candidate;
                        }
                    }
                    *label = best.1;
                }
            },
        );
        Array3::from_shape_vec(shape, labels).expect("the labels fill the shape")
    }

    /// CNN-like affinities and labels of the block of `shape` at `origin`
    /// of the implicit volume of `volume` voxels: the same values as the
    /// same voxels of the whole volume's ([`affinities`] of
    /// [`ImplicitCells::labels`] over the whole volume), computed from the
    /// block and a halo as wide as the membrane, the blur and the
    /// affinities' one-voxel reach. Merge bait and split bait (drawn over
    /// the whole volume) are left out: `params.weak_spots` and
    /// `params.false_walls` must be 0.
    pub fn block(
        &self,
        params: &GeneratorParams,
        volume: (usize, usize, usize),
        origin: (usize, usize, usize),
        shape: (usize, usize, usize),
    ) -> Result<(Array4<f32>, Array3<u32>), String> {
        self.check(volume)?;
        if params.weak_spots != 0 || params.false_walls != 0 {
            return Err("blocks leave out merge and split bait: set weak_spots and false_walls to 0".into());
        }
        let (o, s, v) = ([origin.0, origin.1, origin.2], [shape.0, shape.1, shape.2], [volume.0, volume.1, volume.2]);
        if (0..3).any(|a| o[a] + s[a] > v[a]) {
            return Err(format!("the block {shape:?} at {origin:?} leaves the volume {volume:?}"));
        }
        let halo = params.membrane_half_width + params.blur_passes + 2;
        let lo: [usize; 3] = [0, 1, 2].map(|a| o[a].saturating_sub(halo));
        let hi: [usize; 3] = [0, 1, 2].map(|a| (o[a] + s[a] + halo).min(v[a]));
        let extended = self.labels((lo[0], lo[1], lo[2]), (hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]));
        let affs = affinities_at(&extended, params, (lo[0], lo[1], lo[2]));
        if lo == o && (0..3).all(|a| hi[a] == o[a] + s[a]) {
            // The whole volume, or a block on no halo: nothing to crop.
            return Ok((affs, extended));
        }
        let at = [0, 1, 2].map(|a| o[a] - lo[a]);
        let crop = |a: usize| ndarray::Slice::from(at[a]..at[a] + s[a]);
        let labels =
            extended.slice_axis(Axis(0), crop(0)).slice_axis(Axis(1), crop(1)).slice_axis(Axis(2), crop(2)).to_owned();
        let affs =
            affs.slice_axis(Axis(1), crop(0)).slice_axis(Axis(2), crop(1)).slice_axis(Axis(3), crop(2)).to_owned();
        Ok((affs, labels))
    }
}

/// Quantizes affinities to uint8, `round(a * 255)` with halves rounded away
/// from zero; `k` stands for `k / 255`.
pub fn quantize(affs: &Array4<f32>) -> Array4<u8> {
    Zip::from(affs).par_map_collect(|&a| (a * 255.0).round().clamp(0.0, 255.0) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of the implicit volume equal the same voxels of the whole.
    #[test]
    fn implicit_blocks_equal_the_whole_volume() {
        let cells = ImplicitCells { seed: 4, cell: (12, 6, 6) };
        let params = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
        let volume = (30, 25, 27);
        let (whole_affs, whole_labels) = cells.block(&params, volume, (0, 0, 0), volume).unwrap();
        assert_eq!(whole_labels, cells.labels((0, 0, 0), volume));
        assert!(whole_labels.iter().collect::<std::collections::HashSet<_>>().len() > 10);
        for (origin, shape) in [((0, 0, 0), (7, 9, 11)), ((13, 4, 20), (17, 21, 7)), ((29, 24, 26), (1, 1, 1))] {
            let (affs, labels) = cells.block(&params, volume, origin, shape).unwrap();
            let view = |a: &Array4<f32>| {
                a.slice_axis(Axis(1), ndarray::Slice::from(origin.0..origin.0 + shape.0))
                    .slice_axis(Axis(2), ndarray::Slice::from(origin.1..origin.1 + shape.1))
                    .slice_axis(Axis(3), ndarray::Slice::from(origin.2..origin.2 + shape.2))
                    .to_owned()
            };
            assert_eq!(affs, view(&whole_affs), "block {shape:?} at {origin:?}");
            assert_eq!(labels, cells.labels(origin, shape));
        }
        // Every voxel's nearest seed lies among its 27 cells: brute force
        // over all cells of a small volume agrees.
        let brute = |z: usize, y: usize, x: usize| {
            let mut best = (f32::INFINITY, u32::MAX);
            for cz in -1..4i64 {
                for cy in -1..6i64 {
                    for cx in -1..6i64 {
                        let s = cells.seed_of([cz, cy, cx]);
                        let p = [(z as f32 + 0.5) / 12.0, (y as f32 + 0.5) / 6.0, (x as f32 + 0.5) / 6.0];
                        let d: f32 = (0..3).map(|a| (p[a] - s[a]) * (p[a] - s[a])).sum();
                        let l = 1 + (((cz + 1) as u32) << 20) + (((cy + 1) as u32) << 10) + (cx + 1) as u32;
                        if d < best.0 || (d == best.0 && l < best.1) {
                            best = (d, l);
                        }
                    }
                }
            }
            best.1
        };
        assert!(whole_labels.indexed_iter().all(|((z, y, x), &l)| l == brute(z, y, x)));
        assert!(cells.block(&GeneratorParams::default(), volume, (0, 0, 0), volume).is_err());
        assert!(cells.block(&params, volume, (25, 0, 0), (10, 1, 1)).is_err());
        assert!(ImplicitCells { seed: 1, cell: (1, 1, 1) }.check((2000, 1, 1)).is_err());
    }

    /// The labels of blocks equal [`ImplicitCells::label`] voxel by voxel,
    /// for small and large cells and blocks away from the origin.
    #[test]
    fn tabled_labels_equal_the_per_voxel_labels() {
        for (cell, origin, shape) in [
            ((12, 6, 6), (0, 0, 0), (30, 25, 27)),
            ((1, 1, 1), (3, 5, 7), (4, 6, 9)),
            ((5, 7, 3), (11, 0, 29), (9, 13, 17)),
            ((48, 24, 24), (40, 100, 1000), (20, 30, 60)),
        ] {
            let field = ImplicitCells { seed: 9, cell };
            let labels = field.labels(origin, shape);
            for ((z, y, x), &l) in labels.indexed_iter() {
                assert_eq!(l, field.label(origin.0 + z, origin.1 + y, origin.2 + x), "{cell:?} {origin:?} {z} {y} {x}");
            }
        }
        assert_eq!(ImplicitCells::new(1).labels((5, 5, 5), (0, 3, 3)).dim(), (0, 3, 3));
    }

    /// The section-parallel steps of the affinities equal plain per-voxel
    /// versions of the same arithmetic, bit for bit.
    #[test]
    fn affinity_steps_equal_per_voxel_references() {
        let labels = neurite_labels(5, (7, 19, 23), 9);
        let (zd, yd, xd) = labels.dim();
        let inside = |p: [i64; 3]| {
            p[0] >= 0 && p[1] >= 0 && p[2] >= 0 && p[0] < zd as i64 && p[1] < yd as i64 && p[2] < xd as i64
        };
        let faces = |z: usize, y: usize, x: usize| {
            (0..6).map(move |d| {
                let mut p = [z as i64, y as i64, x as i64];
                p[d % 3] += if d < 3 { -1 } else { 1 };
                p
            })
        };
        let boundary = boundary_mask(&labels);
        let dilated = dilate(&boundary);
        for ((z, y, x), &b) in boundary.indexed_iter() {
            let at = |p: [i64; 3]| [p[0] as usize, p[1] as usize, p[2] as usize];
            let differs = faces(z, y, x).filter(|&p| inside(p)).any(|p| labels[at(p)] != labels[[z, y, x]]);
            assert_eq!(b, differs, "{z} {y} {x}");
            let near = b || faces(z, y, x).filter(|&p| inside(p)).any(|p| boundary[at(p)]);
            assert_eq!(dilated[[z, y, x]], near, "{z} {y} {x}");
        }
        let mut rng = SplitMix64::new(3);
        let q = Array3::from_shape_simple_fn((zd, yd, xd), || rng.next_f32());
        let mut blurred = q.clone();
        for axis in 0..3 {
            let src = blurred.clone();
            for ((z, y, x), v) in blurred.indexed_iter_mut() {
                let (mut sum, mut n) = (0.0, 0.0);
                for off in [-1i64, 0, 1] {
                    let mut p = [z as i64, y as i64, x as i64];
                    p[axis] += off;
                    if inside(p) {
                        sum += src[[p[0] as usize, p[1] as usize, p[2] as usize]];
                        n += 1.0;
                    }
                }
                *v = sum / n;
            }
        }
        assert_eq!(box_blur(&q), blurred);
        let origin = (4, 10, 2);
        let mut noisy = q.clone();
        add_value_noise(&mut noisy, 11, 0.45, origin);
        for ((z, y, x), &v) in noisy.indexed_iter() {
            let noise = crate::synthetic::value_noise(11, origin.0 + z, origin.1 + y, origin.2 + x, 3);
            assert_eq!(v, (q[[z, y, x]] + 0.45 * (noise - 0.5)).clamp(0.0, 1.0), "{z} {y} {x}");
        }
    }

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
