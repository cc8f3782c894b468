//! Edge statistics and scores, as waterz's statistics providers compute
//! them (`MeanAffinityProvider`, `MaxAffinityProvider`, ...), float32 for
//! float32; plus the exact mean of [`Arithmetic::Exact`].

use gpu_waterz_core::{Arithmetic, ContactStats, ScoringFunction};
use gpu_waterz_graph::RegionGraph;

/// The statistics of every edge, for one scoring function.
#[derive(Clone, Debug)]
pub enum EdgeStatistics {
    /// waterz's running float32 mean: `mean = (a + mean * n) / (n + 1)`.
    WaterzMean {
        /// Faces per edge.
        count: Vec<u64>,
        /// Running mean per edge.
        mean: Vec<f32>,
    },
    /// The exact mean from integer sums.
    ExactMean(Vec<ContactStats>),
    /// The largest face affinity (waterz starts from 0).
    Max(Vec<f32>),
    /// The smallest face affinity (waterz starts from `FLT_MAX`).
    Min(Vec<f32>),
    /// waterz's `HistogramQuantileProvider`.
    HistogramQuantile {
        /// Quantile in percent.
        quantile: u32,
        /// Bins per histogram.
        bins: u32,
        /// `bins` counts per edge, flattened.
        counts: Vec<i32>,
        /// Total count per edge.
        sum: Vec<i32>,
        /// Lowest non-empty bin per edge (`bins` when empty).
        lowest: Vec<i32>,
    },
    /// waterz's `VectorQuantileProvider`: every face affinity kept (only
    /// the largest while an edge is new, with `InitWithMax`). waterz reads
    /// the element at the quantile's position without sorting until an
    /// edge receives a merge (then `std::nth_element` puts the exact
    /// quantile there; here the values are sorted, which puts the same
    /// value there).
    VectorQuantile {
        /// Quantile in percent.
        quantile: u32,
        /// The affinities of each edge: in waterz's order until the edge
        /// receives a merge, sorted after.
        values: Vec<Vec<f32>>,
    },
    /// waterz's `MaxKAffinityProvider` (`MaxKValues`): the `k` largest face
    /// affinities per edge, descending, padded with `f32::MIN`.
    MaxK {
        /// How many.
        k: usize,
        /// `k` values per edge, flattened.
        values: Vec<f32>,
    },
    /// A scoring expression over several providers
    /// ([`crate::expression::ExpressionStatistics`]).
    Expression(Box<crate::expression::ExpressionStatistics>),
}

/// waterz's `VectorQuantileProvider::getQuantileIterator`: the position
/// `q * size / 100` (integer arithmetic), the last one at 100 %.
fn quantile_position(quantile: u32, size: usize) -> usize {
    let pivot = (quantile as usize * size / 100) as i32 as usize;
    if pivot == size {
        pivot - 1
    } else {
        pivot
    }
}

/// `MaxKValues::push`: inserts `value` into the descending `slots`.
fn max_k_push(slots: &mut [f32], value: f32) {
    let k = slots.len();
    for i in 0..k {
        if slots[i] == f32::MIN {
            slots[i] = value;
            return;
        }
        if slots[i] < value {
            for j in (i + 1..k).rev() {
                slots[j] = slots[j - 1];
            }
            slots[i] = value;
            return;
        }
    }
}

/// waterz's `OneMinus`: `1.0 - x` in double, returned as float.
#[inline]
fn one_minus(x: f32) -> f64 {
    (1.0f64 - x as f64) as f32 as f64
}

impl EdgeStatistics {
    /// Accumulates the statistics of `graph`'s faces in waterz's order; a
    /// scoring function or arithmetic this crate does not know is an error.
    pub fn new(
        graph: &RegionGraph,
        scoring: ScoringFunction,
        arithmetic: Arithmetic,
    ) -> Result<Self, crate::ParhacError> {
        Self::with_node_sizes(graph, None, scoring, arithmetic)
    }

