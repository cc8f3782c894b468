//! The serial region graph (waterz's `region_graph.hpp`), plus the dense
//! relabelling that lets user fragments carry any `u64` ids.

use gpu_waterz_core::{AffinityGraph, ContactStats};
use ndarray::ArrayView3;
use rayon::prelude::*;

/// A region adjacency graph over dense node ids `0..n_nodes`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionGraph {
    /// The number of nodes, background (0) included.
    pub n_nodes: u64,
    /// Edge endpoints `(u, v)` with `0 < u < v`, sorted: waterz's edge order.
    pub edges: Vec<[u64; 2]>,
    /// Faces of edge `e` are `face_affinities[face_offsets[e]..face_offsets[e + 1]]`.
    pub face_offsets: Vec<usize>,
    /// The affinities of all boundary faces, grouped by edge, in scan order.
    pub face_affinities: Vec<f32>,
}

impl RegionGraph {
    /// The number of edges.
    pub fn n_edges(&self) -> usize {
        self.edges.len()
    }

    /// The affinities of the faces of edge `edge_idx`, in scan order.
    pub fn faces(&self, edge_idx: usize) -> &[f32] {
        &self.face_affinities[self.face_offsets[edge_idx]..self.face_offsets[edge_idx + 1]]
    }

    /// The exact statistics of every edge (integer count, fixed-point sum).
    pub fn contact_stats(&self) -> Vec<ContactStats> {
        (0..self.n_edges())
            .into_par_iter()
            .map(|e| self.faces(e).iter().fold(ContactStats::default(), |s, &a| s.merged(ContactStats::of_face(a))))
            .collect()
    }
}

/// Labels relabelled to dense ids, keeping their order: id `k` stands for
/// the `k`-th smallest label (`0` for background when it occurs, and always
/// `0` for label 0). Order-preserving relabelling changes nothing in
/// waterz's algorithm (edges are `(min, max)`, merges keep the smaller id),
/// and lets fragments carry any `u64` ids without a table indexed by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenseLabels {
    /// The dense id of every voxel (u32: half the memory and traffic of the
    /// labels; more than `u32::MAX - 1` fragments are refused).
    pub dense: Vec<u32>,
    /// `original[k]` is the label that dense id `k` stands for; `original[0] == 0`.
    pub original: Vec<u64>,
}

/// The distinct values of `labels`, sorted: found per chunk in parallel,
/// skipping runs of one value (a volume holds few distinct labels, so no
/// copy of it is sorted).
pub fn distinct_labels(labels: &[u64]) -> Vec<u64> {
    let mut distinct: Vec<u64> = labels
        .par_chunks(1 << 16)
        .fold(std::collections::HashSet::new, |mut seen, chunk| {
            let mut last = None;
            for &l in chunk {
                if last != Some(l) {
                    seen.insert(l);
                    last = Some(l);
                }
            }
            seen
        })
        .reduce(std::collections::HashSet::new, |mut a, b| {
            if a.len() < b.len() {
                return b.into_iter().chain(a).collect();
            }
            a.extend(b);
            a
        })
        .into_iter()
        .collect();
    distinct.sort_unstable();
    distinct
}

impl DenseLabels {
    /// Labels that are dense already (`0..=n_fragments`, as the watershed
    /// gives them), narrowed to u32.
    pub fn from_dense(labels: &[u64], n_fragments: u64) -> Result<Self, crate::GraphError> {
        check_fragment_count(n_fragments)?;
        let dense = labels.par_iter().map(|&l| l as u32).collect();
        Ok(Self { dense, original: (0..=n_fragments).collect() })
    }

    /// Relabels `labels` (any `u64` ids, 0 = background); fails with more
    /// than `u32::MAX - 1` distinct labels.
    pub fn new(labels: ArrayView3<'_, u64>) -> Result<Self, crate::GraphError> {
        // Contiguous labels are read in place; others are copied once.
        let owned;
        let flat: &[u64] = match labels.as_slice() {
            Some(s) => s,
            None => {
                owned = labels.iter().copied().collect::<Vec<u64>>();
                &owned
            }
        };
        // Labels no larger than a few times the volume: a presence table
        // indexed by label, then a table from label to dense id (no hashing,
        // no search per voxel). Larger labels: a sorted list and a search.
        let max = flat.par_iter().copied().max().unwrap_or(0);
        let bound = (flat.len() as u64).saturating_mul(4).max(1 << 20);
        if max < bound {
            let present: Vec<std::sync::atomic::AtomicBool> =
                (0..=max).map(|_| std::sync::atomic::AtomicBool::new(false)).collect();
            flat.par_chunks(1 << 16).for_each(|chunk| {
                let mut last = None;
                for &l in chunk {
                    if last != Some(l) {
                        present[l as usize].store(true, std::sync::atomic::Ordering::Relaxed);
                        last = Some(l);
                    }
                }
            });
            let mut original = vec![0u64];
            for (label, seen) in present.iter().enumerate().skip(1) {
                if seen.load(std::sync::atomic::Ordering::Relaxed) {
                    original.push(label as u64);
                }
            }
            check_fragment_count(original.len() as u64 - 1)?;
            let mut table = vec![0u32; max as usize + 1];
            for (k, &label) in original.iter().enumerate() {
                table[label as usize] = k as u32;
            }
            let dense = flat.par_iter().map(|&l| table[l as usize]).collect();
            return Ok(Self { dense, original });
        }
        let mut original = distinct_labels(flat);
        if original.first() != Some(&0) {
            original.insert(0, 0);
        }
        check_fragment_count(original.len() as u64 - 1)?;
        let dense =
            flat.par_iter().map(|l| original.binary_search(l).expect("every label is in the table") as u32).collect();
        Ok(Self { dense, original })
    }

