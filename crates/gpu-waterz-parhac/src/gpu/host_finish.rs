//! The serial finish of a threshold: once the rounds merge few pairs each,
//! the live graph goes to the host, [`merge_components`] ends the threshold
//! in one step (a serial merger per connected component of the edges below
//! the threshold, the components in parallel), and its merges and
//! contracted graph come back (see `docs/parhac.md` for why the result is
//! unchanged).

use super::contract::clear_table;
use super::history::DeviceHistory;
use super::node_state::{NodeState, RoundNodes};
use super::slots::EdgeSlots;
use crate::cpu::Edge;
use crate::serial::merge_components;
use crate::{Merge, ParhacError};
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_core::ContactStats;
use gpu_waterz_runtime::Gpu;

/// When the GPU hands a threshold's remaining merges to the host (at
/// ε = 0 only: the serial order is ParHAC's result at ε = 0, not at
/// ε > 0).
///
/// After every batch of rounds, the remaining merges of the threshold go
/// to the host when the live edge slots are at most
/// [`max_edges`](Self::max_edges) and the batch's last round merged fewer
/// than [`min_merges_per_round`](Self::min_merges_per_round) pairs, or
/// than one per [`slots_per_merge`](Self::slots_per_merge) live slots if
/// that is more, or at once when the slots are at most
/// [`small_edges`](Self::small_edges). A round costs the GPU a fixed ~17
/// µs of launches plus about 0.3 ns per live slot whatever it merges, while
/// the host merges a pair in about half a microsecond: rounds that merge
/// few pairs are cheaper on the host, and a large region absorbing its
/// neighbours one per round (thousands of rounds on real volumes) becomes
/// one step. The defaults are the crossover measured on an H200
/// (`docs/BENCHMARKS.md`): 64 merges per round on a contiguous 512³ volume
/// (15,000–36,000 live slots). Handing off by live slots as well (one
/// merge per 1,600 slots) cut the rounds on a contiguous 2.16-Gvoxel volume
/// from 451 to 99, but once the host merged faster (an indexed heap) it
/// made that volume's merging slower (0.26 against 0.20 s), and the tiled
/// one's five thresholds too, so it is off by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFinish {
    /// The most edge slots the host takes. Default 2^21 (2,097,152).
    pub max_edges: u64,
    /// A round merging fewer pairs hands the rest over. Default 64.
    pub min_merges_per_round: u64,
    /// A graph of at most this many slots goes to the host at once.
    /// Default 4096.
    pub small_edges: u64,
    /// A round merging fewer than one pair per this many live slots hands
    /// the rest over too (0: off, the default).
    pub slots_per_merge: u64,
}

impl HostFinish {
    /// Every merge on the GPU, in rounds (the schedule before the serial
    /// finish existed; ties then break exactly as the CPU ParHAC's).
    pub const NEVER: Self = Self { max_edges: 0, min_merges_per_round: 0, small_edges: 0, slots_per_merge: 0 };

    /// Whether the rest of the threshold goes to the host, for `n_slots`
    /// live slots after a round that merged `last_merged` pairs (`None`
    /// before the threshold's first round).
    pub(super) fn hands_off(&self, n_slots: u64, last_merged: Option<u64>) -> bool {
        if n_slots == 0 || n_slots > self.max_edges.max(self.small_edges) {
            return false;
        }
        let by_slots = n_slots.checked_div(self.slots_per_merge).unwrap_or(0);
        let fewest = self.min_merges_per_round.max(by_slots);
        n_slots <= self.small_edges || (n_slots <= self.max_edges && last_merged.is_some_and(|m| m < fewest))
    }
}

impl Default for HostFinish {
    fn default() -> Self {
        Self { max_edges: 1 << 21, min_merges_per_round: 64, small_edges: 4096, slots_per_merge: 0 }
    }
}

