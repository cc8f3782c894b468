//! The GPU ParHAC against the CPU ParHAC (and so, at ε = 0, against
//! waterz's serial order, which the CPU ParHAC's own tests tie it to):
//! in rounds only ([`HostFinish::NEVER`]), the same regions, merges, rounds
//! and remaining graph at every threshold, ties included; with the serial
//! finish on the host (the default), the same regions, merges and graph as
//! waterz's serial order on tie-free input, on graphs built to hurt
//! merging in rounds; every rerun identical; malformed input refused.

use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::Dims3;
use gpu_waterz_graph::gpu::DeviceEdges;
use gpu_waterz_graph::GraphError;
use gpu_waterz_parhac::cpu::{Edge, Parhac};
use gpu_waterz_parhac::ParhacError;
use gpu_waterz_watershed::gpu::DeviceFragments;

/// The tests' random graphs: up to 20 contacts per edge.
fn random_graph(seed: u64, n_nodes: u64, n_edges: usize, levels: u64) -> Vec<Edge> {
    gpu_waterz_parhac::cpu::random_graph(seed, n_nodes, n_edges, 20, levels)
}
use gpu_waterz_parhac::gpu::{segment_u64, GpuParhac, HostFinish};
use gpu_waterz_parhac::{IterativeMerging, Merge};
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_runtime::Gpu;

const THRESHOLDS: [f32; 6] = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0];

/// The edges over nodes `0..n_nodes`, checked and uploaded.
fn upload(g: &Gpu, edges: &[Edge], n_nodes: u64) -> DeviceEdges {
    let pairs: Vec<[u64; 2]> = edges.iter().map(|e| [e.u, e.v]).collect();
    let stats: Vec<_> = edges.iter().map(|e| e.stats).collect();
    DeviceEdges::upload(g, &pairs, &stats, n_nodes).unwrap()
}

/// Device fragments holding `labels` (a volume of one row).
fn fragments(g: &Gpu, labels: &[u32], n_fragments: u64) -> DeviceFragments {
    let dims = Dims3::new(1, 1, labels.len() as u64);
    DeviceFragments::from_labels(g, g.upload(labels).unwrap(), dims, n_fragments).unwrap()
}

/// Everything observable after each threshold.
type Trace = Vec<(Vec<u32>, Vec<Merge>, Vec<(u64, u64, u64)>)>;

/// The GPU's trace; without `history` (at ε = 0 the rounds then run in
/// four fused launches) the merge lists are left empty.
fn gpu_trace(g: &Gpu, n_nodes: u64, edges: &[Edge], epsilon: f64, history: bool) -> (Trace, usize) {
    gpu_trace_with(g, n_nodes, edges, epsilon, history, HostFinish::NEVER)
}

/// [`gpu_trace`] with a serial-finish policy.
fn gpu_trace_with(
    g: &Gpu,
    n_nodes: u64,
    edges: &[Edge],
    epsilon: f64,
    history: bool,
    host_finish: HostFinish,
) -> (Trace, usize) {
    let mut parhac =
        GpuParhac::new(g, upload(g, edges, n_nodes), epsilon, history).unwrap().with_host_finish(host_finish);
    let mut trace = Vec::new();
    for t in THRESHOLDS {
        let start = parhac.history_len();
        parhac.merge_until(t).unwrap();
        let roots = g.download(&parhac.roots().unwrap()).unwrap();
        let graph = parhac.region_graph().unwrap().iter().map(|e| (e.u, e.v, e.score.to_bits())).collect();
        let merges = if history { parhac.history_since(start).unwrap() } else { Vec::new() };
        trace.push((roots[..n_nodes as usize].to_vec(), merges, graph));
    }
    (trace, parhac.rounds().len())
}

/// The CPU trace with the merge lists dropped, to compare with a GPU run
/// without history.
fn without_merges(trace: &Trace) -> Trace {
    trace.iter().map(|(roots, _, graph)| (roots.clone(), Vec::new(), graph.clone())).collect()
}

