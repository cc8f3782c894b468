//! Exact serial merging of a contact-mean region graph: the globally best
//! edge first, one merge at a time, in `O(E log E)`.
//!
//! This is the tail of the GPU merging (see `docs/parhac.md`): once the
//! rounds merge only a few pairs each (a large region absorbing its
//! neighbours one per round), the remaining graph is finished here in one
//! step instead of thousands of rounds. It is exact in the same sense as
//! ParHAC at ε = 0: the globally best edge is a mutual best pair, and the
//! contact mean is a reducible linkage, so on tie-free input the partitions
//! and merges (with their scores) equal waterz's serial order in exact
//! arithmetic ([`crate::IterativeMerging::from_contact_stats`]) and
//! ParHAC's, whatever ParHAC merged before handing the graph over.
//!
//! Regions live in storage slots. Each slot's incident edges form a linked
//! list through the edges' two ends (no allocation per region), and one
//! hash map from a pair of slots to its edge finds parallel edges. A merge
//! walks the shorter list: each of its edges either adds its integer
//! statistics to the longer side's edge to the same neighbour (and is
//! deleted) or moves to the longer side, so an edge moves `O(log E)` times.
//! The queue is an indexed 4-ary heap (`EdgeQueue`) holding each queued
//! edge once: when an edge's statistics change, its entry moves in place
//! (a heap with lazy deletion would queue a copy per change, and on real
//! volumes spend most of the merging popping stale copies). Edges above
//! the current threshold wait outside it until a higher threshold comes.
//! Equal scores are broken by the endpoints' ids when the edge's statistics
//! last changed (deterministic, but not necessarily ParHAC's order of ties;
//! see `docs/parhac.md`).

use crate::cpu::Edge;
use crate::{Merge, ParhacError};
use gpu_waterz_abi::parhac::edge_score;
use gpu_waterz_core::ContactStats;
use rustc_hash::FxHashMap;

/// One edge of the serial graph: `ends` are storage slots (see
/// [`SerialMerger`]), not necessarily ordered.
#[derive(Clone, Copy, Debug)]
struct SlotEdge {
    ends: [u32; 2],
    stats: ContactStats,
    /// Bumped whenever the statistics change; [`DELETED`] once gone.
    version: u32,
}

/// The version of a deleted edge, and the end of a list.
const DELETED: u32 = u32::MAX;
const NONE: u32 = u32::MAX;

impl SlotEdge {
    fn score(&self) -> f64 {
        edge_score(self.stats.contact_count, self.stats.affinity_sum)
    }
}

/// An edge's place in the merge order, smallest first: its score (as
/// order-preserving bits), the two region ids when its statistics last
/// changed (the tie-break), and the edge.
type Key = (u64, u32, u32, u32);

/// The edge of a [`Key`].
fn edge_of(key: &Key) -> usize {
    key.3 as usize
}

/// The position of an edge that is not in the [`EdgeQueue`].
const NOT_QUEUED: u32 = u32::MAX;

/// A min-heap of edge keys with four children per node, indexed by edge:
/// each edge is in it at most once, and [`EdgeQueue::set`] and
/// [`EdgeQueue::remove`] find it by its position.
#[derive(Clone, Debug, Default)]
struct EdgeQueue {
    heap: Vec<Key>,
    /// Per edge: its index in `heap`, or [`NOT_QUEUED`].
    position: Vec<u32>,
}

impl EdgeQueue {
    /// An empty queue for edges `0..n_edges`.
    fn new(n_edges: usize) -> Self {
        Self { heap: Vec::new(), position: vec![NOT_QUEUED; n_edges] }
    }

    /// The smallest key.
    fn peek(&self) -> Option<&Key> {
        self.heap.first()
    }

    /// Queues `key`'s edge with `key`, or moves it there if it is queued.
    fn set(&mut self, key: Key) {
        match self.position[edge_of(&key)] {
            NOT_QUEUED => {
                self.heap.push(key);
                self.sift_up(self.heap.len() - 1);
            }
            at => self.replace_at(at as usize, key),
        }
    }

    /// Takes `edge` out of the queue (nothing if it is not queued).
    fn remove(&mut self, edge: usize) {
        let at = self.position[edge];
        if at == NOT_QUEUED {
            return;
        }
        self.position[edge] = NOT_QUEUED;
        let at = at as usize;
        let Some(last) = self.heap.pop() else { return };
        if at < self.heap.len() {
            self.replace_at(at, last);
        }
    }