    /// The number of dense ids (background included).
    pub fn n_nodes(&self) -> u64 {
        self.original.len() as u64
    }
}

/// Fails for more fragments than dense u32 ids can name.
fn check_fragment_count(n_fragments: u64) -> Result<(), crate::GraphError> {
    if n_fragments >= u32::MAX as u64 {
        return Err(crate::GraphError::TooManyFragments(n_fragments));
    }
    Ok(())
}

/// The region graph of dense `labels` (`0..n_nodes`, as [`DenseLabels`]
/// gives them, u32 or u64) over `affs`. Pairs that involve label 0 are left
/// out.
pub fn region_graph<L>(affs: &AffinityGraph<'_>, labels: ArrayView3<'_, L>, n_nodes: u64) -> RegionGraph
where
    L: Copy + Into<u64> + PartialEq + Send + Sync,
{
    let dims = affs.dims();
    let shape = (dims.z as usize, dims.y as usize, dims.x as usize);
    assert_eq!(labels.dim(), shape, "labels must have the affinities' shape");
    // (u, v, affinity) for every boundary face, in waterz's scan order:
    // each z-section's faces in parallel, concatenated in z order.
    let started = std::time::Instant::now();
    let owned;
    let flat: &[L] = match labels.as_slice() {
        Some(s) => s,
        None => {
            owned = labels.iter().copied().collect::<Vec<L>>();
            &owned
        }
    };
    let (sy, sz) = (shape.2, shape.1 * shape.2);
    let sections: Vec<Vec<(u64, u64, f32)>> = (0..shape.0)
        .into_par_iter()
        .map(|z| {
            let mut faces = Vec::new();
            let nx = shape.2;
            // Rows as slices (no index checks in the loop): this voxel's,
            // the one before along y, the one before along z.
            for y in 0..shape.1 {
                let start = z * sz + y * sy;
                let row = &flat[start..start + nx];
                let up = (y > 0).then(|| &flat[start - sy..start - sy + nx]);
                let back = (z > 0).then(|| &flat[start - sz..start - sz + nx]);
                let mut push = |id1: L, id2: L, d: usize, x: usize| {
                    if id1 != id2 {
                        let (id1, id2): (u64, u64) = (id1.into(), id2.into());
                        let (u, v) = if id1 < id2 { (id1, id2) } else { (id2, id1) };
                        if u != 0 {
                            faces.push((u, v, affs.get(d, z, y, x)));
                        }
                    }
                };
                for x in 0..nx {
                    let id1 = row[x];
                    if let Some(back) = back {
                        push(id1, back[x], 0, x);
                    }
                    if let Some(up) = up {
                        push(id1, up[x], 1, x);
                    }
                    if x > 0 {
                        push(id1, row[x - 1], 2, x);
                    }
                }
            }
            faces
        })
        .collect();
    let collected = started.elapsed();
    // Group the faces by edge, each edge's faces in scan order (sections in
    // z order, faces within one in scan order): count them per edge, order
    // the edges, then place every face at its edge's cursor. The same
    // result as a stable sort of the faces by edge, in two hash passes.
    type EdgeMap<V> = std::collections::HashMap<(u64, u64), V, std::hash::BuildHasherDefault<rustc_hash::FxHasher>>;
    let mut counts: EdgeMap<usize> = EdgeMap::default();
    for section in &sections {
        for &(u, v, _) in section {
            *counts.entry((u, v)).or_insert(0) += 1;
        }
    }
    let mut ordered: Vec<((u64, u64), usize)> = counts.into_iter().collect();
    ordered.sort_unstable_by_key(|&(edge, _)| edge);
    let n_faces: usize = ordered.iter().map(|&(_, c)| c).sum();
    let mut edges = Vec::with_capacity(ordered.len());
    let mut face_offsets = Vec::with_capacity(ordered.len() + 1);
    let mut cursors: EdgeMap<usize> = EdgeMap::default();
    cursors.reserve(ordered.len());
    let mut offset = 0;
    for &((u, v), count) in &ordered {
        edges.push([u, v]);
        face_offsets.push(offset);
        cursors.insert((u, v), offset);
        offset += count;
    }
    face_offsets.push(offset);
    let mut face_affinities = vec![0.0f32; n_faces];
    for section in &sections {
        for &(u, v, a) in section {
            let cursor = cursors.get_mut(&(u, v)).expect("every edge was counted");
            face_affinities[*cursor] = a;
            *cursor += 1;
        }
    }
    let grouped = started.elapsed();
    tracing::debug!(n_edges = edges.len(), n_faces, ?collected, ?grouped, "reference region graph");
    RegionGraph { n_nodes, edges, face_offsets, face_affinities }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array3, Array4};

    #[test]
    fn edges_faces_and_background() {
        // Row of 4 voxels in x: labels 2, 2, 5, 0 (background last).
        let labels = Array3::from_shape_vec((1, 1, 4), vec![2u64, 2, 5, 0]).unwrap();
        let mut a = Array4::<f32>::zeros((3, 1, 1, 4));
        a[[2, 0, 0, 1]] = 0.9;
        a[[2, 0, 0, 2]] = 0.25;
        a[[2, 0, 0, 3]] = 0.5;
        let g = AffinityGraph::from_f32(a.view()).unwrap();
        let dense = DenseLabels::new(labels.view()).unwrap();
        assert_eq!(dense.original, vec![0, 2, 5]);
        assert_eq!(dense.dense, vec![1, 1, 2, 0]);
        let labels = Array3::from_shape_vec((1, 1, 4), dense.dense).unwrap();
        let rg = region_graph(&g, labels.view(), 3);
        assert_eq!(rg.edges, vec![[1, 2]]);
        assert_eq!(rg.faces(0), &[0.25]);
        assert_eq!(rg.contact_stats()[0], ContactStats { contact_count: 1, affinity_sum: 1 << 30 });
    }

    #[test]
    fn faces_stay_in_scan_order_and_edges_sorted() {
        // 2x2 in (y, x): labels [[3, 1], [1, 2]].
        let labels = Array3::from_shape_vec((1, 2, 2), vec![3u64, 1, 1, 2]).unwrap();
        let mut a = Array4::<f32>::zeros((3, 1, 2, 2));
        a[[2, 0, 0, 1]] = 0.1; // (0,0)-(0,1): 3-1
        a[[1, 0, 1, 0]] = 0.2; // (0,0)-(1,0): 3-1
        a[[1, 0, 1, 1]] = 0.3; // (0,1)-(1,1): 1-2
        a[[2, 0, 1, 1]] = 0.4; // (1,0)-(1,1): 1-2
        let g = AffinityGraph::from_f32(a.view()).unwrap();
        let rg = region_graph(&g, labels.view(), 4);
        assert_eq!(rg.edges, vec![[1, 2], [1, 3]]);
        assert_eq!(rg.faces(0), &[0.3, 0.4]);
        assert_eq!(rg.faces(1), &[0.1, 0.2]);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use ndarray::{Array3, Array4};
    use proptest::prelude::*;

    proptest! {
        /// Edges are sorted, unique, background-free, and hold exactly the
        /// faces between different non-zero labels.
        #[test]
        fn edges_hold_every_boundary_face(
            (labels, affs) in (1usize..4, 1usize..5, 1usize..5).prop_flat_map(|(z, y, x)| (
                proptest::collection::vec(0u64..5, z * y * x).prop_map(move |v| Array3::from_shape_vec((z, y, x), v).unwrap()),
                proptest::collection::vec(0.0f32..=1.0, 3 * z * y * x).prop_map(move |v| Array4::from_shape_vec((3, z, y, x), v).unwrap()),
            ))
        ) {
            let g = AffinityGraph::from_f32(affs.view()).unwrap();
            let rg = region_graph(&g, labels.view(), 5);
            prop_assert!(rg.edges.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(rg.edges.iter().all(|&[u, v]| 0 < u && u < v));
            let mut boundary = 0;
            for ((z, y, x), &l) in labels.indexed_iter() {
                for (d, &p) in [z, y, x].iter().enumerate() {
                    if p == 0 { continue; }
                    let m = labels[[z - (d == 0) as usize, y - (d == 1) as usize, x - (d == 2) as usize]];
                    if l != m && l != 0 && m != 0 { boundary += 1; }
                }
            }
            prop_assert_eq!(rg.face_affinities.len(), boundary);
            let stats = rg.contact_stats();
            prop_assert_eq!(stats.iter().map(|s| s.contact_count).sum::<u64>(), boundary as u64);
        }

        /// Dense ids keep the labels' order, by the table (small labels) and
        /// by the search (huge ones) alike.
        #[test]
        fn dense_labels_keep_the_order(values in proptest::collection::vec(0u64..12, 1..200), big in any::<bool>()) {
            let labels: Vec<u64> = values.iter().map(|&v| if big && v > 0 { v * (1 << 50) + 3 } else { v }).collect();
            let n = labels.len();
            let dense = DenseLabels::new(Array3::from_shape_vec((1, 1, n), labels.clone()).unwrap().view()).unwrap();
            let mut distinct: Vec<u64> = labels.iter().copied().filter(|&l| l != 0).collect();
            distinct.sort_unstable();
            distinct.dedup();
            let mut original = vec![0];
            original.extend(distinct);
            prop_assert_eq!(&dense.original, &original);
            for (l, d) in labels.iter().zip(&dense.dense) {
                prop_assert_eq!(original[*d as usize], *l);
            }
        }
    }
}
