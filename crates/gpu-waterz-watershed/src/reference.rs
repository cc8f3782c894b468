//! The serial watershed of waterz (`basic_watershed.hpp`), ported as is.
//!
//! The algorithm, in waterz's four passes over a `u64` work volume:
//! 1. Every voxel gets the bits of its faces that equal its maximum
//!    affinity or are at least `high` ([`steepest_mask`]); a voxel whose
//!    maximum is not above `low` gets none (background).
//! 2. Plateau corners: voxels with a marked face whose neighbour does not
//!    mark it back (a way down) go into a FIFO queue.
//! 3. The queue divides plateaus by breadth-first search: each voxel keeps
//!    one bit, pointing to an already processed or non-mutual neighbour (the
//!    last such in direction order), and pushes its mutual neighbours.
//! 4. Scan order: every unlabelled voxel follows its bits (breadth-first)
//!    until it reaches a labelled voxel, whose label the whole search takes,
//!    or runs out, and then founds a new basin labelled `next_id`.
//!
//! The queue order decides ties, so it is kept exactly; labels come out as
//! `1..=n` in the order waterz finds them.

use gpu_waterz_abi::watershed::{steepest_mask, DIRECTION_BITS, OPPOSITE};
use gpu_waterz_core::{AffinityGraph, AffinityValues, Dims3, WatershedParams};
use ndarray::Array3;
use rayon::prelude::*;

/// The fragments of a watershed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragments {
    /// One label per voxel, `(z, y, x)`; 0 is background.
    pub labels: Array3<u64>,
    /// The number of fragments: labels are `1..=n_fragments`.
    pub n_fragments: u64,
    /// Voxels per label, index 0 for background (waterz's `counts`).
    pub sizes: Vec<u64>,
}

const HIGH_BIT: u64 = 1 << 63;
const VISITED: u64 = 0x40;

/// waterz's watershed of `affs` with thresholds `params`.
pub fn watershed(affs: &AffinityGraph<'_>, params: WatershedParams) -> Fragments {
    let dims = affs.dims();
    // Contiguous float32 affinities are read in place; others are copied.
    if let AffinityValues::F32(view) = affs.values() {
        if let Some(flat) = view.as_slice() {
            return watershed_flat(flat, dims, params);
        }
    }
    let flat = affs.to_f32_vec();
    watershed_flat(&flat, dims, params)
}

/// The watershed of C-ordered `(3, z, y, x)` float affinities.
// Direction indices `d` are the algorithm's vocabulary (bits, offsets, opposites).
#[allow(clippy::needless_range_loop)]
pub fn watershed_flat(affs: &[f32], dims: Dims3, params: WatershedParams) -> Fragments {
    let n = (dims.z * dims.y * dims.x) as usize;
    assert_eq!(affs.len(), 3 * n, "affinities must hold 3 * z * y * x values");
    // The queue holds voxel indices: 4 bytes each where they fit (it holds
    // nearly every voxel at once: the corners).
    if n <= u32::MAX as usize {
        watershed_with_queue::<u32>(affs, dims, params)
    } else {
        watershed_with_queue::<usize>(affs, dims, params)
    }
}

/// A voxel index as the watershed's queue stores it.
trait QueueIndex: Copy + Send + Sync + Default {
    fn new(i: usize) -> Self;
    fn get(self) -> usize;
}

impl QueueIndex for u32 {
    fn new(i: usize) -> Self {
        i as u32
    }
    fn get(self) -> usize {
        self as usize
    }
}

impl QueueIndex for usize {
    fn new(i: usize) -> Self {
        i
    }
    fn get(self) -> usize {
        self
    }
}

