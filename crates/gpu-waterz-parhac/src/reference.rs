//! waterz's `IterativeRegionMerging`, ported as is.
//!
//! Edges wait in a queue by score. The cheapest is popped: if it was
//! deleted it is dropped; if it is stale (its statistics changed since it
//! was scored) it is re-scored and pushed again; otherwise its two regions
//! merge into the one with the smaller id, the edges of the other move to
//! it, and of two parallel edges the more expensive is merged into the
//! cheaper one, which becomes stale. Merging stops at the first score at or
//! above the threshold; the next threshold continues from there.

use crate::queue::{BinQueue, BinaryHeapQueue, EdgeQueue};
use crate::stats::EdgeStatistics;
use crate::ParhacError;
use gpu_waterz_core::{Arithmetic, ScoringFunction};
use gpu_waterz_graph::RegionGraph;
use serde::{Deserialize, Serialize};

/// One merge: regions `a` and `b` became `c` at `score`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Merge {
    /// The region that stays (the smaller id).
    pub a: u64,
    /// The region merged into it.
    pub b: u64,
    /// The merged region (waterz keeps `a`'s id).
    pub c: u64,
    /// The score of the edge at the merge.
    pub score: f64,
}

/// An edge of the remaining region graph.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoredEdge {
    /// The smaller endpoint.
    pub u: u64,
    /// The larger endpoint.
    pub v: u64,
    /// The edge's current score.
    pub score: f64,
}

enum Queue {
    Heap(BinaryHeapQueue),
    Bins(BinQueue),
}

impl Queue {
    fn push(&mut self, e: usize, s: f64) {
        match self {
            Queue::Heap(q) => q.push(e, s),
            Queue::Bins(q) => q.push(e, s),
        }
    }
    fn top(&self) -> Option<usize> {
        match self {
            Queue::Heap(q) => q.top(),
            Queue::Bins(q) => q.top(),
        }
    }
    fn pop(&mut self) {
        match self {
            Queue::Heap(q) => q.pop(),
            Queue::Bins(q) => q.pop(),
        }
    }
}

/// The state of waterz's serial region merging.
pub struct IterativeMerging {
    /// Current endpoints of every edge, `u < v`.
    edges: Vec<[u64; 2]>,
    /// Incident edges per node.
    incident: Vec<Vec<usize>>,
    scores: Vec<f64>,
    stale: Vec<bool>,
    deleted: Vec<bool>,
    queue: Queue,
    /// Parent of every node in the merge forest.
    root_paths: Vec<u64>,
    /// The last threshold merged to (waterz starts at `-FLT_MAX`).
    merged_until: f32,
    stats: EdgeStatistics,
}

impl IterativeMerging {
    /// Prepares merging of `graph` with `scoring` in `arithmetic`, using
    /// waterz's priority queue (`discretize_queue == 0`) or its bin queue
    /// with that many bins.
    pub fn new(
        graph: &RegionGraph,
        scoring: ScoringFunction,
        arithmetic: Arithmetic,
        discretize_queue: u64,
    ) -> Result<Self, ParhacError> {
        Self::with_node_sizes(graph, None, scoring, arithmetic, discretize_queue)
    }

    /// As [`IterativeMerging::new`], with the voxel count of every node,
    /// which scoring expressions with region sizes (`MinSize`, `MaxSize`)
    /// need.
    pub fn with_node_sizes(
        graph: &RegionGraph,
        node_sizes: Option<Vec<u64>>,
        scoring: ScoringFunction,
        arithmetic: Arithmetic,
        discretize_queue: u64,
    ) -> Result<Self, ParhacError> {
        if discretize_queue > 65536 {
            return Err(ParhacError::QueueBins(discretize_queue));
        }
        let stats = EdgeStatistics::with_node_sizes(graph, node_sizes, scoring, arithmetic)?;
        Ok(Self::with_statistics(graph.n_nodes, graph.edges.clone(), stats, discretize_queue))
    }

    /// Prepares merging of a graph given by its edges and their exact
    /// contact statistics (the GPU region graph's output), with the mean
    /// score in exact arithmetic and waterz's priority queue.
    pub fn from_contact_stats(n_nodes: u64, edges: Vec<[u64; 2]>, stats: Vec<gpu_waterz_core::ContactStats>) -> Self {
        Self::with_statistics(n_nodes, edges, EdgeStatistics::ExactMean(stats), 0)
    }

    fn with_statistics(n_nodes: u64, edges: Vec<[u64; 2]>, stats: EdgeStatistics, discretize_queue: u64) -> Self {
        let n_nodes = n_nodes as usize;
        let mut incident = vec![Vec::new(); n_nodes];
        for (e, &[u, v]) in edges.iter().enumerate() {
            incident[u as usize].push(e);
            incident[v as usize].push(e);
        }
        let n_edges = edges.len();
        Self {
            edges,
            incident,
            scores: vec![0.0; n_edges],
            stale: vec![false; n_edges],
            deleted: vec![false; n_edges],
            queue: if discretize_queue == 0 {
                Queue::Heap(BinaryHeapQueue::default())
            } else {
                Queue::Bins(BinQueue::new(discretize_queue as u32))
            },
            root_paths: (0..n_nodes as u64).collect(),
            merged_until: f32::MIN,
            stats,
        }
    }