/// Ends the threshold on the host: downloads the slots' edges (round ids),
/// merges them serially while the best scores below `threshold`, writes
/// the merges into the round forest (tagged `tag`, so that the threshold's
/// end deduplicates their edges) and the contracted graph back into the
/// slots, and appends the merges to `history` in original ids. Returns the
/// number of merges. The caller ends the threshold (the parked edges come
/// back then).
pub(super) fn finish_on_host(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    state: &mut NodeState,
    history: Option<&mut DeviceHistory>,
    threshold: f32,
    tag: u32,
) -> Result<u64, ParhacError> {
    clear_table(gpu, slots)?;
    let start = std::time::Instant::now();
    let n = slots.n_slots() as usize;
    let keys = gpu.download_prefix(&slots.edges.keys, n)?;
    let counts = gpu.download_prefix(&slots.edges.counts, n)?;
    let sums = gpu.download_prefix(&slots.edges.sums, n)?;
    let edges: Vec<Edge> = (0..n)
        .map(|i| (EdgeKey::from_bits(keys[i]), i))
        .filter(|(key, _)| !key.is_empty())
        .map(|(key, i)| Edge {
            u: key.u(),
            v: key.v(),
            stats: ContactStats { contact_count: counts[i], affinity_sum: sums[i] },
        })
        .collect();
    let downloaded = start.elapsed().as_secs_f64();
    let m = state.n_round_nodes();
    let finished = merge_components(m, &edges, threshold)?;
    let merges = finished.merges;
    let merged = merges.len() as u64;
    let merged_at = start.elapsed().as_secs_f64();
    if merged == 0 {
        return Ok(0);
    }
    // The merges, into the forest of the round ids: `b` is a root there
    // (the slots' endpoints are roots), and merges into the smaller id.
    let original = match state.original_ids() {
        Some(map) => Some(gpu.download_prefix(map.ids, m as usize)?),
        None => None,
    };
    let RoundNodes { forest, .. } = state.round_nodes();
    let mut parent = gpu.download_prefix(forest.parent, m as usize)?;
    let mut touched = gpu.download_prefix(forest.touched, m as usize)?;
    for merge in &merges {
        parent[merge.b as usize] = merge.a as u32;
        touched[merge.a as usize] = tag;
        touched[merge.b as usize] = tag;
    }
    gpu.upload_into(forest.parent, 0, &parent)?;
    gpu.upload_into(forest.touched, 0, &touched)?;
    // The contracted graph, into the slots (never more edges than before).
    let remaining = finished.edges;
    if let Some(e) = remaining.iter().find(|e| e.v >= slots.edges.node_bound) {
        return Err(ParhacError::InvalidEdge { u: e.u, v: e.v, n_nodes: slots.edges.node_bound });
    }
    let new_keys: Vec<u64> = remaining.iter().map(|e| EdgeKey::new(e.u, e.v).bits()).collect();
    let new_counts: Vec<u64> = remaining.iter().map(|e| e.stats.contact_count).collect();
    let new_sums: Vec<u64> = remaining.iter().map(|e| e.stats.affinity_sum).collect();
    gpu.upload_into(&mut slots.edges.keys, 0, &new_keys)?;
    gpu.upload_into(&mut slots.edges.counts, 0, &new_counts)?;
    gpu.upload_into(&mut slots.edges.sums, 0, &new_sums)?;
    slots.edges.len = remaining.len() as u64;
    if let Some(h) = history {
        let id = |x: u64| original.as_ref().map_or(x, |o| o[x as usize] as u64);
        let merges: Vec<Merge> =
            merges.iter().map(|g| Merge { a: id(g.a), b: id(g.b), c: id(g.c), score: g.score }).collect();
        h.append(gpu, &merges)?;
    }
    tracing::debug!(
        n_slots = n,
        n_edges = edges.len(),
        n_nodes = m,
        merged,
        download_s = downloaded,
        merge_s = merged_at - downloaded,
        upload_s = start.elapsed().as_secs_f64() - merged_at,
        "serial finish on the host"
    );
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::HostFinish;

    #[test]
    fn the_policy_hands_off_small_graphs_and_unproductive_rounds() {
        let p = HostFinish { max_edges: 1000, min_merges_per_round: 10, small_edges: 100, slots_per_merge: 0 };
        assert!(p.hands_off(100, None));
        assert!(!p.hands_off(101, None));
        assert!(p.hands_off(1000, Some(9)));
        assert!(!p.hands_off(1000, Some(10)));
        assert!(!p.hands_off(1001, Some(1)));
        assert!(!p.hands_off(0, None));
        // With one merge per 50 slots: 20 merges at 1000 slots.
        let q = HostFinish { slots_per_merge: 50, ..p };
        assert!(q.hands_off(1000, Some(19)));
        assert!(!q.hands_off(1000, Some(20)));
        assert!(q.hands_off(200, Some(9)));
        assert!(!q.hands_off(200, Some(10)));
        for n in [1, 100, 1 << 20] {
            assert!(!HostFinish::NEVER.hands_off(n, Some(0)));
            assert!(!HostFinish::NEVER.hands_off(n, None));
        }
    }
}