    /// Puts `key` at `at` in place of the key there, then restores the
    /// heap's order around it.
    fn replace_at(&mut self, at: usize, key: Key) {
        let old = std::mem::replace(&mut self.heap[at], key);
        if key < old {
            self.sift_up(at);
        } else {
            self.sift_down(at);
        }
    }

    /// Stores `key` at `at` and records its position.
    fn place(&mut self, at: usize, key: Key) {
        self.heap[at] = key;
        self.position[edge_of(&key)] = at as u32;
    }

    /// Moves the key at `at` towards the root until its parent is smaller.
    fn sift_up(&mut self, mut at: usize) {
        let key = self.heap[at];
        while at > 0 {
            let parent = (at - 1) / 4;
            if self.heap[parent] <= key {
                break;
            }
            self.place(at, self.heap[parent]);
            at = parent;
        }
        self.place(at, key);
    }

    /// Moves the key at `at` towards the leaves until its children are
    /// larger.
    fn sift_down(&mut self, mut at: usize) {
        let key = self.heap[at];
        let n = self.heap.len();
        loop {
            let first = 4 * at + 1;
            if first >= n {
                break;
            }
            let mut best = first;
            for child in first + 1..(first + 4).min(n) {
                if self.heap[child] < self.heap[best] {
                    best = child;
                }
            }
            if self.heap[best] >= key {
                break;
            }
            self.place(at, self.heap[best]);
            at = best;
        }
        self.place(at, key);
    }
}

/// Bits of `x` that sort as `f64::total_cmp` does.
fn ordered_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The key of the edge between slots `a` and `b`.
fn pair(a: u32, b: u32) -> u64 {
    ((a.min(b) as u64) << 32) | a.max(b) as u64
}

/// The state of exact serial merging over nodes `0..n_nodes`.
///
/// A region is stored in a slot (initially its node's): `label[slot]` is
/// its id, its smallest node (merges go into the smaller id, as waterz's);
/// its incident edges are the list starting at `head[slot]`, through
/// `next` (entry `2e + k` is edge `e`'s end `k`), `length[slot]` entries
/// long, deleted edges included until a walk drops them. A merge keeps the
/// slot of the longer list.
#[derive(Clone, Debug)]
pub struct SerialMerger {
    edges: Vec<SlotEdge>,
    /// The edge between two slots (keys from [`pair`]); entries of slots
    /// that merged away stay, unread.
    between: FxHashMap<u64, u32>,
    head: Vec<u32>,
    next: Vec<u32>,
    length: Vec<u32>,
    label: Vec<u32>,
    /// Union-find forest of the nodes by region id (parents are smaller).
    forest: Vec<u32>,
    queue: EdgeQueue,
    /// Edges waiting outside the queue for a threshold above their score,
    /// with their key and version then (entries of edges changed since are
    /// stale and dropped).
    pending: Vec<(Key, u32)>,
    /// Edges scoring below these bits are queued (the current threshold's).
    queued_below: u64,
    merged_until: f64,
    n_merges: u64,
}

