//! ParHAC on the CPU: waterz's contact-mean merging in parallel rounds.
//!
//! Each round, over the current region graph with exact statistics:
//! 1. every node finds its best incident edge: the lowest score
//!    `1 - sum / count`, ties broken by the smaller then the larger endpoint;
//! 2. an edge below the threshold is eligible when its mean affinity times
//!    `1 + ε` reaches the best mean at both endpoints; at ε = 0, when it is
//!    the best edge of both (a mutual best, ties of the mean broken by the
//!    endpoints as in step 1);
//! 3. every node prefers the eligible incident edge with the highest
//!    pseudo-random priority ([`edge_priority`], a fixed hash of the
//!    endpoints and the round: deterministic, but free of the score order,
//!    so that chains of similar edges do not match one pair per round); an
//!    edge preferred by both endpoints is matched: the matched edges share
//!    no node. At ε = 0 the eligible edges are the mutual best edges, which
//!    share no node already, so all of them are matched;
//! 4. all matched pairs merge at once, into the smaller id (as waterz);
//! 5. the graph is contracted: parallel edges merge by adding their
//!    integer statistics, and scores are recomputed.
//!
//! Rounds repeat until no edge scores below the threshold: the globally
//! best edge is always matched, so every round merges something. With
//! ε = 0 the result equals waterz's serial order (the reference in exact
//! arithmetic) on tie-free input: the contact mean of a merged boundary
//! lies between its parts' means, so the linkage is reducible and mutual
//! best pairs merge exactly as the greedy order would (see the tests).
//!
//! This is the simple, obviously correct version that the GPU ParHAC is
//! tested against; it shares its score arithmetic
//! ([`gpu_waterz_core::ContactStats`]) with the serial reference.

use crate::{Merge, ParhacError};
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::edge_priority;
use gpu_waterz_core::{ContactStats, CoreError};

/// One edge of the current graph: endpoints `u < v` and exact statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// Smaller endpoint.
    pub u: u64,
    /// Larger endpoint.
    pub v: u64,
    /// Contact statistics of the boundary.
    pub stats: ContactStats,
}

impl Edge {
    /// waterz's score of the edge: one minus the mean affinity.
    pub fn score(&self) -> f64 {
        gpu_waterz_abi::parhac::edge_score(self.stats.contact_count, self.stats.affinity_sum)
    }

    /// The order edges are preferred in: score, then endpoints.
    fn rank_key(&self) -> (f64, u64, u64) {
        (self.score(), self.u, self.v)
    }
}

fn better(a: &Edge, b: &Edge) -> bool {
    a.rank_key() < b.rank_key()
}

/// What happened in one round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundInfo {
    /// Edges before the round.
    pub n_edges: usize,
    /// Eligible edges.
    pub n_eligible: usize,
    /// Pairs merged.
    pub n_merged: usize,
}

/// ParHAC's state: the contracted graph and the merge forest.
#[derive(Clone, Debug)]
pub struct Parhac {
    epsilon: f64,
    edges: Vec<Edge>,
    /// Current region of every original node (a union-find forest).
    parent: Vec<u64>,
    rounds: Vec<RoundInfo>,
    merged_until: f64,
}

impl Parhac {
    /// Starts from `edges` over nodes `0..n_nodes`, merging with `epsilon`.
    pub fn new(n_nodes: u64, edges: Vec<Edge>, epsilon: f64) -> Result<Self, ParhacError> {
        if !epsilon.is_finite() || epsilon < 0.0 {
            return Err(CoreError::Epsilon(epsilon).into());
        }
        let mut edges = edges;
        edges.sort_by_key(|e| (e.u, e.v));
        Ok(Self { epsilon, edges, parent: (0..n_nodes).collect(), rounds: Vec::new(), merged_until: f64::NEG_INFINITY })
    }

    /// The rounds run so far.
    pub fn rounds(&self) -> &[RoundInfo] {
        &self.rounds
    }