    fn score_edge(&mut self, e: usize) -> f64 {
        let s = self.stats.score(e, self.edges[e]);
        self.scores[e] = s;
        self.queue.push(e, s);
        s
    }

    /// Merges until the cheapest edge scores at least `threshold` (float32,
    /// as waterz); appends each merge to `history` when given. Returns the
    /// number of merges. A threshold at or below the last one does nothing.
    pub fn merge_until(&mut self, threshold: f32, mut history: Option<&mut Vec<Merge>>) -> usize {
        if threshold <= self.merged_until {
            return 0;
        }
        if self.merged_until == f32::MIN {
            for e in 0..self.edges.len() {
                self.score_edge(e);
            }
        }
        let threshold_f64 = threshold as f64;
        let mut merged = 0;
        while let Some(next) = self.queue.top() {
            let score = self.scores[next];
            if score >= threshold_f64 {
                break;
            }
            self.queue.pop();
            if self.deleted[next] {
                continue;
            }
            if self.stale[next] {
                self.score_edge(next);
                self.stale[next] = false;
                continue;
            }
            let new_region = self.merge_regions(next);
            merged += 1;
            if let Some(h) = history.as_deref_mut() {
                let [a, b] = self.edges[next];
                h.push(Merge { a, b, c: new_region, score });
            }
        }
        self.merged_until = threshold;
        tracing::debug!(threshold, merged, "reference merge_until");
        merged
    }

    fn find_edge(&self, u: u64, v: u64) -> Option<usize> {
        let (lo, hi) = (u.min(v), u.max(v));
        let pool = if self.incident[u as usize].len() < self.incident[v as usize].len() {
            &self.incident[u as usize]
        } else {
            &self.incident[v as usize]
        };
        pool.iter().copied().find(|&e| self.edges[e] == [lo, hi])
    }

    fn remove_incident(&mut self, node: u64, e: usize) {
        let list = &mut self.incident[node as usize];
        if let Some(pos) = list.iter().position(|&x| x == e) {
            list.swap_remove(pos);
        }
    }

    /// waterz's `RegionGraph::moveEdge`: edge `e` now joins `u` and `v`.
    fn move_edge(&mut self, e: usize, u: u64, v: u64) {
        let [pu, pv] = self.edges[e];
        let move_end = |this: &mut Self, end: usize, to: u64| {
            let old = this.edges[e][end];
            this.remove_incident(old, e);
            this.incident[to as usize].push(e);
            this.edges[e][end] = to;
        };
        if pu == u {
            move_end(self, 1, v);
        } else if pu == v {
            move_end(self, 1, u);
        } else if pv == v {
            move_end(self, 0, u);
        } else if pv == u {
            move_end(self, 0, v);
        } else {
            move_end(self, 0, u);
            move_end(self, 1, v);
        }
        if self.edges[e][0] > self.edges[e][1] {
            self.edges[e].swap(0, 1);
        }
    }

    fn merge_regions(&mut self, e: usize) -> u64 {
        let [a, b] = self.edges[e];
        // Only region sizes live on nodes: when they change, every edge of
        // `a` is stale, and so is every edge of `b` it takes over.
        let node_changed = self.stats.merge_node(b, a);
        self.root_paths[b as usize] = a;
        if node_changed {
            for &edge in &self.incident[a as usize] {
                self.stale[edge] = true;
            }
        }
        let neighbour_edges = std::mem::replace(&mut self.incident[b as usize], vec![e]);
        for neighbour_edge in neighbour_edges {
            if neighbour_edge == e {
                continue;
            }
            let [nu, nv] = self.edges[neighbour_edge];
            let neighbour = if nu == b { nv } else { nu };
            match self.find_edge(a, neighbour) {
                None => {
                    self.move_edge(neighbour_edge, a, neighbour);
                    if node_changed {
                        self.stale[neighbour_edge] = true;
                    }
                }
                Some(a_edge) => {
                    if self.scores[neighbour_edge] > self.scores[a_edge] {
                        let changed = self.stats.merge_edge(neighbour_edge, a_edge);
                        self.remove_incident(nu, neighbour_edge);
                        self.remove_incident(nv, neighbour_edge);
                        self.deleted[neighbour_edge] = true;
                        if changed {
                            self.stale[a_edge] = true;
                        }
                    } else {
                        let changed = self.stats.merge_edge(a_edge, neighbour_edge);
                        let [au, av] = self.edges[a_edge];
                        self.remove_incident(au, a_edge);
                        self.remove_incident(av, a_edge);
                        self.move_edge(neighbour_edge, a, neighbour);
                        if changed || node_changed {
                            self.stale[neighbour_edge] = true;
                        }
                        self.deleted[a_edge] = true;
                    }
                }
            }
        }
        a
    }