    /// As [`EdgeStatistics::new`], with the voxel count of every node for
    /// expressions that read region sizes (`MinSize`, `MaxSize`).
    pub fn with_node_sizes(
        graph: &RegionGraph,
        node_sizes: Option<Vec<u64>>,
        scoring: ScoringFunction,
        arithmetic: Arithmetic,
    ) -> Result<Self, crate::ParhacError> {
        let n = graph.n_edges();
        let edges = 0..n;
        Ok(match (scoring, arithmetic) {
            (ScoringFunction::Expression(expr), Arithmetic::Waterz) => {
                Self::Expression(Box::new(crate::expression::ExpressionStatistics::new(graph, *expr, node_sizes)?))
            }
            (ScoringFunction::MeanAffinity, Arithmetic::Waterz) => {
                let mut count = vec![0u64; n];
                let mut mean = vec![0f32; n];
                for e in edges {
                    for &a in graph.faces(e) {
                        mean[e] = (a + mean[e] * count[e] as f32) / (count[e] + 1) as f32;
                        count[e] += 1;
                    }
                }
                Self::WaterzMean { count, mean }
            }
            (ScoringFunction::MeanAffinity, Arithmetic::Exact) => Self::ExactMean(graph.contact_stats()),
            (ScoringFunction::MaxAffinity, _) => {
                Self::Max(edges.map(|e| graph.faces(e).iter().fold(0f32, |m, &a| if m < a { a } else { m })).collect())
            }
            (ScoringFunction::MinAffinity, _) => Self::Min(
                edges.map(|e| graph.faces(e).iter().fold(f32::MAX, |m, &a| if a < m { a } else { m })).collect(),
            ),
            (ScoringFunction::HistogramQuantile { quantile, bins, init_with_max }, _) => {
                let b = bins as usize;
                let mut counts = vec![0i32; n * b];
                let mut sum = vec![0i32; n];
                let mut lowest = vec![bins as i32; n];
                for e in edges {
                    for &a in graph.faces(e) {
                        let bin = crate::queue::discretize(a, bins) as i32;
                        if init_with_max && lowest[e] != bins as i32 {
                            if bin > lowest[e] {
                                counts[e * b..(e + 1) * b].fill(0);
                                sum[e] = 0;
                                lowest[e] = bins as i32;
                            } else {
                                continue;
                            }
                        }
                        counts[e * b + bin as usize] += 1;
                        sum[e] += 1;
                        lowest[e] = lowest[e].min(bin);
                    }
                }
                Self::HistogramQuantile { quantile, bins, counts, sum, lowest }
            }
            (ScoringFunction::Quantile { quantile, init_with_max }, _) => {
                let values = edges
                    .map(|e| {
                        let mut v: Vec<f32> = Vec::new();
                        for &a in graph.faces(e) {
                            if init_with_max && v.len() == 1 {
                                if v[0] < a {
                                    v[0] = a;
                                }
                                continue;
                            }
                            v.push(a);
                        }
                        v
                    })
                    .collect();
                Self::VectorQuantile { quantile, values }
            }
            (ScoringFunction::MeanMaxK { k }, _) => {
                let k = k as usize;
                let mut values = vec![f32::MIN; n * k];
                for e in edges {
                    for &a in graph.faces(e) {
                        max_k_push(&mut values[e * k..(e + 1) * k], a);
                    }
                }
                Self::MaxK { k, values }
            }
            (scoring, arithmetic) => {
                return Err(crate::ParhacError::Unsupported(format!(
                    "the scoring function {} in {arithmetic:?} arithmetic",
                    scoring.waterz_name()
                )))
            }
        })
    }

    /// The score of edge `e`, which joins `ends` (lower merges first).
    pub fn score(&self, e: usize, ends: [u64; 2]) -> f64 {
        match self {
            Self::ExactMean(stats) => 1.0 - stats[e].mean(),
            Self::Expression(x) => x.score(e, ends),
            _ => one_minus(self.value(e)),
        }
    }

    /// Merges the statistics of node `from` into node `to`; whether any
    /// changed (waterz's `notifyNodeMerge`; only region sizes live on
    /// nodes).
    pub fn merge_node(&mut self, from: u64, to: u64) -> bool {
        match self {
            Self::Expression(x) => x.merge_node(from, to),
            _ => false,
        }
    }