    /// The current edges, sorted by endpoints.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    fn find(&mut self, mut x: u64) -> u64 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            self.parent[x as usize] = self.parent[p as usize];
            x = p;
        }
        x
    }

    /// The current region of node `id`.
    pub fn region_of(&mut self, id: u64) -> u64 {
        self.find(id)
    }

    /// Runs rounds until no edge scores below `threshold` (compared in
    /// float32, as waterz); appends the merges to `history` when given.
    /// A threshold at or below the last one does nothing.
    pub fn merge_until(&mut self, threshold: f32, mut history: Option<&mut Vec<Merge>>) -> usize {
        let t = threshold as f64;
        if t <= self.merged_until {
            return 0;
        }
        self.merged_until = t;
        let mut total = 0;
        loop {
            let merged = self.round(t, history.as_deref_mut());
            if merged == 0 {
                return total;
            }
            total += merged;
        }
    }

    /// Runs at most `max_rounds` rounds at `threshold` (compared in
    /// float32), appending their merges to `history` when given; returns
    /// the number of merges. Unlike [`Self::merge_until`] the threshold is
    /// not recorded as done: [`Self::finish_serially`] (or `merge_until`)
    /// ends it.
    pub fn run_rounds(&mut self, threshold: f32, max_rounds: usize, mut history: Option<&mut Vec<Merge>>) -> usize {
        let mut total = 0;
        for _ in 0..max_rounds {
            let merged = self.round(threshold as f64, history.as_deref_mut());
            if merged == 0 {
                break;
            }
            total += merged;
        }
        total
    }

    /// Ends `threshold` serially, as the GPU does once its rounds merge
    /// few pairs: the current graph goes to
    /// [`crate::serial::merge_components`], which merges the best edge while
    /// it scores below the threshold (per component of the edges below it);
    /// its merges join the forest and its graph replaces this one. Appends the
    /// merges to `history` when given (in the order they happened); returns
    /// their number. At ε = 0 on tie-free input the result is the same as
    /// [`Self::merge_until`]'s (see `docs/parhac.md`).
    pub fn finish_serially(&mut self, threshold: f32, history: Option<&mut Vec<Merge>>) -> Result<usize, ParhacError> {
        let t = threshold as f64;
        if t <= self.merged_until {
            return Ok(0);
        }
        self.merged_until = t;
        let finished = crate::serial::merge_components(self.parent.len() as u64, &self.edges, threshold)?;
        let merges = finished.merges;
        for m in &merges {
            self.parent[m.b as usize] = m.a;
        }
        self.edges = finished.edges;
        if let Some(h) = history {
            h.extend_from_slice(&merges);
        }
        Ok(merges.len())
    }

    /// One round; returns the number of merged pairs.
    fn round(&mut self, threshold: f64, history: Option<&mut Vec<Merge>>) -> usize {
        let n = self.parent.len();
        // 1. The best incident edge of every node.
        let mut best: Vec<Option<usize>> = vec![None; n];
        for (i, e) in self.edges.iter().enumerate() {
            for x in [e.u, e.v] {
                let slot = &mut best[x as usize];
                if slot.is_none_or(|b| better(e, &self.edges[b])) {
                    *slot = Some(i);
                }
            }
        }
        // 2. Eligible edges, and 3. each node's preferred eligible edge.
        let factor = 1.0 + self.epsilon;
        let round = self.rounds.len() as u64;
        let priority = |e: &Edge| (edge_priority(EdgeKey::new(e.u, e.v), round), std::cmp::Reverse((e.u, e.v)));
        let mut preferred: Vec<Option<usize>> = vec![None; n];
        let mut n_eligible = 0;
        for (i, e) in self.edges.iter().enumerate() {
            if e.score() >= threshold {
                continue;
            }
            let mean = e.stats.mean();
            let heavy = [e.u, e.v].iter().all(|&x| {
                let b = best[x as usize].expect("an endpoint has an edge");
                if self.epsilon == 0.0 {
                    // Exactly the best edge, ties broken by the endpoints:
                    // equal means do not make two edges eligible.
                    b == i
                } else {
                    mean * factor >= self.edges[b].stats.mean()
                }
            });
            if !heavy {
                continue;
            }
            n_eligible += 1;
            for x in [e.u, e.v] {
                let slot = &mut preferred[x as usize];
                if slot.is_none_or(|p| priority(e) > priority(&self.edges[p])) {
                    *slot = Some(i);
                }
            }
        }
        // 3. The matching, and 4. the merges.
        let matched: Vec<usize> = (0..self.edges.len())
            .filter(|&i| {
                let e = &self.edges[i];
                preferred[e.u as usize] == Some(i) && preferred[e.v as usize] == Some(i)
            })
            .collect();
        let mut history = history;
        for &i in &matched {
            let e = self.edges[i];
            self.parent[e.v as usize] = e.u;
            if let Some(h) = history.as_deref_mut() {
                h.push(Merge { a: e.u, b: e.v, c: e.u, score: e.score() });
            }
        }
        self.rounds.push(RoundInfo { n_edges: self.edges.len(), n_eligible, n_merged: matched.len() });
        if matched.is_empty() {
            return 0;
        }
        // 5. Contraction.
        let mut contracted: Vec<Edge> = Vec::with_capacity(self.edges.len());
        let old = std::mem::take(&mut self.edges);
        for e in old {
            let (a, b) = (self.find(e.u), self.find(e.v));
            if a != b {
                contracted.push(Edge { u: a.min(b), v: a.max(b), stats: e.stats });
            }
        }
        contracted.sort_by_key(|e| (e.u, e.v));
        let mut merged_edges: Vec<Edge> = Vec::with_capacity(contracted.len());
        for e in contracted {
            match merged_edges.last_mut() {
                Some(last) if (last.u, last.v) == (e.u, e.v) => last.stats = last.stats.merged(e.stats),
                _ => merged_edges.push(e),
            }
        }
        self.edges = merged_edges;
        matched.len()
    }
}