    fn root(&mut self, id: u64) -> u64 {
        let is_root = |paths: &[u64], id: u64| id as usize >= paths.len() || paths[id as usize] == id;
        if is_root(&self.root_paths, id) {
            return id;
        }
        let mut root = self.root_paths[id as usize];
        while !is_root(&self.root_paths, root) {
            root = self.root_paths[root as usize];
        }
        let mut id = id;
        while id != root {
            let next = self.root_paths[id as usize];
            self.root_paths[id as usize] = root;
            id = next;
        }
        root
    }

    /// Relabels `labels` (ids seen before) to the current regions.
    pub fn extract_segmentation(&mut self, labels: &mut [u64]) {
        for l in labels.iter_mut() {
            *l = self.root(*l);
        }
    }

    /// The current region of node `id`.
    pub fn region_of(&mut self, id: u64) -> u64 {
        self.root(id)
    }

    /// waterz's `extractRegionGraph`: the live edges scoring at least the
    /// last threshold. Like waterz, re-scoring a stale edge here pushes it
    /// to the queue again.
    pub fn region_graph(&mut self) -> Vec<ScoredEdge> {
        let mut out = Vec::new();
        for e in 0..self.edges.len() {
            if self.deleted[e] {
                continue;
            }
            let score = if self.stale[e] { self.score_edge(e) } else { self.scores[e] };
            if score < self.merged_until as f64 {
                continue;
            }
            let [u, v] = self.edges[e];
            out.push(ScoredEdge { u, v, score });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path 1 - 2 - 3 with means 0.9 and 0.6, plus 1 - 3 at 0.2: merging
    /// 1+2 makes the edges to 3 parallel; their merged mean decides.
    fn triangle() -> RegionGraph {
        RegionGraph {
            n_nodes: 4,
            edges: vec![[1, 2], [1, 3], [2, 3]],
            face_offsets: vec![0, 1, 2, 5],
            face_affinities: vec![0.9, 0.2, 0.6, 0.6, 0.6],
        }
    }

    #[test]
    fn merges_in_score_order_and_recomputes_means() {
        for arithmetic in [Arithmetic::Waterz, Arithmetic::Exact] {
            let g = triangle();
            let mut m = IterativeMerging::new(&g, ScoringFunction::MeanAffinity, arithmetic, 0).unwrap();
            let mut history = Vec::new();
            assert_eq!(m.merge_until(0.3, Some(&mut history)), 1);
            assert_eq!((history[0].a, history[0].b, history[0].c), (1, 2, 1));
            assert!((history[0].score - 0.1).abs() < 1e-6);
            // The parallel edges merge to mean (0.2 + 3 * 0.6) / 4 = 0.5.
            let rg = m.region_graph();
            assert_eq!(rg.len(), 1);
            assert_eq!((rg[0].u, rg[0].v), (1, 3));
            assert!((rg[0].score - 0.5).abs() < 1e-6, "{arithmetic:?}: {rg:?}");
            let mut labels = vec![0, 1, 2, 3];
            m.extract_segmentation(&mut labels);
            assert_eq!(labels, vec![0, 1, 1, 3]);

            let mut m = IterativeMerging::new(&g, ScoringFunction::MeanAffinity, arithmetic, 0).unwrap();
            assert_eq!(m.merge_until(0.3, None), 1);
            assert_eq!(m.merge_until(0.49, None), 0);
            assert_eq!(m.merge_until(0.51, None), 1);
            m.extract_segmentation(&mut labels);
            assert_eq!(labels, vec![0, 1, 1, 1]);
        }
    }

    #[test]
    fn region_graph_requeues_stale_edges_as_waterz_does() {
        // waterz's extractRegionGraph re-scores a stale edge and pushes it
        // once more without clearing its stale flag; the next merge_until
        // then finds it twice and reports the merge twice. The reference
        // keeps that, so that its merge history equals waterz's.
        let g = triangle();
        let mut m = IterativeMerging::new(&g, ScoringFunction::MeanAffinity, Arithmetic::Waterz, 0).unwrap();
        assert_eq!(m.merge_until(0.3, None), 1);
        m.region_graph();
        let mut history = Vec::new();
        assert_eq!(m.merge_until(0.51, Some(&mut history)), 2);
        assert_eq!(history[0], history[1]);
    }

    #[test]
    fn lower_thresholds_are_skipped() {
        let g = triangle();
        let mut m = IterativeMerging::new(&g, ScoringFunction::MeanAffinity, Arithmetic::Waterz, 0).unwrap();
        assert_eq!(m.merge_until(0.3, None), 1);
        assert_eq!(m.merge_until(0.2, None), 0);
        assert!(matches!(
            IterativeMerging::new(&g, ScoringFunction::MeanAffinity, Arithmetic::Waterz, 70000),
            Err(ParhacError::QueueBins(70000))
        ));
    }
}
