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
    /// The dense id of every voxel.
    pub dense: Vec<u64>,
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
    /// Relabels `labels` (any `u64` ids, 0 = background).
    pub fn new(labels: ArrayView3<'_, u64>) -> Self {
        // Contiguous labels are read in place; others are copied once.
        let owned;
        let flat: &[u64] = match labels.as_slice() {
            Some(s) => s,
            None => {
                owned = labels.iter().copied().collect::<Vec<u64>>();
                &owned
            }
        };
        let mut original = distinct_labels(flat);
        if original.first() != Some(&0) {
            original.insert(0, 0);
        }
        // Identity when the labels are already dense (the watershed's are).
        let identity = original.iter().enumerate().all(|(k, &l)| k as u64 == l);
        let dense = if identity {
            flat.to_vec()
        } else {
            flat.par_iter().map(|l| original.binary_search(l).expect("every label is in the table") as u64).collect()
        };
        Self { dense, original }
    }

    /// The number of dense ids (background included).
    pub fn n_nodes(&self) -> u64 {
        self.original.len() as u64
    }
}

/// The region graph of dense `labels` (`0..n_nodes`, as [`DenseLabels`]
/// gives them) over `affs`. Pairs that involve label 0 are left out.
pub fn region_graph(affs: &AffinityGraph<'_>, labels: ArrayView3<'_, u64>, n_nodes: u64) -> RegionGraph {
    let dims = affs.dims();
    let shape = (dims.z as usize, dims.y as usize, dims.x as usize);
    assert_eq!(labels.dim(), shape, "labels must have the affinities' shape");
    // (u, v, affinity) for every boundary face, in waterz's scan order:
    // each z-section's faces in parallel, concatenated in z order.
    let sections: Vec<Vec<(u64, u64, f32)>> = (0..shape.0)
        .into_par_iter()
        .map(|z| {
            let mut faces = Vec::new();
            for y in 0..shape.1 {
                for x in 0..shape.2 {
                    let id1 = labels[[z, y, x]];
                    let p = [z, y, x];
                    for d in 0..3 {
                        if p[d] == 0 {
                            continue;
                        }
                        let id2 = labels[[z - (d == 0) as usize, y - (d == 1) as usize, x - (d == 2) as usize]];
                        if id1 != id2 {
                            let (u, v) = if id1 < id2 { (id1, id2) } else { (id2, id1) };
                            if u != 0 {
                                faces.push((u, v, affs.get(d, z, y, x)));
                            }
                        }
                    }
                }
            }
            faces
        })
        .collect();
    let mut faces: Vec<(u64, u64, f32)> = Vec::with_capacity(sections.iter().map(Vec::len).sum());
    for section in sections {
        faces.extend(section);
    }
    // A stable sort keeps each edge's faces in scan order.
    faces.par_sort_by_key(|&(u, v, _)| (u, v));
    let mut edges = Vec::new();
    let mut face_offsets = Vec::new();
    let mut face_affinities = Vec::with_capacity(faces.len());
    for (i, &(u, v, a)) in faces.iter().enumerate() {
        if i == 0 || (faces[i - 1].0, faces[i - 1].1) != (u, v) {
            edges.push([u, v]);
            face_offsets.push(i);
        }
        face_affinities.push(a);
    }
    face_offsets.push(faces.len());
    tracing::debug!(n_edges = edges.len(), n_faces = faces.len(), "reference region graph");
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
        let dense = DenseLabels::new(labels.view());
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
    }
}
