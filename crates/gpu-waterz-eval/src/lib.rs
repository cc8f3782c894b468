//! Segmentation metrics, as `waterz.evaluate` defines them.
//!
//! Over the voxels whose ground-truth label is not 0, with `p_ij` the
//! fraction of voxels in segment `i` and ground-truth region `j`, `s_i` and
//! `t_j` the marginals, and `H` the entropy in bits:
//! - `voi_split = H(s, t) - H(t) = H(seg | gt)` (extra splits),
//! - `voi_merge = H(s, t) - H(s) = H(gt | seg)` (false merges),
//! - `rand_split = Σ p_ij² / Σ t_j²`, `rand_merge = Σ p_ij² / Σ s_i²`
//!   (on counts, which gives the same ratios).
//!
//! The contingency table is built in parallel (rayon) with `u64` counts, so
//! it is exact for any number of voxels; sums run in `f64`. [`gpu`] builds
//! the same table on the GPU (sort and reduce-by-key), and the metrics from
//! it with the same code.
#![forbid(unsafe_code)]

pub mod gpu;

use gpu_waterz_core::CoreError;
use ndarray::ArrayView3;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The hasher of the tables here: integer keys from our own volumes need
/// no protection against crafted collisions, and Fx hashes them several
/// times faster than the standard library's default.
pub type FastHash = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

/// A contingency table: `(ground truth, segment)` label pairs and their
/// voxel counts.
pub type ContingencyTable = HashMap<(u64, u64), u64, FastHash>;

/// waterz's four metrics.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// `H(seg | gt)` in bits.
    pub voi_split: f64,
    /// `H(gt | seg)` in bits.
    pub voi_merge: f64,
    /// `Σ p² / Σ t²`.
    pub rand_split: f64,
    /// `Σ p² / Σ s²`.
    pub rand_merge: f64,
}