/// A random graph for tests and benchmarks: up to `n_edges` edges between
/// nodes `1..n_nodes` (0 stays the unconnected background), each with
/// `1..=max_count` contacts. With `levels` = 0 every face affinity is a
/// random fixed-point value, so tied means are vanishingly rare; with
/// `levels` > 0 it is one of `levels + 1` values, which makes ties common.
pub fn random_graph(seed: u64, n_nodes: u64, n_edges: usize, max_count: u64, levels: u64) -> Vec<Edge> {
    let mut rng = gpu_waterz_core::synthetic::SplitMix64::new(seed);
    let mut pairs = std::collections::BTreeMap::new();
    for _ in 0..n_edges {
        let u = 1 + rng.below(n_nodes - 1);
        let v = 1 + rng.below(n_nodes - 1);
        if u == v {
            continue;
        }
        let count = 1 + rng.below(max_count);
        let sum = (0..count)
            .map(|_| if levels == 0 { rng.below(1 << 32) } else { rng.below(levels + 1) * ((1 << 32) / levels) })
            .sum();
        pairs.insert((u.min(v), u.max(v)), ContactStats { contact_count: count, affinity_sum: sum });
    }
    pairs.into_iter().map(|((u, v), stats)| Edge { u, v, stats }).collect()
}

/// Statistics of `count` faces whose mean affinity is close to `mean`,
/// lowered by `salt` units of 2^-32 (below 4096) so that means differ.
fn stats_near(count: u64, mean: f64, salt: u64) -> ContactStats {
    let one = (1u64 << 32) as f64;
    let per_face = ((mean.clamp(0.0, 1.0) * one) as u64).saturating_sub(salt % 4096).min(1 << 32);
    ContactStats { contact_count: count, affinity_sum: per_face * count }
}

/// Graphs built to hurt merging in rounds, for tests and benchmarks, each
/// `(name, n_nodes, edges)` and tie-free with overwhelming probability
/// (means perturbed per edge); `scale` ≥ 1 multiplies their sizes. A star
/// (one hub, every other node a leaf), a long path whose means fall along
/// it, a big hub among many small regions that also touch their
/// neighbours, many equal hubs side by side (stars of the same shape
/// linked in a ring), and a random graph. Edges are sorted by endpoints,
/// each pair once.
pub fn adversarial_graphs(seed: u64, scale: u64) -> Vec<(&'static str, u64, Vec<Edge>)> {
    let mut rng = gpu_waterz_core::synthetic::SplitMix64::new(seed);
    let scale = scale.max(1);
    let mut unit = move || rng.next_u64();
    let mut below = |n: u64| unit() % n;
    let mut graphs = Vec::new();
    let n = (200 + below(200)) * scale;
    let star = (2..n)
        .map(|v| Edge { u: 1, v, stats: stats_near(1 + below(50), 0.6 + 0.4 * frac(below(1 << 24)), v) })
        .collect();
    graphs.push(("star", n, star));
    let n = (300 + below(300)) * scale;
    let step = 0.9 / n as f64;
    let path = (1..n - 1)
        .map(|u| Edge { u, v: u + 1, stats: stats_near(1 + below(20), 0.99 - u as f64 * step, below(4096)) })
        .collect();
    graphs.push(("path", n, path));
    let n = (400 + below(200)) * scale;
    let mut hub = Vec::new();
    for v in 2..n {
        hub.push(Edge { u: 1, v, stats: stats_near(1 + below(100), 0.5 + 0.5 * frac(below(1 << 24)), below(4096)) });
        if v + 1 < n && below(3) == 0 {
            hub.push(Edge { u: v, v: v + 1, stats: stats_near(1 + below(10), frac(below(1 << 24)), below(4096)) });
        }
    }
    graphs.push(("hub", n, hub));
    let (hubs, leaves) = (20 * scale, 30u64);
    let n = 1 + hubs * (leaves + 1);
    let mut many = Vec::new();
    for h in 0..hubs {
        let centre = 1 + h * (leaves + 1);
        for l in 1..=leaves {
            many.push(Edge {
                u: centre,
                v: centre + l,
                stats: stats_near(5, 0.7 + l as f64 * 0.009, (h * 64 + l) % 4096),
            });
        }
        let next = 1 + ((h + 1) % hubs) * (leaves + 1);
        let (u, v) = (centre.min(next), centre.max(next));
        many.push(Edge { u, v, stats: stats_near(3, 0.4 + frac(below(1 << 24)) * 1e-3, h % 4096) });
    }
    graphs.push(("many hubs", n, many));
    let n = (50 + below(150)) * scale;
    graphs.push(("random", n, random_graph(seed, n, n as usize * 4, 50, 0)));
    for (_, _, edges) in &mut graphs {
        edges.sort_by_key(|e| (e.u, e.v));
    }
    graphs
}