/// [`watershed_flat`] with queue indices of type `I` (which must hold
/// every voxel index).
fn watershed_with_queue<I: QueueIndex>(affs: &[f32], dims: Dims3, params: WatershedParams) -> Fragments {
    let (zd, yd, xd) = (dims.z as usize, dims.y as usize, dims.x as usize);
    let n = zd * yd * xd;
    let low = params.aff_threshold_low;
    let high = params.aff_threshold_high;
    let mut seg = vec![0u64; n];

    // Pass 1: the edge mask (each voxel on its own: z-sections in
    // parallel).
    seg.par_chunks_mut((yd * xd).max(1)).enumerate().for_each(|(z, section)| {
        for y in 0..yd {
            for x in 0..xd {
                let faces = gpu_waterz_abi::watershed::face_affinities(affs, dims, z as u64, y as u64, x as u64, low);
                section[y * xd + x] = steepest_mask(faces, low, high) as u64;
            }
        }
    });

    let offset: [isize; 6] = [-((yd * xd) as isize), -(xd as isize), -1, (yd * xd) as isize, xd as isize, 1];
    let bit = |d: usize| DIRECTION_BITS[d] as u64;
    let neighbour = |i: usize, d: usize| (i as isize + offset[d]) as usize;

    // Pass 2: plateau corners, queued in scan order (found in parallel:
    // the test reads direction bits only, which the marks do not touch).
    // Counted per block of voxels first, then written into a queue of
    // exactly their number: no per-thread vectors to concatenate.
    // Whether a voxel has a marked face its neighbour does not mark back
    // (a corner) and whether it has one its neighbour marks back (mutual).
    let faces = |i: usize| {
        let (mut down, mut mutual) = (false, false);
        for (d, &opposite) in OPPOSITE.iter().enumerate() {
            if seg[i] & bit(d) != 0 {
                if seg[neighbour(i, d)] & bit(opposite) == 0 {
                    down = true;
                } else {
                    mutual = true;
                }
            }
        }
        (down, mutual)
    };
    let is_corner = |i: usize| faces(i).0;
    const BLOCK: usize = 1 << 16;
    let block = |b: usize| b * BLOCK..((b + 1) * BLOCK).min(n);
    // Pass 3 queues only voxels with a mutual face that are not corners:
    // counted too, so that the queue never grows by reallocation.
    let (counts, later): (Vec<usize>, Vec<usize>) = (0..n.div_ceil(BLOCK))
        .into_par_iter()
        .map(|b| {
            block(b).fold((0, 0), |(corners, later), i| match faces(i) {
                (true, _) => (corners + 1, later),
                (false, mutual) => (corners, later + mutual as usize),
            })
        })
        .unzip();
    let mut bfs: Vec<I> = Vec::with_capacity(counts.iter().sum::<usize>() + later.iter().sum::<usize>());
    bfs.resize(counts.iter().sum(), I::default());
    let mut parts = Vec::with_capacity(counts.len());
    let mut rest = &mut bfs[..];
    for &count in &counts {
        let (part, tail) = rest.split_at_mut(count);
        parts.push(part);
        rest = tail;
    }
    parts.into_par_iter().enumerate().for_each(|(b, part)| {
        for (slot, i) in part.iter_mut().zip(block(b).filter(|&i| is_corner(i))) {
            *slot = I::new(i);
        }
    });
    for &i in &bfs {
        seg[i.get()] |= VISITED;
    }

    // Pass 3: divide the plateaus.
    let mut head = 0;
    while head < bfs.len() {
        let i = bfs[head].get();
        let mut to_set = 0u64;
        for (d, &opposite) in OPPOSITE.iter().enumerate() {
            if seg[i] & bit(d) != 0 {
                let j = neighbour(i, d);
                if seg[j] & bit(opposite) != 0 {
                    if seg[j] & VISITED == 0 {
                        bfs.push(I::new(j));
                        seg[j] |= VISITED;
                    }
                } else {
                    to_set = bit(d);
                }
            }
        }
        seg[i] = to_set;
        head += 1;
    }
    bfs.clear();

    // Pass 4: basins, in scan order.
    let mut sizes: Vec<u64> = vec![0];
    let mut next_id: u64 = 1;
    for i in 0..n {
        if seg[i] == 0 {
            seg[i] |= HIGH_BIT;
            sizes[0] += 1;
        }
        if seg[i] & HIGH_BIT == 0 && seg[i] != 0 {
            bfs.push(I::new(i));
            head = 0;
            seg[i] |= VISITED;
            while head < bfs.len() {
                let me = bfs[head].get();
                for d in 0..6 {
                    if seg[me] & bit(d) != 0 {
                        let him = neighbour(me, d);
                        if seg[him] & HIGH_BIT != 0 {
                            let label = seg[him];
                            sizes[(label & !HIGH_BIT) as usize] += bfs.len() as u64;
                            for &it in &bfs {
                                seg[it.get()] = label;
                            }
                            bfs.clear();
                            break;
                        } else if seg[him] & VISITED == 0 {
                            seg[him] |= VISITED;
                            bfs.push(I::new(him));
                        }
                    }
                }
                head += 1;
            }
            if !bfs.is_empty() {
                sizes.push(bfs.len() as u64);
                for &it in &bfs {
                    seg[it.get()] = HIGH_BIT | next_id;
                }
                next_id += 1;
                bfs.clear();
            }
        }
    }
    seg.par_iter_mut().for_each(|v| *v &= !HIGH_BIT);
    tracing::debug!(n_fragments = next_id - 1, "reference watershed");
    Fragments {
        labels: Array3::from_shape_vec((zd, yd, xd), seg).expect("the shape holds n voxels"),
        n_fragments: next_id - 1,
        sizes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array4;

    fn params() -> WatershedParams {
        WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 }
    }

    fn run(a: &Array4<f32>) -> Fragments {
        let g = AffinityGraph::from_f32(a.view()).unwrap();
        watershed(&g, params())
    }

    #[test]
    fn all_zero_is_background() {
        let f = run(&Array4::zeros((3, 2, 3, 4)));
        assert_eq!(f.n_fragments, 0);
        assert!(f.labels.iter().all(|&l| l == 0));
        assert_eq!(f.sizes, vec![24]);
    }

    #[test]
    fn all_one_is_one_fragment() {
        let f = run(&Array4::ones((3, 2, 3, 4)));
        assert_eq!(f.n_fragments, 1);
        assert!(f.labels.iter().all(|&l| l == 1));
        assert_eq!(f.sizes, vec![0, 24]);
    }

    #[test]
    fn single_voxel_is_background() {
        // Every face of a 1x1x1 volume is outside, so at `low`.
        let f = run(&Array4::ones((3, 1, 1, 1)));
        assert_eq!(f.n_fragments, 0);
        assert_eq!(f.labels[[0, 0, 0]], 0);
    }

    #[test]
    fn a_weak_face_splits_a_row() {
        // Four voxels in x; faces 0-1 and 2-3 strong, 1-2 weak.
        let mut a = Array4::<f32>::zeros((3, 1, 1, 4));
        a[[2, 0, 0, 1]] = 0.9;
        a[[2, 0, 0, 2]] = 0.2;
        a[[2, 0, 0, 3]] = 0.8;
        let f = run(&a);
        assert_eq!(f.labels.as_slice().unwrap(), &[1, 1, 2, 2]);
        assert_eq!(f.sizes, vec![0, 2, 2]);
    }

    #[test]
    fn sizes_sum_to_the_volume_and_labels_are_dense() {
        let mut a = Array4::<f32>::zeros((3, 3, 4, 5));
        for (i, v) in a.iter_mut().enumerate() {
            *v = ((i * 7919) % 101) as f32 / 100.0;
        }
        let f = run(&a);
        assert_eq!(f.sizes.iter().sum::<u64>(), 60);
        for l in 1..=f.n_fragments {
            assert_eq!(f.labels.iter().filter(|&&v| v == l).count() as u64, f.sizes[l as usize]);
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use gpu_waterz_abi::watershed::face_affinities;
    use ndarray::Array4;
    use proptest::prelude::*;

    fn volume() -> impl Strategy<Value = Array4<f32>> {
        (1usize..5, 1usize..6, 1usize..6, 1u32..5).prop_flat_map(|(z, y, x, levels)| {
            proptest::collection::vec(0..=levels, 3 * z * y * x).prop_map(move |v| {
                Array4::from_shape_vec((3, z, y, x), v.into_iter().map(|k| k as f32 / levels as f32).collect()).unwrap()
            })
        })
    }

    proptest! {
        /// Labels are dense (`1..=n`, each used), sizes count them, and a
        /// voxel is background exactly when no face of it is above `low`.
        #[test]
        fn labels_are_dense_and_background_is_exact(a in volume()) {
            let g = AffinityGraph::from_f32(a.view()).unwrap();
            let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
            let f = watershed(&g, params);
            let flat = g.to_f32_vec();
            let dims = g.dims();
            let mut counts = vec![0u64; f.n_fragments as usize + 1];
            for ((z, y, x), &l) in f.labels.indexed_iter() {
                prop_assert!(l <= f.n_fragments);
                counts[l as usize] += 1;
                let faces = face_affinities(&flat, dims, z as u64, y as u64, x as u64, params.aff_threshold_low);
                let any_above = faces.iter().any(|&v| v > params.aff_threshold_low);
                prop_assert_eq!(l == 0, !any_above);
            }
            prop_assert_eq!(&counts, &f.sizes);
            prop_assert!(counts.iter().skip(1).all(|&c| c > 0));
        }
    }
}
