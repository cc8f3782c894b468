//! A host model of the GPU's ε = 0 round as `ph_match_contract` and
//! `ph_resolve` run it, against the CPU ParHAC: every node's merge and new
//! id come from best keys alone (`gpu_waterz_abi::parhac::mutual_merge`),
//! and only the edges with a merged endpoint are deduplicated (the
//! smallest slot index per key collects the statistics). The regions and
//! remaining graph must equal the CPU ParHAC's at every threshold, ties
//! included, and no two edges may ever share a key. The GPU tests check
//! the kernels themselves; this runs without a GPU, in CI.

use gpu_waterz_abi::parhac::{edge_key, edge_score, mutual_merge, partner, relabelled};
use gpu_waterz_parhac::cpu::{Edge, Parhac};

/// The tests' random graphs: up to 20 contacts per edge.
fn random_graph(seed: u64, n_nodes: u64, n_edges: usize, levels: u64) -> Vec<Edge> {
    gpu_waterz_parhac::cpu::random_graph(seed, n_nodes, n_edges, 20, levels)
}
use proptest::prelude::*;

use std::collections::BTreeMap;

const THRESHOLDS: [f32; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];

/// Regions and remaining edges `(u, v, score bits)` after a threshold.
type Trace = Vec<(Vec<u64>, Vec<(u64, u64, u64)>)>;

fn cpu_trace(n_nodes: u64, edges: &[Edge]) -> Trace {
    let mut parhac = Parhac::new(n_nodes, edges.to_vec(), 0.0).unwrap();
    THRESHOLDS
        .iter()
        .map(|&t| {
            parhac.merge_until(t, None);
            let regions = (0..n_nodes).map(|i| parhac.region_of(i)).collect();
            let mut graph: Vec<_> = parhac.edges().iter().map(|e| (e.u, e.v, e.score().to_bits())).collect();
            graph.sort();
            (regions, graph)
        })
        .collect()
}

/// One slot: key `u << 32 | v`, contact count, fixed-point sum; `None` is a
/// hole.
type Slot = Option<(u64, u64, u64)>;

fn model_trace(n_nodes: u64, edges: &[Edge]) -> Trace {
    let n = n_nodes as usize;
    let mut slots: Vec<Slot> =
        edges.iter().map(|e| Some((edge_key(e.u, e.v), e.stats.contact_count, e.stats.affinity_sum))).collect();
    let mut parent: Vec<u64> = (0..n_nodes).collect();
    let mut trace = Vec::new();
    for t in THRESHOLDS {
        let t = t as f64;
        loop {
            // Best scores, then best keys among equal scores.
            let (mut best_score, mut best_key) = (vec![u64::MAX; n], vec![u64::MAX; n]);
            for &(key, count, sum) in slots.iter().flatten() {
                let score = edge_score(count, sum);
                if score < t {
                    for x in [key >> 32, key & 0xFFFF_FFFF] {
                        best_score[x as usize] = best_score[x as usize].min(score.to_bits());
                    }
                }
            }
            for &(key, count, sum) in slots.iter().flatten() {
                let bits = edge_score(count, sum).to_bits();
                for x in [key >> 32, key & 0xFFFF_FFFF] {
                    if edge_score(count, sum) < t && best_score[x as usize] == bits {
                        best_key[x as usize] = best_key[x as usize].min(key);
                    }
                }
            }
            // Matching and the contraction's first step, per slot.
            let mut merges = 0;
            let mut rekeyed = Vec::new();
            for (e, slot) in slots.iter_mut().enumerate() {
                let Some((key, _, _)) = *slot else { continue };
                let (u, v) = (key >> 32, key & 0xFFFF_FFFF);
                let (best_u, best_v) = (best_key[u as usize], best_key[v as usize]);
                if best_u == key && best_v == key {
                    merges += 1;
                    parent[v as usize] = u;
                }
                let new_id = |x: u64, best: u64| {
                    let partner_best = if best == u64::MAX { u64::MAX } else { best_key[partner(x, best) as usize] };
                    mutual_merge(x, best, partner_best)
                };
                let ((a, merged_u), (b, merged_v)) = (new_id(u, best_u), new_id(v, best_v));
                if merged_u || merged_v {
                    match relabelled(a, b) {
                        Some((a, b)) => rekeyed.push((e, edge_key(a, b))),
                        None => *slot = None,
                    }
                }
            }
            // Second step: the smallest slot per new key collects the rest.
            let mut representative = BTreeMap::new();
            for &(e, key) in &rekeyed {
                representative.entry(key).or_insert(e);
            }
            for &(e, key) in &rekeyed {
                let rep = representative[&key];
                let (_, count, sum) = slots[e].unwrap();
                if rep == e {
                    slots[e] = Some((key, count, sum));
                } else {
                    let (rep_key, rep_count, rep_sum) = slots[rep].unwrap();
                    slots[rep] = Some((rep_key, rep_count + count, rep_sum + sum));
                    slots[e] = None;
                }
            }
            let mut keys: Vec<u64> = slots.iter().flatten().map(|s| s.0).collect();
            let n_live = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), n_live, "two edges share a key after a round");
            if merges == 0 {
                break;
            }
        }
        let root = |mut x: u64| {
            while parent[x as usize] != x {
                x = parent[x as usize];
            }
            x
        };
        let regions = (0..n_nodes).map(root).collect();
        let mut graph: Vec<_> = slots
            .iter()
            .flatten()
            .map(|&(key, c, s)| (key >> 32, key & 0xFFFF_FFFF, edge_score(c, s).to_bits()))
            .collect();
        graph.sort();
        trace.push((regions, graph));
    }
    trace
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn fused_round_model_equals_the_cpu_parhac(
        seed in 0u64..1_000_000,
        n_nodes in 3u64..80, // node 0 stays unconnected, as the background
        density in 1usize..6,
        levels in prop::sample::select(vec![0u64, 2, 7, 255]),
    ) {
        let edges = random_graph(seed, n_nodes, n_nodes as usize * density, levels);
        prop_assert_eq!(model_trace(n_nodes, &edges), cpu_trace(n_nodes, &edges));
    }
}