fn cpu_trace(n_nodes: u64, edges: &[Edge], epsilon: f64) -> (Trace, usize) {
    let mut parhac = Parhac::new(n_nodes, edges.to_vec(), epsilon).unwrap();
    let mut trace = Vec::new();
    for t in THRESHOLDS {
        let mut history = Vec::new();
        parhac.merge_until(t, Some(&mut history));
        let roots = (0..n_nodes).map(|i| parhac.region_of(i) as u32).collect();
        let graph = parhac.edges().iter().map(|e| (e.u, e.v, e.score().to_bits())).collect();
        trace.push((roots, history, graph));
    }
    (trace, parhac.rounds().len())
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn random_graphs_equal_the_cpu_parhac() {
    let g = gpu();
    let mut cases = 0;
    for seed in 0..120u64 {
        let n_nodes = 3 + seed % 60;
        let density = 1 + (seed % 5) as usize;
        let levels = [0, 2, 7, 255][(seed % 4) as usize];
        let edges = random_graph(seed, n_nodes, n_nodes as usize * density, levels);
        for epsilon in [0.0, 0.05, 0.5] {
            let (expected, cpu_rounds) = cpu_trace(n_nodes, &edges, epsilon);
            let (got, gpu_rounds) = gpu_trace(&g, n_nodes, &edges, epsilon, true);
            assert_eq!(gpu_rounds, cpu_rounds, "seed {seed}, ε {epsilon}: rounds");
            for (i, (a, b)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(a.0, b.0, "seed {seed}, ε {epsilon}, threshold {}: regions", THRESHOLDS[i]);
                assert_eq!(a.1, b.1, "seed {seed}, ε {epsilon}, threshold {}: merges", THRESHOLDS[i]);
                assert_eq!(a.2, b.2, "seed {seed}, ε {epsilon}, threshold {}: region graph", THRESHOLDS[i]);
            }
            // Without history the rounds take another path at ε = 0.
            let (got, gpu_rounds) = gpu_trace(&g, n_nodes, &edges, epsilon, false);
            assert_eq!(gpu_rounds, cpu_rounds, "seed {seed}, ε {epsilon}, no history: rounds");
            assert!(got == without_merges(&expected), "seed {seed}, ε {epsilon}, no history: GPU differs");
            cases += 1;
        }
    }
    eprintln!("{cases} graphs × {} thresholds: GPU ParHAC = CPU ParHAC", THRESHOLDS.len());
}

/// Graphs large enough for the slots to be compacted and edges parked
/// (from 2^14 slots), with ties and without.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn large_graphs_with_compaction_equal_the_cpu_parhac() {
    let g = gpu();
    for (seed, levels, epsilon) in [(1u64, 0u64, 0.0), (2, 7, 0.0), (3, 0, 0.05), (4, 255, 0.0)] {
        let n_nodes = 12_000;
        let edges = random_graph(seed, n_nodes, 60_000, levels);
        let (expected, cpu_rounds) = cpu_trace(n_nodes, &edges, epsilon);
        let (got, gpu_rounds) = gpu_trace(&g, n_nodes, &edges, epsilon, true);
        assert_eq!(gpu_rounds, cpu_rounds, "seed {seed}: rounds");
        assert!(got == expected, "seed {seed}, levels {levels}, ε {epsilon}: GPU differs from the CPU ParHAC");
        let (got, gpu_rounds) = gpu_trace(&g, n_nodes, &edges, epsilon, false);
        assert_eq!(gpu_rounds, cpu_rounds, "seed {seed}, no history: rounds");
        assert!(got == without_merges(&expected), "seed {seed}, levels {levels}, ε {epsilon}, no history: GPU differs");
        eprintln!("{} edges, {levels} levels, ε {epsilon}: {gpu_rounds} rounds, GPU = CPU ParHAC", edges.len());
    }
}

/// The policies the tests run: rounds only, the default, the host at once
/// (every graph here is small), and after the first batch of rounds.
const POLICIES: [HostFinish; 6] = [
    HostFinish::NEVER,
    HostFinish { max_edges: 1 << 21, min_merges_per_round: 64, small_edges: 4096, slots_per_merge: 0 },
    HostFinish { max_edges: u64::MAX, min_merges_per_round: 0, small_edges: u64::MAX, slots_per_merge: 0 },
    HostFinish { max_edges: u64::MAX, min_merges_per_round: u64::MAX, small_edges: 0, slots_per_merge: 0 },
    // The hand-off by live slots too (the large contiguous volumes' setting),
    // and by live slots alone, early (one merge per 8 slots).
    HostFinish { max_edges: 1 << 21, min_merges_per_round: 64, small_edges: 4096, slots_per_merge: 1600 },
    HostFinish { max_edges: u64::MAX, min_merges_per_round: 0, small_edges: 0, slots_per_merge: 8 },
];