/// Errors of evaluation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// Bad input.
    #[error(transparent)]
    Input(#[from] CoreError),
    /// Every ground-truth voxel is 0, so nothing can be compared.
    #[error("the ground truth has no labelled voxels (all are 0, which is ignored)")]
    NoGroundTruth,
    /// The GPU evaluation failed.
    #[error(transparent)]
    Gpu(#[from] gpu_waterz_runtime::RuntimeError),
    /// More ground-truth labels than the GPU evaluation's u32 ids hold.
    #[error("the GPU evaluation takes fewer than 2^32 - 1 ground-truth labels, not {n_labels}")]
    TooManyLabels {
        /// The number of distinct labels.
        n_labels: u64,
    },
}

/// The contingency table of `(gt, seg)` label pairs over voxels with `gt != 0`.
pub fn contingency<S, G>(segmentation: &[S], ground_truth: &[G]) -> ContingencyTable
where
    S: Copy + Into<u64> + Sync,
    G: Copy + Into<u64> + Sync,
{
    const CHUNK: usize = 1 << 20;
    segmentation
        .par_chunks(CHUNK)
        .zip(ground_truth.par_chunks(CHUNK))
        .fold(ContingencyTable::default, |mut table: ContingencyTable, (s, g)| {
            for (&s, &g) in s.iter().zip(g) {
                let g: u64 = g.into();
                if g != 0 {
                    *table.entry((g, s.into())).or_insert(0) += 1;
                }
            }
            table
        })
        .reduce(ContingencyTable::default, |mut a, b| {
            if a.len() < b.len() {
                return merge_into(b, a);
            }
            for (k, v) in b {
                *a.entry(k).or_insert(0) += v;
            }
            a
        })
}

fn merge_into(mut a: ContingencyTable, b: ContingencyTable) -> ContingencyTable {
    for (k, v) in b {
        *a.entry(k).or_insert(0) += v;
    }
    a
}

/// The metrics from a contingency table of `(gt, seg)` counts.
pub fn metrics_from_table(table: &ContingencyTable) -> Result<Metrics, EvalError> {
    // Sorted like waterz's std::map, so that float sums run in its order.
    let mut pairs: Vec<((u64, u64), u64)> = table.iter().map(|(&k, &v)| (k, v)).collect();
    pairs.par_sort_unstable();
    metrics_from_sorted(&pairs)
}

/// The metrics from contingency pairs sorted by `(gt, seg)`, each pair once.
fn metrics_from_sorted(pairs: &[((u64, u64), u64)]) -> Result<Metrics, EvalError> {
    // Ground-truth totals come in order (the pairs are sorted by it first);
    // segment totals are gathered, then sorted.
    let mut t_sorted: Vec<(u64, u64)> = Vec::new();
    for &((g, _), c) in pairs {
        match t_sorted.last_mut() {
            Some((last, total)) if *last == g => *total += c,
            _ => t_sorted.push((g, c)),
        }
    }
    let mut s_i: HashMap<u64, u64, FastHash> = HashMap::with_capacity_and_hasher(pairs.len(), FastHash::default());
    let mut total = 0u64;
    for &((_, s), c) in pairs {
        *s_i.entry(s).or_insert(0) += c;
        total += c;
    }
    if total == 0 {
        return Err(EvalError::NoGroundTruth);
    }
    let mut s_sorted: Vec<(u64, u64)> = s_i.into_iter().collect();
    s_sorted.par_sort_unstable();
    let sum_sq = |it: &mut dyn Iterator<Item = u64>| it.map(|c| (c as f64) * (c as f64)).sum::<f64>();
    let sum_p = sum_sq(&mut pairs.iter().map(|p| p.1));
    let sum_t = sum_sq(&mut t_sorted.iter().map(|p| p.1));
    let sum_s = sum_sq(&mut s_sorted.iter().map(|p| p.1));
    let total = total as f64;
    let entropy = |it: &mut dyn Iterator<Item = u64>| {
        it.fold(0.0f64, |h, c| {
            let p = c as f64 / total;
            if p != 0.0 {
                h - p * p.log2()
            } else {
                h
            }
        })
    };
    let h_st = entropy(&mut pairs.iter().map(|p| p.1));
    let h_t = entropy(&mut t_sorted.iter().map(|p| p.1));
    let h_s = entropy(&mut s_sorted.iter().map(|p| p.1));
    Ok(Metrics { voi_split: h_st - h_t, voi_merge: h_st - h_s, rand_split: sum_p / sum_t, rand_merge: sum_p / sum_s })
}

/// waterz's metrics of a segmentation given as the regions of fragments:
/// `fragment_table` counts the voxels of every (ground truth, fragment)
/// pair (from [`contingency`] or [`gpu::contingency_on_gpu`] over the
/// fragments, once), `region_of` gives each fragment's segment label. The
/// segmentation's table is the fragment table with every fragment replaced
/// by its region, the same integer counts as from the voxels, so the
/// metrics are [`evaluate`]'s bit for bit.
pub fn metrics_of_regions(
    fragment_table: &ContingencyTable,
    region_of: impl Fn(u64) -> u64,
) -> Result<Metrics, EvalError> {
    // The fragment pairs relabelled by region, sorted by (gt, region) and
    // merged: the segmentation's table in waterz's order, without a map.
    let mut pairs: Vec<((u64, u64), u64)> =
        fragment_table.iter().map(|(&(g, fragment), &count)| ((g, region_of(fragment)), count)).collect();
    pairs.par_sort_unstable();
    pairs.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 += later.1;
            true
        } else {
            false
        }
    });
    metrics_from_sorted(&pairs)
}