impl SerialMerger {
    /// Starts from `edges` (`u < v < n_nodes`, parallel edges allowed:
    /// their statistics add up) over nodes `0..n_nodes`, every node its own
    /// region. Fails on an edge outside the nodes or a loop, and on more
    /// than `u32::MAX - 1` nodes or edges.
    pub fn new(n_nodes: u64, edges: &[Edge]) -> Result<Self, ParhacError> {
        if n_nodes >= NONE as u64 {
            return Err(ParhacError::TooManyNodes { n_nodes });
        }
        if 2 * edges.len() as u64 >= NONE as u64 {
            return Err(ParhacError::TooManyEdges { n_edges: edges.len() as u64 });
        }
        if let Some(e) = edges.iter().find(|e| e.u >= e.v || e.v >= n_nodes) {
            return Err(ParhacError::InvalidEdge { u: e.u, v: e.v, n_nodes });
        }
        let n = n_nodes as usize;
        let mut merger = Self {
            edges: Vec::with_capacity(edges.len()),
            between: FxHashMap::with_capacity_and_hasher(edges.len(), Default::default()),
            head: vec![NONE; n],
            next: Vec::with_capacity(2 * edges.len()),
            length: vec![0; n],
            label: (0..n_nodes as u32).collect(),
            forest: (0..n_nodes as u32).collect(),
            queue: EdgeQueue::default(),
            pending: Vec::new(),
            queued_below: 0,
            merged_until: f64::NEG_INFINITY,
            n_merges: 0,
        };
        for e in edges {
            let (u, v) = (e.u as u32, e.v as u32);
            let i = merger.edges.len() as u32;
            match merger.between.entry(pair(u, v)) {
                std::collections::hash_map::Entry::Occupied(o) => {
                    let edge = &mut merger.edges[*o.get() as usize];
                    edge.stats = edge.stats.merged(e.stats);
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(i);
                    merger.edges.push(SlotEdge { ends: [u, v], stats: e.stats, version: 0 });
                    for (k, x) in [u, v].into_iter().enumerate() {
                        merger.next.push(merger.head[x as usize]);
                        merger.head[x as usize] = 2 * i + k as u32;
                        merger.length[x as usize] += 1;
                    }
                }
            }
        }
        merger.queue = EdgeQueue::new(merger.edges.len());
        merger.pending = (0..merger.edges.len() as u32).map(|i| (merger.key(i), 0)).collect();
        Ok(merger)
    }

    /// The key of edge `i` as it is now.
    fn key(&self, i: u32) -> Key {
        let e = &self.edges[i as usize];
        let (x, y) = (self.label[e.ends[0] as usize], self.label[e.ends[1] as usize]);
        (ordered_bits(e.score()), x.min(y), x.max(y), i)
    }

    /// Queues edge `i` with its key as it is now if it scores below the
    /// current threshold; otherwise it waits for a higher one.
    fn requeue(&mut self, i: u32) {
        let key = self.key(i);
        if key.0 < self.queued_below {
            self.queue.set(key);
        } else {
            self.queue.remove(i as usize);
            self.pending.push((key, self.edges[i as usize].version));
        }
    }

    /// The number of merges so far.
    pub fn n_merges(&self) -> u64 {
        self.n_merges
    }

    /// Merges the best edge while it scores below `threshold` (compared in
    /// float32, as waterz); appends the merges to `history` when given (`b`
    /// merged into `a`, `c = a`, in the order they happened). Returns the
    /// number of merges. A threshold at or below the last one does nothing.
    pub fn merge_until(&mut self, threshold: f32, mut history: Option<&mut Vec<Merge>>) -> u64 {
        let t = threshold as f64;
        if t <= self.merged_until {
            return 0;
        }
        self.merged_until = t;
        // Queue the waiting edges that this threshold reaches.
        let below = ordered_bits(t);
        self.queued_below = below;
        let mut waiting = std::mem::take(&mut self.pending);
        waiting.retain(|&(key, version)| {
            // Deleted, or changed since (a newer entry exists): dropped.
            if self.edges[edge_of(&key)].version != version {
                return false;
            }
            if key.0 < below {
                self.queue.set(key);
                return false;
            }
            true
        });
        self.pending = waiting;
        let mut merged = 0;
        while let Some(&key) = self.queue.peek() {
            let i = key.3;
            let edge = self.edges[i as usize];
            let score = edge.score();
            if !(score < t) {
                break;
            }
            self.queue.remove(i as usize);
            let (x, y) = (self.label[edge.ends[0] as usize], self.label[edge.ends[1] as usize]);
            let (a, b) = (x.min(y), x.max(y));
            self.merge(i);
            if let Some(h) = history.as_deref_mut() {
                h.push(Merge { a: a as u64, b: b as u64, c: a as u64, score });
            }
            merged += 1;
        }
        self.n_merges += merged;
        merged
    }