/// The GPU at ε = 0 with `policy` against waterz's serial order in exact
/// arithmetic: regions (both merge into the smaller id, so equal
/// partitions have equal ids), merges with their scores (as sets: the
/// order differs), and the remaining graph, at every threshold.
fn check_against_serial(g: &Gpu, name: &str, n_nodes: u64, edges: &[Edge], policy: HostFinish) -> (usize, usize) {
    let mut serial = IterativeMerging::from_contact_stats(
        n_nodes,
        edges.iter().map(|e| [e.u, e.v]).collect(),
        edges.iter().map(|e| e.stats).collect(),
    );
    let (trace, _) = gpu_trace_with(g, n_nodes, edges, 0.0, true, policy);
    let mut parhac = GpuParhac::new(g, upload(g, edges, n_nodes), 0.0, false).unwrap().with_host_finish(policy);
    for (i, t) in THRESHOLDS.into_iter().enumerate() {
        let mut theirs = Vec::new();
        serial.merge_until(t, Some(&mut theirs));
        parhac.merge_until(t).unwrap();
        let serial_roots: Vec<u32> = (0..n_nodes).map(|i| serial.region_of(i) as u32).collect();
        let roots = g.download(&parhac.roots().unwrap()).unwrap();
        assert_eq!(&roots[..n_nodes as usize], &serial_roots[..], "{name}, {policy:?}, threshold {t}: regions");
        assert_eq!(trace[i].0, serial_roots, "{name}, {policy:?}, threshold {t}: regions with history");
        let key = |m: &Merge| (m.a, m.b, m.c, m.score.to_bits());
        let mut ours: Vec<_> = trace[i].1.iter().map(key).collect();
        let mut theirs: Vec<_> = theirs.iter().map(key).collect();
        ours.sort_unstable();
        theirs.sort_unstable();
        assert_eq!(ours, theirs, "{name}, {policy:?}, threshold {t}: merges");
        let graph: Vec<(u64, u64, u64)> =
            parhac.region_graph().unwrap().iter().map(|e| (e.u, e.v, e.score.to_bits())).collect();
        assert_eq!(graph, trace[i].2, "{name}, {policy:?}, threshold {t}: graph with and without history");
    }
    let on_host = parhac.rounds().iter().filter(|r| r.on_host).count();
    (parhac.rounds().len() - on_host, on_host)
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn epsilon_zero_equals_the_serial_order_on_tie_free_graphs() {
    let g = gpu();
    for seed in 0..40u64 {
        let n_nodes = 10 + seed * 7;
        let edges = random_graph(1000 + seed, n_nodes, n_nodes as usize * 3, 0);
        for policy in POLICIES {
            check_against_serial(&g, "random", n_nodes, &edges, policy);
        }
    }
}

/// Stars, long paths, a big hub among small regions, many equal hubs and
/// random graphs, small and large enough to compact: with the serial finish
/// and without, waterz's serial order; the serial finish takes the rounds
/// from thousands to a few.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn graphs_that_hurt_rounds_equal_the_serial_order() {
    let g = gpu();
    for (seed, scale) in [(1u64, 1u64), (2, 1), (3, 40)] {
        for (name, n_nodes, edges) in gpu_waterz_parhac::cpu::adversarial_graphs(seed, scale) {
            let (rounds, _) = check_against_serial(&g, name, n_nodes, &edges, HostFinish::NEVER);
            let (fewer, on_host) = check_against_serial(&g, name, n_nodes, &edges, HostFinish::default());
            for policy in &POLICIES[2..] {
                check_against_serial(&g, name, n_nodes, &edges, *policy);
            }
            eprintln!(
                "{name} ({} edges): {rounds} rounds without the serial finish, {fewer} rounds + {on_host} serial finishes with it",
                edges.len()
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn reruns_are_identical_and_segmentations_follow_the_regions() {
    let g = gpu();
    let n_nodes = 5000;
    let edges = random_graph(7, n_nodes, 20_000, 7);
    for history in [true, false] {
        for policy in POLICIES {
            let first = gpu_trace_with(&g, n_nodes, &edges, 0.0, history, policy);
            for _ in 0..4 {
                assert_eq!(gpu_trace_with(&g, n_nodes, &edges, 0.0, history, policy), first);
            }
        }
    }
    // A "volume" that holds every node id once, the background twice.
    let labels: Vec<u32> = [0].into_iter().chain(0..n_nodes as u32).chain([0]).collect();
    let volume = fragments(&g, &labels, n_nodes - 1);
    let mut parhac = GpuParhac::new(&g, upload(&g, &edges, n_nodes), 0.0, false).unwrap();
    parhac.merge_until(0.5).unwrap();
    let roots = g.download(&parhac.roots().unwrap()).unwrap();
    let seg = g.download(&parhac.segmentation(&volume).unwrap()).unwrap();
    let expected: Vec<u32> = labels.iter().map(|&l| roots[l as usize]).collect();
    assert_eq!(&seg[..labels.len()], &expected[..]);
    assert_eq!((seg[0], seg[labels.len() - 1]), (0, 0), "the background stays 0");
    // The same in u64 ids, through a table with one id per node.
    let table: Vec<u64> = roots[..n_nodes as usize].iter().map(|&r| 1000 + r as u64).collect();
    let seg64 = g.download(&segment_u64(&g, &volume, &g.upload(&table).unwrap()).unwrap()).unwrap();
    let expected: Vec<u64> = labels.iter().map(|&l| table[l as usize]).collect();
    assert_eq!(&seg64[..labels.len()], &expected[..]);
    // Fragments outside the graph's nodes, or a table too short for them,
    // are errors before anything is launched, not wild reads.
    let outside = fragments(&g, &[n_nodes as u32 + 5], n_nodes + 5);
    assert!(matches!(parhac.segmentation(&outside), Err(ParhacError::FragmentsOutsideGraph { .. })));
    let short = g.upload(&table[..table.len() - 1]).unwrap();
    assert!(matches!(segment_u64(&g, &volume, &short), Err(ParhacError::FragmentsOutsideGraph { .. })));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn rejects_bad_epsilon_and_empty_graphs_work() {
    let g = gpu();
    assert!(GpuParhac::new(&g, upload(&g, &[], 3), -1.0, false).is_err());
    assert!(GpuParhac::new(&g, upload(&g, &[], 3), f64::NAN, false).is_err());
    let mut parhac = GpuParhac::new(&g, upload(&g, &[], 3), 0.0, true).unwrap();
    assert_eq!(parhac.merge_until(0.5).unwrap(), 0);
    assert!(parhac.history_since(0).unwrap().is_empty());
    assert!(parhac.region_graph().unwrap().is_empty());
}

/// A malformed graph never reaches the kernels: the public API refuses it
/// with an error (the edge list's checks run on the host, or on keys
/// downloaded first), and ParHAC refuses node counts its u32 ids cannot
/// hold.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn malformed_graphs_are_refused() {
    let g = gpu();
    let edges = random_graph(3, 50, 200, 0);
    let pairs: Vec<[u64; 2]> = edges.iter().map(|e| [e.u, e.v]).collect();
    let stats: Vec<_> = edges.iter().map(|e| e.stats).collect();
    let invalid = |r: Result<DeviceEdges, GraphError>| matches!(r, Err(GraphError::InvalidGraph(_)));
    // Endpoints up to 49 over 40 nodes: per-node arrays would be overrun.
    assert!(invalid(DeviceEdges::upload(&g, &pairs, &stats, 40)));
    // An edge repeated, or reversed.
    let mut repeated = pairs.clone();
    repeated.insert(1, pairs[0]);
    assert!(invalid(DeviceEdges::upload(&g, &repeated, &[stats.clone(), vec![stats[0]]].concat(), 50)));
    let mut reversed = pairs.clone();
    reversed[3] = [pairs[3][1], pairs[3][0]];
    assert!(invalid(DeviceEdges::upload(&g, &reversed, &stats, 50)));
    // The same keys already on the device are checked the same way.
    let keys: Vec<u64> = pairs.iter().map(|&[u, v]| EdgeKey::new(u, v).bits()).collect();
    let counts: Vec<u64> = stats.iter().map(|s| s.contact_count).collect();
    let sums: Vec<u64> = stats.iter().map(|s| s.affinity_sum).collect();
    let on_device = || (g.upload(&keys).unwrap(), g.upload(&counts).unwrap(), g.upload(&sums).unwrap());
    let (k, c, s) = on_device();
    assert!(invalid(DeviceEdges::from_device(&g, k, c, s, keys.len() as u64, 40)));
    let (k, c, s) = on_device();
    let checked = DeviceEdges::from_device(&g, k, c, s, keys.len() as u64, 50).unwrap();
    assert_eq!(GpuParhac::new(&g, checked, 0.0, false).unwrap().n_nodes(), 50);
    // Node ids that fit a key but not ParHAC's u32 ids.
    let wide = DeviceEdges::upload(&g, &pairs, &stats, 1 << 32).unwrap();
    assert!(matches!(GpuParhac::new(&g, wide, 0.0, false), Err(ParhacError::TooManyNodes { .. })));
}
