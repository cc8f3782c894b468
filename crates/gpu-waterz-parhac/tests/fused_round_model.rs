//! A host model of the GPU's ε = 0 round as `ph_best_score`,
//! `ph_best_key`, `ph_match_contract` and `ph_resolve` run it, against the
//! CPU ParHAC. The per-slot decisions are the kernels' own functions from
//! `gpu_waterz_abi::parhac`: the candidate scores (`candidate_bits`), and
//! each slot's match, parking and contraction from best keys alone
//! (`fused_slot`, through `mutual_merge`); only the edges with a merged
//! endpoint are deduplicated (the smallest slot index per key collects the
//! statistics). The regions and remaining graph must equal the CPU
//! ParHAC's at every threshold, ties included, and no two edges may ever
//! share a key. The GPU tests check the kernels themselves; this runs
//! without a GPU, in CI.

use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{candidate_bits, edge_score, fused_slot, Contraction, NO_SCORE};
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

/// One slot: key, contact count, fixed-point sum; `None` is a hole.
type Slot = Option<(EdgeKey, u64, u64)>;

fn model_trace(n_nodes: u64, edges: &[Edge]) -> Trace {
    let n = n_nodes as usize;
    let mut slots: Vec<Slot> =
        edges.iter().map(|e| Some((EdgeKey::new(e.u, e.v), e.stats.contact_count, e.stats.affinity_sum))).collect();
    let mut parent: Vec<u64> = (0..n_nodes).collect();
    let mut trace = Vec::new();
    for t in THRESHOLDS {
        let t = t as f64;
        loop {
            // Best scores, then best keys among equal scores (the minima
            // that `ph_best_score` and `ph_best_key` take with atomics).
            let (mut best_score, mut best_key) = (vec![NO_SCORE; n], vec![EdgeKey::EMPTY; n]);
            for &(key, count, sum) in slots.iter().flatten() {
                if let Some(bits) = candidate_bits(edge_score(count, sum), t) {
                    for x in key.endpoints() {
                        best_score[x as usize] = best_score[x as usize].min(bits);
                    }
                }
            }
            for &(key, count, sum) in slots.iter().flatten() {
                if let Some(bits) = candidate_bits(edge_score(count, sum), t) {
                    for x in key.endpoints() {
                        if best_score[x as usize] == bits {
                            best_key[x as usize] = best_key[x as usize].min(key);
                        }
                    }
                }
            }
            // Matching and the contraction's first step, per slot, as
            // `ph_match_contract` decides them.
            let mut merges = 0;
            let mut rekeyed = Vec::new();
            for (e, slot) in slots.iter_mut().enumerate() {
                let Some((key, _, _)) = *slot else { continue };
                let (best_u, best_v) = (best_key[key.u() as usize], best_key[key.v() as usize]);
                let fate = fused_slot(key, best_u, best_v, |x| best_key[x as usize]);
                if fate.matched {
                    merges += 1;
                    parent[key.v() as usize] = key.u();
                }
                match fate.contraction {
                    Contraction::Unchanged => {}
                    Contraction::Hole => *slot = None,
                    Contraction::Rekeyed(new_key) => rekeyed.push((e, new_key)),
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
            let mut keys: Vec<EdgeKey> = slots.iter().flatten().map(|s| s.0).collect();
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
        let mut graph: Vec<_> =
            slots.iter().flatten().map(|&(key, c, s)| (key.u(), key.v(), edge_score(c, s).to_bits())).collect();
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