    /// Merges the two regions of edge `i`.
    fn merge(&mut self, i: u32) {
        let [p, q] = self.edges[i as usize].ends;
        self.edges[i as usize].version = DELETED;
        // `between` keeps entries of the shorter side's slot, which is never
        // a region again after this merge, so no lookup ever reaches them:
        // removing them would cost a probe each for nothing.
        let (big, small) = if self.length[p as usize] >= self.length[q as usize] { (p, q) } else { (q, p) };
        let (big_label, small_label) = (self.label[big as usize], self.label[small as usize]);
        let (keep, gone) = (big_label.min(small_label), big_label.max(small_label));
        self.forest[gone as usize] = keep;
        self.label[big as usize] = keep;
        let mut entry = std::mem::replace(&mut self.head[small as usize], NONE);
        self.length[small as usize] = 0;
        while entry != NONE {
            let following = self.next[entry as usize];
            let (j, end) = (entry / 2, (entry % 2) as usize);
            if self.edges[j as usize].version != DELETED {
                // Only one edge joins two regions (parallel ones are
                // combined), and the one between these two is gone: the
                // other end is a third region.
                let neighbour = self.edges[j as usize].ends[1 - end];
                // One probe finds the longer side's edge to the neighbour,
                // or claims its place for the moving edge.
                let parallel = match self.between.entry(pair(big, neighbour)) {
                    std::collections::hash_map::Entry::Occupied(o) => Some(*o.get()),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(j);
                        None
                    }
                };
                match parallel {
                    Some(k) => {
                        // Parallel edges: the statistics add up, the moving
                        // edge goes.
                        let stats = self.edges[j as usize].stats;
                        self.edges[j as usize].version = DELETED;
                        self.queue.remove(j as usize);
                        let kept = &mut self.edges[k as usize];
                        kept.stats = kept.stats.merged(stats);
                        kept.version += 1;
                        self.requeue(k);
                    }
                    None => {
                        self.edges[j as usize].ends[end] = big;
                        self.next[entry as usize] = self.head[big as usize];
                        self.head[big as usize] = entry;
                        self.length[big as usize] += 1;
                    }
                }
            }
            entry = following;
        }
    }

    /// The region of node `id` (its smallest node).
    pub fn region_of(&mut self, id: u64) -> u64 {
        let mut x = id as usize;
        while self.forest[x] as usize != x {
            let p = self.forest[x] as usize;
            self.forest[x] = self.forest[p];
            x = p;
        }
        x as u64
    }

    /// The regions of all nodes.
    pub fn regions(&mut self) -> Vec<u32> {
        (0..self.forest.len() as u64).map(|x| self.region_of(x) as u32).collect()
    }

    /// The current graph: edges between regions (their ids), sorted by
    /// endpoints.
    pub fn edges(&self) -> Vec<Edge> {
        let mut out = self.edges_in_storage_order();
        out.sort_unstable_by_key(|e| (e.u, e.v));
        out
    }

    /// The current graph's edges (`u < v`), in no particular order.
    fn edges_in_storage_order(&self) -> Vec<Edge> {
        self.edges
            .iter()
            .filter(|e| e.version != DELETED)
            .map(|e| {
                let (x, y) = (self.label[e.ends[0] as usize] as u64, self.label[e.ends[1] as usize] as u64);
                Edge { u: x.min(y), v: x.max(y), stats: e.stats }
            })
            .collect()
    }
}

/// One component's merges and remaining edges, in [`merge_components`].
type ComponentResult = (Vec<Merge>, Vec<Edge>);

/// What [`merge_components`] did: the merges (component by component,
/// each in the order it happened) and the remaining graph, sorted by
/// endpoints, without parallel edges.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// `b` merged into `a` (`c = a`) at `score`.
    pub merges: Vec<Merge>,
    /// The graph after the merges: edges between regions (their ids).
    pub edges: Vec<Edge>,
}

