//! Helpers shared by the ParHAC integration tests.

use gpu_waterz_core::synthetic::SplitMix64;
use gpu_waterz_core::ContactStats;
use gpu_waterz_parhac::cpu::Edge;

/// A random graph over nodes `1..n_nodes`; `levels` > 0 draws every face
/// affinity from `levels` values, which makes tied means common.
pub fn random_graph(seed: u64, n_nodes: u64, n_edges: usize, levels: u64) -> Vec<Edge> {
    let mut rng = SplitMix64::new(seed);
    let mut pairs = std::collections::BTreeMap::new();
    for _ in 0..n_edges {
        let u = 1 + rng.below(n_nodes - 1);
        let v = 1 + rng.below(n_nodes - 1);
        if u == v {
            continue;
        }
        let count = 1 + rng.below(20);
        let sum = (0..count)
            .map(|_| if levels == 0 { rng.below(1 << 32) } else { rng.below(levels + 1) * ((1 << 32) / levels) })
            .sum();
        pairs.insert((u.min(v), u.max(v)), ContactStats { contact_count: count, affinity_sum: sum });
    }
    pairs.into_iter().map(|((u, v), stats)| Edge { u, v, stats }).collect()
}