/// waterz's metrics of `segmentation` against `ground_truth` (0 ignored).
pub fn evaluate<S, G>(segmentation: ArrayView3<'_, S>, ground_truth: ArrayView3<'_, G>) -> Result<Metrics, EvalError>
where
    S: Copy + Into<u64> + Sync,
    G: Copy + Into<u64> + Sync,
{
    if segmentation.shape() != ground_truth.shape() {
        return Err(CoreError::ShapeMismatch {
            name: "segmentation",
            expected: ground_truth.shape().to_vec(),
            found: segmentation.shape().to_vec(),
        }
        .into());
    }
    if ground_truth.is_empty() {
        return Err(CoreError::EmptyVolume { shape: ground_truth.shape().to_vec() }.into());
    }
    let seg = segmentation.as_standard_layout();
    let gt = ground_truth.as_standard_layout();
    let table = contingency(seg.as_slice().expect("standard layout"), gt.as_slice().expect("standard layout"));
    metrics_from_table(&table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array3;
    use proptest::prelude::*;

    fn eval(seg: &[u64], gt: &[u64]) -> Metrics {
        let s = Array3::from_shape_vec((1, 1, seg.len()), seg.to_vec()).unwrap();
        let g = Array3::from_shape_vec((1, 1, gt.len()), gt.to_vec()).unwrap();
        evaluate(s.view(), g.view()).unwrap()
    }

    #[test]
    fn identical_partitions_score_perfectly() {
        let m = eval(&[5, 5, 7, 7], &[1, 1, 2, 2]);
        assert_eq!((m.voi_split, m.voi_merge, m.rand_split, m.rand_merge), (0.0, 0.0, 1.0, 1.0));
    }

    #[test]
    fn a_split_costs_one_bit_of_split() {
        // One gt region split in two halves: H(seg|gt) = 1 bit, no merge.
        let m = eval(&[1, 1, 2, 2], &[3, 3, 3, 3]);
        assert!((m.voi_split - 1.0).abs() < 1e-12 && m.voi_merge.abs() < 1e-12);
        // Σp² = 2²+2² = 8, Σt² = 16, Σs² = 8.
        assert_eq!((m.rand_split, m.rand_merge), (0.5, 1.0));
    }

    #[test]
    fn a_merge_costs_one_bit_of_merge() {
        let m = eval(&[4, 4, 4, 4], &[1, 1, 2, 2]);
        assert!((m.voi_merge - 1.0).abs() < 1e-12 && m.voi_split.abs() < 1e-12);
        assert_eq!((m.rand_split, m.rand_merge), (1.0, 0.5));
    }

    #[test]
    fn ground_truth_zero_is_ignored() {
        let m = eval(&[1, 2, 9, 9], &[1, 1, 0, 0]);
        assert!((m.voi_split - 1.0).abs() < 1e-12);
        let s = Array3::<u64>::zeros((1, 1, 3));
        assert!(matches!(evaluate(s.view(), s.view()), Err(EvalError::NoGroundTruth)));
        // No voxels at all is an empty volume, not an unlabelled one.
        let empty = Array3::<u64>::zeros((0, 4, 4));
        let e = evaluate(empty.view(), empty.view()).unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let s = Array3::<u64>::zeros((1, 1, 3));
        let g = Array3::<u64>::zeros((1, 3, 1));
        let e = evaluate(s.view(), g.view()).unwrap_err().to_string();
        assert!(e.contains("shape"), "{e}");
    }

    proptest! {
        /// VOI is non-negative, symmetric under swapping roles (when gt has
        /// no 0), and zero exactly for equal partitions up to relabelling.
        #[test]
        fn voi_properties(labels in proptest::collection::vec((1u64..5, 1u64..5), 1..300)) {
            let seg: Vec<u64> = labels.iter().map(|p| p.0).collect();
            let gt: Vec<u64> = labels.iter().map(|p| p.1).collect();
            let m = eval(&seg, &gt);
            let r = eval(&gt, &seg);
            prop_assert!(m.voi_split > -1e-12 && m.voi_merge > -1e-12);
            prop_assert!((m.voi_split - r.voi_merge).abs() < 1e-9);
            prop_assert!((m.rand_split - r.rand_merge).abs() < 1e-12);
            let relabelled: Vec<u64> = seg.iter().map(|&s| 100 - s).collect();
            let same = eval(&relabelled, &seg);
            prop_assert!(same.voi_split.abs() < 1e-12 && same.voi_merge.abs() < 1e-12);
        }

        /// The metrics of regions of fragments, from the fragment table,
        /// equal the metrics of the relabelled volume bit for bit.
        #[test]
        fn metrics_of_regions_equal_the_relabelled_volume(
            voxels in proptest::collection::vec((0u64..40, 0u64..6), 1..400),
            regions in proptest::collection::vec(1u64..12, 40),
        ) {
            let fragments: Vec<u64> = voxels.iter().map(|v| v.0).collect();
            let gt: Vec<u64> = voxels.iter().map(|v| v.1).collect();
            let region_of = |f: u64| if f == 0 { 0 } else { 1000 - regions[f as usize] };
            let segmentation: Vec<u64> = fragments.iter().map(|&f| region_of(f)).collect();
            let table = contingency(&fragments, &gt);
            if gt.iter().all(|&g| g == 0) {
                prop_assert!(metrics_of_regions(&table, region_of).is_err());
            } else {
                let got = metrics_of_regions(&table, region_of).unwrap();
                let want = metrics_from_table(&contingency(&segmentation, &gt)).unwrap();
                for (a, b) in [(got.voi_split, want.voi_split), (got.voi_merge, want.voi_merge),
                               (got.rand_split, want.rand_split), (got.rand_merge, want.rand_merge)] {
                    prop_assert_eq!(a.to_bits(), b.to_bits());
                }
            }
        }
    }
}