/// Merges `edges` over nodes `0..n_nodes` to `threshold` (compared in
/// float32) as [`SerialMerger`] does, one connected component of the edges
/// below the threshold at a time, the components in parallel.
///
/// Merges only ever join the two ends of an edge below the threshold, and
/// a merged edge is below it only if one of its parts is, so a region never
/// leaves its component and the components merge independently: each one
/// runs a [`SerialMerger`] over the edges between its nodes (at any score),
/// and the edges between components, which never fall below the threshold
/// now, only get their ends' regions. The partition, the merges with their
/// scores and the remaining graph are the serial merger's on tie-free
/// input (the merges listed in another order).
pub fn merge_components(n_nodes: u64, edges: &[Edge], threshold: f32) -> Result<Finished, ParhacError> {
    use rayon::prelude::*;
    if n_nodes >= NONE as u64 {
        return Err(ParhacError::TooManyNodes { n_nodes });
    }
    if let Some(e) = edges.iter().find(|e| e.u >= e.v || e.v >= n_nodes) {
        return Err(ParhacError::InvalidEdge { u: e.u, v: e.v, n_nodes });
    }
    let t = threshold as f64;
    let n = n_nodes as usize;
    // Components of the edges below the threshold (union-find).
    let mut root: Vec<u32> = (0..n_nodes as u32).collect();
    fn find(root: &mut [u32], mut x: u32) -> u32 {
        while root[x as usize] != x {
            let p = root[x as usize];
            root[x as usize] = root[p as usize];
            x = p;
        }
        x
    }
    let mut active = vec![false; n];
    for e in edges.iter().filter(|e| e.score() < t) {
        let (a, b) = (find(&mut root, e.u as u32), find(&mut root, e.v as u32));
        root[a.max(b) as usize] = a.min(b);
        active[e.u as usize] = true;
        active[e.v as usize] = true;
    }
    // Components numbered by their smallest node; nodes numbered within
    // their component in increasing order (which keeps every comparison of
    // ids, so every choice, and merges into the smaller id).
    let mut component = vec![NONE; n];
    let mut local = vec![0u32; n];
    let mut nodes: Vec<Vec<u32>> = Vec::new();
    for x in 0..n as u32 {
        if !active[x as usize] {
            continue;
        }
        let r = find(&mut root, x) as usize;
        if component[r] == NONE {
            component[r] = nodes.len() as u32;
            nodes.push(Vec::new());
        }
        let c = component[r];
        component[x as usize] = c;
        local[x as usize] = nodes[c as usize].len() as u32;
        nodes[c as usize].push(x);
    }
    let mut inside: Vec<Vec<Edge>> = vec![Vec::new(); nodes.len()];
    let mut between = Vec::new();
    for e in edges {
        let (cu, cv) = (component[e.u as usize], component[e.v as usize]);
        if cu != NONE && cu == cv {
            let (u, v) = (local[e.u as usize] as u64, local[e.v as usize] as u64);
            inside[cu as usize].push(Edge { u, v, stats: e.stats });
        } else {
            between.push(*e);
        }
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        let largest = nodes.iter().zip(&inside).max_by_key(|(ids, edges)| ids.len() + edges.len());
        tracing::debug!(
            n_components = nodes.len(),
            largest_nodes = largest.map_or(0, |(ids, _)| ids.len()),
            largest_edges = largest.map_or(0, |(_, edges)| edges.len()),
            n_between = between.len(),
            "serial finish: components of the edges below the threshold"
        );
    }
    // The largest components first, each a task of its own: the largest
    // one is the critical path (on real volumes it holds a third or more of
    // the nodes), so it starts at once while the others share the
    // remaining threads. The results are put back in component order.
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_unstable_by_key(|&c| (std::cmp::Reverse(inside[c].len() + nodes[c].len()), c));
    let computed: Vec<(usize, ComponentResult)> = order
        .par_iter()
        .with_max_len(1)
        .map(|&c| {
            let (ids, edges) = (&nodes[c], &inside[c]);
            let mut merger = SerialMerger::new(ids.len() as u64, edges)?;
            let mut merges = Vec::new();
            merger.merge_until(threshold, Some(&mut merges));
            let id = |x: u64| ids[x as usize] as u64;
            let merges = merges.iter().map(|m| Merge { a: id(m.a), b: id(m.b), c: id(m.c), score: m.score }).collect();
            // Sorted once, with the others, below.
            let remaining = merger
                .edges_in_storage_order()
                .iter()
                .map(|e| Edge { u: id(e.u), v: id(e.v), stats: e.stats })
                .collect();
            Ok((c, (merges, remaining)))
        })
        .collect::<Result<_, ParhacError>>()?;
    let mut results: Vec<ComponentResult> = vec![Default::default(); nodes.len()];
    for (c, result) in computed {
        results[c] = result;
    }
    // The regions of all nodes, for the edges between components.
    let mut region: Vec<u32> = (0..n_nodes as u32).collect();
    let mut finished = Finished::default();
    let mut remaining = Vec::new();
    for (merges, edges) in results {
        for m in &merges {
            region[m.b as usize] = m.a as u32;
        }
        finished.merges.extend(merges);
        remaining.extend(edges);
    }
    for e in between {
        let (a, b) = (find(&mut region, e.u as u32) as u64, find(&mut region, e.v as u32) as u64);
        remaining.push(Edge { u: a.min(b), v: a.max(b), stats: e.stats });
    }
    remaining.par_sort_unstable_by_key(|e| (e.u, e.v));
    for e in remaining {
        match finished.edges.last_mut() {
            Some(last) if (last.u, last.v) == (e.u, e.v) => last.stats = last.stats.merged(e.stats),
            _ => finished.edges.push(e),
        }
    }
    Ok(finished)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{adversarial_graphs, random_graph, Parhac};
    use crate::IterativeMerging;
    use proptest::prelude::*;

    const THRESHOLDS: [f32; 6] = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0];

    fn serial_reference(n_nodes: u64, edges: &[Edge]) -> IterativeMerging {
        IterativeMerging::from_contact_stats(
            n_nodes,
            edges.iter().map(|e| [e.u, e.v]).collect(),
            edges.iter().map(|e| e.stats).collect(),
        )
    }

    fn partition(labels: &[u64]) -> Vec<u64> {
        let mut first = std::collections::HashMap::new();
        labels.iter().enumerate().map(|(i, &l)| *first.entry(l).or_insert(i as u64)).collect()
    }

    fn merge_set(merges: &[Merge]) -> Vec<(u64, u64, u64, u64)> {
        let mut set: Vec<_> = merges.iter().map(|m| (m.a, m.b, m.c, m.score.to_bits())).collect();
        set.sort_unstable();
        set
    }

    /// The serial merger, the waterz-order reference and (for `rounds`
    /// rounds per threshold, then the serial merger) the CPU ParHAC agree
    /// on partitions, merges and scores at every threshold.
    fn check_graph(name: &str, n_nodes: u64, edges: &[Edge], rounds: usize) -> Result<(), TestCaseError> {
        let mut serial = SerialMerger::new(n_nodes, edges).unwrap();
        let mut reference = serial_reference(n_nodes, edges);
        let mut parhac = Parhac::new(n_nodes, edges.to_vec(), 0.0).unwrap();
        for t in THRESHOLDS {
            let (mut ours, mut theirs, mut hybrid) = (Vec::new(), Vec::new(), Vec::new());
            let before = serial.edges();
            let previous: Vec<u64> = (0..n_nodes).map(|i| serial.region_of(i)).collect();
            serial.merge_until(t, Some(&mut ours));
            reference.merge_until(t, Some(&mut theirs));
            // The hybrid: a few ParHAC rounds, then the rest serially from
            // ParHAC's contracted graph, as the GPU hands it over.
            parhac.run_rounds(t, rounds, Some(&mut hybrid));
            parhac.finish_serially(t, Some(&mut hybrid)).unwrap();
            let a: Vec<u64> = (0..n_nodes).map(|i| serial.region_of(i)).collect();
            let b: Vec<u64> = (0..n_nodes).map(|i| reference.region_of(i)).collect();
            let c: Vec<u64> = (0..n_nodes).map(|i| parhac.region_of(i)).collect();
            // The components in parallel, from the serial merger's start.
            let finished = merge_components(n_nodes, &before, t).unwrap();
            let mut regions: Vec<u64> = (0..n_nodes).collect();
            for m in &finished.merges {
                regions[m.b as usize] = m.a;
            }
            let find = |mut i: u64| {
                while regions[i as usize] != i {
                    i = regions[i as usize];
                }
                i
            };
            let d: Vec<u64> = previous.iter().map(|&r| find(r)).collect();
            prop_assert_eq!(&d, &b, "{}: components, threshold {}", name, t);
            prop_assert_eq!(merge_set(&finished.merges), merge_set(&theirs), "{}: components' merges at {}", name, t);
            prop_assert_eq!(&finished.edges, &serial.edges(), "{}: components' graph at {}", name, t);
            prop_assert_eq!(partition(&a), partition(&b), "{}: threshold {}", name, t);
            prop_assert_eq!(partition(&c), partition(&b), "{}: hybrid, threshold {}", name, t);
            prop_assert_eq!(merge_set(&ours), merge_set(&theirs), "{}: merges at {}", name, t);
            prop_assert_eq!(merge_set(&hybrid), merge_set(&theirs), "{}: hybrid merges at {}", name, t);
            prop_assert_eq!(serial.edges(), parhac.edges().to_vec(), "{}: remaining graph at {}", name, t);
        }
        Ok(())
    }

    proptest! {
        /// The indexed heap against a sorted set of the queued keys: after
        /// every insert, move and removal its smallest key is the set's.
        #[test]
        fn the_edge_queue_keeps_the_smallest_key_first(ops in proptest::collection::vec((0u32..40, 0u64..12, 0u8..4), 1..300)) {
            let mut queue = EdgeQueue::new(40);
            let mut model: std::collections::BTreeMap<u32, Key> = Default::default();
            for (edge, score, op) in ops {
                if op == 0 {
                    queue.remove(edge as usize);
                    model.remove(&edge);
                } else {
                    let key = (score, edge % 3, edge % 5, edge);
                    queue.set(key);
                    model.insert(edge, key);
                }
                let smallest = model.values().min().copied();
                prop_assert_eq!(queue.peek().copied(), smallest);
                prop_assert_eq!(queue.heap.len(), model.len());
                for (at, key) in queue.heap.iter().enumerate() {
                    prop_assert_eq!(queue.position[edge_of(key)] as usize, at);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Stars, paths, hubs, many equal hubs and random graphs: the serial
        /// merger and the ParHAC-then-serial hybrid equal waterz's serial
        /// order in exact arithmetic on tie-free input.
        #[test]
        fn hurtful_graphs_equal_the_serial_order(seed in any::<u64>(), rounds in 0usize..6) {
            for (name, n, edges) in adversarial_graphs(seed, 1) {
                check_graph(name, n, &edges, rounds)?;
            }
        }

        /// Random tie-free graphs of every density.
        #[test]
        fn random_graphs_equal_the_serial_order(seed in any::<u64>(), n_nodes in 3u64..60, density in 1usize..8, rounds in 0usize..4) {
            let edges = random_graph(seed, n_nodes, n_nodes as usize * density, 50, 0);
            check_graph("random", n_nodes, &edges, rounds)?;
        }

        /// With ties too: every remaining edge is at or above the threshold,
        /// and reruns are identical.
        #[test]
        fn ties_stop_below_no_edge_and_rerun_identically(seed in any::<u64>(), n_nodes in 3u64..60, levels in 1u64..8) {
            let edges = random_graph(seed, n_nodes, n_nodes as usize * 3, 20, levels);
            let mut first = SerialMerger::new(n_nodes, &edges).unwrap();
            let mut second = SerialMerger::new(n_nodes, &edges).unwrap();
            for t in THRESHOLDS {
                let (mut h1, mut h2) = (Vec::new(), Vec::new());
                first.merge_until(t, Some(&mut h1));
                second.merge_until(t, Some(&mut h2));
                prop_assert_eq!(&h1, &h2);
                prop_assert!(first.edges().iter().all(|e| e.score() >= t as f64));
                prop_assert_eq!(first.regions(), second.regions());
            }
        }
    }

    #[test]
    fn bad_edges_are_refused() {
        let e = |u, v| Edge { u, v, stats: ContactStats { contact_count: 1, affinity_sum: 1 } };
        assert!(matches!(SerialMerger::new(3, &[e(1, 3)]), Err(ParhacError::InvalidEdge { .. })));
        assert!(matches!(SerialMerger::new(3, &[e(2, 2)]), Err(ParhacError::InvalidEdge { .. })));
        assert!(matches!(SerialMerger::new(3, &[e(2, 1)]), Err(ParhacError::InvalidEdge { .. })));
        assert!(SerialMerger::new(3, &[e(1, 2), e(1, 2)]).unwrap().edges()[0].stats.contact_count == 2);
    }

    #[test]
    fn a_path_merges_in_order_of_its_means() {
        // Means fall along the path: the first edge is the best, and every
        // merge makes the next edge the best one.
        let n = 10u64;
        let edges: Vec<Edge> = (1..n - 1)
            .map(|u| Edge { u, v: u + 1, stats: ContactStats { contact_count: 1, affinity_sum: (1 << 32) - u * 1000 } })
            .collect();
        let mut m = SerialMerger::new(n, &edges).unwrap();
        let mut history = Vec::new();
        assert_eq!(m.merge_until(0.5, Some(&mut history)), 8);
        assert_eq!(history.iter().map(|h| h.b).collect::<Vec<_>>(), (2..n).collect::<Vec<_>>());
        assert!(history.iter().all(|h| h.a == 1 && h.c == 1));
        assert!(m.edges().is_empty());
        assert_eq!(m.regions(), vec![0, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    }
}