/// `x / 2^24` for `x < 2^24`: a fraction in `[0, 1)`.
fn frac(x: u64) -> f64 {
    x as f64 / (1u64 << 24) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IterativeMerging;
    use proptest::prelude::*;

    /// Random fixed-point sums (`levels` 0): means are distinct with
    /// overwhelming probability, and so are the means of their merges.
    fn random_graph(seed: u64, n_nodes: u64, n_edges: usize) -> Vec<Edge> {
        super::random_graph(seed, n_nodes, n_edges, 50, 0)
    }

    fn partition(labels: &[u64]) -> Vec<u64> {
        // Canonical: each node labelled by the smallest node of its region.
        let mut first = std::collections::HashMap::new();
        labels.iter().enumerate().map(|(i, &l)| *first.entry(l).or_insert(i as u64)).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Reducibility, checked: at ε = 0, ParHAC's partition and merges
        /// equal waterz's serial order in exact arithmetic, at every
        /// threshold, on tie-free random graphs.
        #[test]
        fn epsilon_zero_equals_the_serial_order(seed in any::<u64>(), n_nodes in 3u64..40, density in 1usize..6) {
            let edges = random_graph(seed, n_nodes, n_nodes as usize * density);
            let mut parhac = Parhac::new(n_nodes, edges.clone(), 0.0).unwrap();
            let mut serial = IterativeMerging::from_contact_stats(
                n_nodes,
                edges.iter().map(|e| [e.u, e.v]).collect(),
                edges.iter().map(|e| e.stats).collect(),
            );
            for t in [0.1f32, 0.3, 0.5, 0.7, 0.9, 1.0] {
                let (mut ours, mut theirs) = (Vec::new(), Vec::new());
                parhac.merge_until(t, Some(&mut ours));
                serial.merge_until(t, Some(&mut theirs));
                let a: Vec<u64> = (0..n_nodes).map(|i| parhac.region_of(i)).collect();
                let b: Vec<u64> = (0..n_nodes).map(|i| serial.region_of(i)).collect();
                prop_assert_eq!(partition(&a), partition(&b), "threshold {}", t);
                // The same merges at the same scores, in another order.
                let key = |m: &Merge| (m.a, m.b, m.c, m.score.to_bits());
                let mut ours: Vec<_> = ours.iter().map(key).collect();
                let mut theirs: Vec<_> = theirs.iter().map(key).collect();
                ours.sort_unstable();
                theirs.sort_unstable();
                prop_assert_eq!(ours, theirs, "threshold {}", t);
            }
        }

        /// At any ε, merging stops with every remaining edge at or above
        /// the threshold.
        #[test]
        fn any_epsilon_stops_below_no_edge(seed in any::<u64>(), n_nodes in 3u64..40, eps in 0.0f64..0.5) {
            let edges = random_graph(seed, n_nodes, n_nodes as usize * 3);
            let mut parhac = Parhac::new(n_nodes, edges, eps).unwrap();
            for t in [0.3f32, 0.6, 0.9] {
                parhac.merge_until(t, None);
                prop_assert!(parhac.edges().iter().all(|e| e.score() >= t as f64));
            }
        }
    }

    #[test]
    fn rejects_bad_epsilon() {
        assert!(Parhac::new(2, vec![], -0.1).is_err());
        assert!(Parhac::new(2, vec![], f64::NAN).is_err());
    }

    #[test]
    fn a_larger_epsilon_merges_in_fewer_rounds_on_a_chain() {
        // A chain 1-2-3-...-n with slowly decreasing means: at ε = 0 only
        // one mutual-best pair exists per round.
        let n = 40u64;
        let edges: Vec<Edge> = (1..n - 1)
            .map(|u| Edge { u, v: u + 1, stats: ContactStats { contact_count: 1, affinity_sum: (1 << 32) - u * 1000 } })
            .collect();
        let mut exact = Parhac::new(n, edges.clone(), 0.0).unwrap();
        exact.merge_until(0.5, None);
        let mut loose = Parhac::new(n, edges, 0.1).unwrap();
        loose.merge_until(0.5, None);
        assert!(loose.rounds().len() < exact.rounds().len(), "{} vs {}", loose.rounds().len(), exact.rounds().len());
        let ra: Vec<u64> = (0..n).map(|i| exact.region_of(i)).collect();
        let rb: Vec<u64> = (0..n).map(|i| loose.region_of(i)).collect();
        assert_eq!(ra, rb, "everything below the threshold merges either way");
    }
}