    /// The statistic of edge `e` before `OneMinus` (the float32 value of
    /// waterz's provider; NaN for the exact mean and for expressions,
    /// which have no single float32 value).
    pub fn value(&self, e: usize) -> f32 {
        match self {
            Self::WaterzMean { mean, .. } => mean[e],
            Self::ExactMean(_) | Self::Expression(_) => f32::NAN,
            Self::Max(v) | Self::Min(v) => v[e],
            Self::HistogramQuantile { quantile, bins, counts, sum, .. } => {
                let b = *bins as usize;
                let pivot = (*quantile as i32).wrapping_mul(sum[e]) / 100 + 1;
                let mut acc = 0i32;
                let mut bin = 0usize;
                while bin < b {
                    acc += counts[e * b + bin];
                    if acc >= pivot {
                        break;
                    }
                    bin += 1;
                }
                // undiscretize<float>: ((float)bin + 0.5) / levels in double, to float.
                (((bin as f32) as f64 + 0.5) / *bins as f64) as f32
            }
            Self::VectorQuantile { quantile, values } => {
                let v = &values[e];
                v[quantile_position(*quantile, v.len())]
            }
            Self::MaxK { k, values } => {
                // MaxKValues::average: a float sum up to the first unset
                // slot, divided by the count.
                let mut sum = 0f32;
                let mut count = 0;
                for &v in &values[e * k..(e + 1) * k] {
                    if v == f32::MIN {
                        break;
                    }
                    sum += v;
                    count += 1;
                }
                if count == 0 {
                    f32::NAN
                } else {
                    sum / count as f32
                }
            }
        }
    }

    /// Merges the statistics of edge `from` into edge `to`; returns whether
    /// the statistics of `to` changed (waterz's `notifyEdgeMerge`).
    pub fn merge_edge(&mut self, from: usize, to: usize) -> bool {
        match self {
            Self::Expression(x) => x.merge_edge(from, to),
            Self::WaterzMean { count, mean } => {
                let (from_n, to_n) = (count[from], count[to]);
                mean[to] = (mean[from] * from_n as f32 + mean[to] * to_n as f32) / (from_n + to_n) as f32;
                count[to] = from_n + to_n;
                true
            }
            Self::ExactMean(stats) => {
                stats[to] = stats[to].merged(stats[from]);
                true
            }
            Self::Max(v) => {
                if v[to] >= v[from] {
                    return false;
                }
                v[to] = v[from];
                true
            }
            Self::Min(v) => {
                if v[to] <= v[from] {
                    return false;
                }
                v[to] = v[from];
                true
            }
            Self::HistogramQuantile { bins, counts, sum, lowest, .. } => {
                let b = *bins as usize;
                for i in 0..b {
                    counts[to * b + i] += counts[from * b + i];
                    counts[from * b + i] = 0;
                }
                sum[to] += sum[from];
                sum[from] = 0;
                lowest[to] = lowest[to].min(lowest[from]);
                lowest[from] = *bins as i32;
                true
            }
            Self::VectorQuantile { values, .. } => {
                // waterz puts the part of `from` below its quantile position
                // first and the rest last, then `nth_element`s `to`: only
                // the value at the position is defined, and sorting gives
                // the same one.
                let from_values = std::mem::take(&mut values[from]);
                let to_values = &mut values[to];
                to_values.extend_from_slice(&from_values);
                to_values.sort_unstable_by(f32::total_cmp);
                true
            }
            Self::MaxK { k, values } => {
                // MaxKValues::merge: the k largest of two descending lists
                // (ties take `b`, the other's, first).
                let k = *k;
                let a: Vec<f32> = values[to * k..(to + 1) * k].to_vec();
                let b: Vec<f32> = values[from * k..(from + 1) * k].to_vec();
                let (mut i, mut j) = (0, 0);
                for slot in 0..k {
                    if a[i] > b[j] {
                        values[to * k + slot] = a[i];
                        i += 1;
                    } else {
                        values[to * k + slot] = b[j];
                        j += 1;
                    }
                }
                true
            }
        }
    }
}
