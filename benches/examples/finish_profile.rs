// Temporary: profile merge_components on a real graph.
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::cpu::Edge;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let threshold: f32 = std::env::args().nth(2).map_or(0.3, |s| s.parse().unwrap());
    let cache = format!("{path}.edges");
    let (n_nodes, edges) = if let Ok(b) = std::fs::read(&cache) {
        let n_nodes = u64::from_le_bytes(b[..8].try_into().unwrap());
        let edges: Vec<Edge> = b[8..].chunks_exact(32).map(|c| {
            let w = |k: usize| u64::from_le_bytes(c[8 * k..8 * k + 8].try_into().unwrap());
            Edge { u: w(0), v: w(1), stats: gpu_waterz_core::ContactStats { contact_count: w(2), affinity_sum: w(3) } }
        }).collect();
        (n_nodes, edges)
    } else {
    let bytes = std::fs::read(&path).unwrap();
    let header = u16::from_le_bytes([bytes[8], bytes[9]]) as usize + 10;
    let values: Vec<f32> = bytes[header..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    drop(bytes);
    let z = values.len() / 3 / 512 / 512;
    let affs = ndarray::Array4::from_shape_vec((3, z, 512, 512), values).unwrap();
    let graph_in = AffinityGraph::from_f32(affs.view()).unwrap();
    let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
    let fragments = gpu_waterz_watershed::watershed(&graph_in, params);
    let labels = DenseLabels::new(fragments.labels.view()).unwrap();
    let rg = region_graph(&graph_in, fragments.labels.view(), labels.n_nodes());
    let stats = rg.contact_stats();
    let edges: Vec<Edge> = rg.edges.iter().zip(&stats).map(|(e, s)| Edge { u: e[0], v: e[1], stats: *s }).collect();
    let mut out = rg.n_nodes.to_le_bytes().to_vec();
    for e in &edges { for w in [e.u, e.v, e.stats.contact_count, e.stats.affinity_sum] { out.extend(w.to_le_bytes()); } }
    std::fs::write(&cache, out).unwrap();
    (rg.n_nodes, edges)
    };
    eprintln!("{} nodes, {} edges", n_nodes, edges.len());
    let mut p = gpu_waterz_parhac::cpu::Parhac::new(n_nodes, edges.clone(), 0.0).unwrap();
    let mut rounds = 0;
    loop { let m = p.run_rounds(threshold, 1, None); rounds += 1; if m < 16 { break; } }
    let all: Vec<Edge> = p.edges().to_vec();
    let mut active = vec![false; n_nodes as usize];
    for e in all.iter().filter(|e| e.score() < threshold as f64) { active[e.u as usize] = true; active[e.v as usize] = true; }
    let mut id = vec![u64::MAX; n_nodes as usize];
    let mut next = 0;
    for x in 0..n_nodes as usize { if active[x] { id[x] = next; next += 1; } }
    let edges: Vec<Edge> = all.iter().filter(|e| active[e.u as usize] && active[e.v as usize]).map(|e| Edge { u: id[e.u as usize], v: id[e.v as usize], stats: e.stats }).collect();
    let n_nodes = next;
    eprintln!("{n_nodes} active nodes");
    eprintln!("after {rounds} rounds: {} edges", edges.len());
    for _ in 0..30 {
        let t = Instant::now();
        let f = gpu_waterz_parhac::serial::merge_components(n_nodes, &edges, threshold).unwrap();
        eprintln!("merge_components {:.4} s: {} merges, {} edges left", t.elapsed().as_secs_f64(), f.merges.len(), f.edges.len());
    }
}
