//! The GPU pipeline against the CPU: on every volume its regions, merges
//! and remaining graphs equal the CPU ParHAC's on the same fragments and
//! graph (ties included); on tie-free volumes its segmentations equal the
//! reference's serial order in exact arithmetic, label for label; on the
//! real volumes (8-bit data, exact ties) the VOI to stock waterz's order is
//! measured and bounded. GPU tests: ignored without `--include-ignored`.

mod common;

use common::data_file;
use gpu_waterz::{Agglomeration, Backend, Config, ErrorKind, HostFinish};
use gpu_waterz_cli::io::{read_hdf5, Volume};
use gpu_waterz_core::affinities::from_inside_probability;
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels};
use gpu_waterz_core::{AffinityGraph, Arithmetic, ScoringFunction, WatershedParams};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::cpu::{Edge, Parhac};
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_runtime::Gpu;
use ndarray::{Array3, Array4, Ix3, Ix4};
use std::io::Write;

const THRESHOLDS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };

/// The thresholds, exact arithmetic, history and graph when asked for.
fn config(history: bool) -> Config {
    Config::new(&THRESHOLDS).arithmetic(Arithmetic::Exact).merge_history(history).region_graph(history)
}

/// `config` on the GPU `g`.
fn on_gpu(g: &Gpu, config: Config) -> Config {
    config.backend(Backend::Gpu(g.clone()))
}

/// The GPU pipeline in rounds only ([`HostFinish::NEVER`]: the CPU ParHAC
/// has no serial finish) against the CPU ParHAC on the reference's
/// fragments and graph: equal segmentations, merges and graphs at every
/// threshold. Returns the GPU's segmentations.
fn against_cpu_parhac(g: &Gpu, affs: &Array4<f32>, epsilon: f64, what: &str) -> Vec<Array3<u64>> {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let fragments = gpu_waterz_watershed::watershed(&graph, PARAMS);
    let dense = DenseLabels::new(fragments.labels.view()).unwrap();
    let rg = region_graph(&graph, fragments.labels.view(), dense.n_nodes());
    let edges: Vec<Edge> =
        rg.edges.iter().zip(rg.contact_stats()).map(|(&[u, v], stats)| Edge { u, v, stats }).collect();
    let mut cpu = Parhac::new(rg.n_nodes, edges, epsilon).unwrap();
    let rounds_only = on_gpu(g, config(true)).epsilon(epsilon).host_finish(HostFinish::NEVER);
    let mut gpu = Agglomeration::new(&graph, rounds_only).unwrap();
    let mut segmentations = Vec::new();
    for t in THRESHOLDS {
        let got = gpu.next_threshold().unwrap().unwrap();
        let mut history = Vec::new();
        cpu.merge_until(t as f32, Some(&mut history));
        let roots: Vec<u64> = (0..rg.n_nodes).map(|i| cpu.region_of(i)).collect();
        let expected = fragments.labels.mapv(|l| roots[l as usize]);
        assert_eq!(got.segmentation, expected, "{what}, ε {epsilon}, threshold {t}: segmentation");
        assert_eq!(got.merge_history.unwrap(), history, "{what}, ε {epsilon}, threshold {t}: merges");
        let graph_now: Vec<(u64, u64, u64)> = cpu.edges().iter().map(|e| (e.u, e.v, e.score().to_bits())).collect();
        let got_graph: Vec<(u64, u64, u64)> =
            got.region_graph.unwrap().iter().map(|e| (e.u, e.v, e.score.to_bits())).collect();
        assert_eq!(got_graph, graph_now, "{what}, ε {epsilon}, threshold {t}: region graph");
        segmentations.push(got.segmentation);
    }
    let _ = writeln!(
        std::io::stderr(),
        "{what}, ε {epsilon}: {} fragments, {} edges, {} GPU rounds: GPU = CPU ParHAC at {THRESHOLDS:?}",
        gpu.n_fragments(),
        gpu.gpu_stats().unwrap().n_edges,
        gpu.gpu_stats().unwrap().rounds.len()
    );
    segmentations
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn tie_free_volumes_equal_the_serial_reference() {
    let g = gpu();
    for seed in 0..3 {
        let labels = cell_labels(seed, (16, 64, 64), 30);
        let affs = cell_affinities(seed, &labels, 0.3);
        let gpu_segs = against_cpu_parhac(&g, &affs, 0.0, &format!("cells seed {seed}"));
        let graph = AffinityGraph::from_f32(affs.view()).unwrap();
        // Merge history, but no region graph: extracting waterz's region
        // graph re-scores stale edges and so changes its later order (stock
        // waterz does the same; the CPU backend is bit-identical to it).
        let serial_config = config(true).region_graph(false).backend(Backend::Cpu);
        let mut serial = Agglomeration::new(&graph, serial_config).unwrap();
        // With the serial finish on the host (the default) too: the same
        // segmentations, merges (as sets: the order differs) and graphs.
        let mut hybrid = Agglomeration::new(&graph, on_gpu(&g, config(true))).unwrap();
        let mut rounds_only =
            Agglomeration::new(&graph, on_gpu(&g, config(true)).host_finish(HostFinish::NEVER)).unwrap();
        let key = |m: &gpu_waterz::Merge| (m.a, m.b, m.c, m.score.to_bits());
        for (t, seg) in THRESHOLDS.iter().zip(&gpu_segs) {
            let expected = serial.next_threshold().unwrap().unwrap();
            assert_eq!(seg, &expected.segmentation, "seed {seed}, threshold {t}: GPU = serial reference");
            let got = hybrid.next_threshold().unwrap().unwrap();
            assert_eq!(got.segmentation, expected.segmentation, "seed {seed}, threshold {t}: serial finish");
            let mut ours: Vec<_> = got.merge_history.unwrap().iter().map(key).collect();
            let mut theirs: Vec<_> = expected.merge_history.unwrap().iter().map(key).collect();
            ours.sort_unstable();
            theirs.sort_unstable();
            assert_eq!(ours, theirs, "seed {seed}, threshold {t}: serial finish's merges");
            let graph_of = |r: Option<Vec<gpu_waterz::ScoredEdge>>| -> Vec<(u64, u64, u64)> {
                r.unwrap().iter().map(|e| (e.u, e.v, e.score.to_bits())).collect()
            };
            // The remaining graph as the rounds leave it (which equals the
            // CPU ParHAC's, checked above; waterz's own listing differs).
            let in_rounds = rounds_only.next_threshold().unwrap().unwrap();
            assert_eq!(
                graph_of(got.region_graph),
                graph_of(in_rounds.region_graph),
                "seed {seed}, threshold {t}: graph"
            );
        }
        let stats = hybrid.gpu_stats().unwrap();
        assert!(stats.rounds.iter().any(|r| r.on_host), "the serial finish ran");
        against_cpu_parhac(&g, &affs, 0.1, &format!("cells seed {seed}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn user_fragments_uint8_and_reruns() {
    let g = gpu();
    let labels = cell_labels(4, (12, 48, 48), 25);
    let affs = cell_affinities(4, &labels, 0.3);
    let affs_u8 = affs.mapv(|v| (v * 255.0).round() as u8);
    let graph = AffinityGraph::from_u8(affs_u8.view()).unwrap();
    // User fragments with sparse ids: results come back in those ids.
    let fragments = labels.mapv(|l| if l == 0 { 0 } else { 1000 + 7 * l as u64 });
    let gt = labels.mapv(u64::from);
    let run = |fragments: Option<&Array3<u64>>| {
        let mut config = on_gpu(&g, config(true)).ground_truth(gt.clone());
        if let Some(f) = fragments {
            config = config.fragments(f.clone());
        }
        let r = Agglomeration::new(&graph, config).unwrap();
        r.map(|r| r.unwrap()).collect::<Vec<_>>()
    };
    let first = run(Some(&fragments));
    for r in &first {
        assert!(r.segmentation.iter().all(|&l| l == 0 || (l >= 1000 && (l - 1000) % 7 == 0)), "ids are the user's");
        assert!(r.metrics.is_some());
    }
    let cpu_config = config(false).fragments(fragments.clone()).ground_truth(gt.clone()).backend(Backend::Cpu);
    let mut cpu = Agglomeration::new(&graph, cpu_config).unwrap();
    let cpu_first = cpu.next_threshold().unwrap().unwrap();
    assert_eq!(first[0].segmentation, cpu_first.segmentation, "user fragments at 0.1");
    // Reruns, watershed included, give the same bytes.
    let a = run(None);
    for _ in 0..4 {
        let b = run(None);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.segmentation, y.segmentation);
            assert_eq!(x.merge_history, y.merge_history);
        }
    }
}

/// The GPU backend relabelling one host volume in place gives the new
/// volumes' segmentations and metrics; a volume of another shape is an
/// error.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn relabelling_in_place_on_the_gpu_equals_new_volumes() {
    let g = gpu();
    let labels = cell_labels(6, (12, 40, 40), 20);
    let affs = cell_affinities(6, &labels, 0.3);
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let gt = labels.mapv(u64::from);
    let config = on_gpu(&g, config(true)).ground_truth(gt);
    let arrays: Vec<_> = Agglomeration::new(&graph, config.clone()).unwrap().map(|r| r.unwrap()).collect();
    let mut run = Agglomeration::new(&graph, config).unwrap();
    let mut wrong = Array3::<u64>::zeros((12, 40, 39));
    assert_eq!(run.next_threshold_in_place(wrong.view_mut()).unwrap_err().kind(), ErrorKind::InvalidInput);
    let mut volume = Array3::<u64>::zeros((12, 40, 40));
    for expected in &arrays {
        let r = run.next_threshold_in_place(volume.view_mut()).unwrap().unwrap();
        assert_eq!(volume, expected.segmentation, "threshold {}", r.threshold);
        assert_eq!(r.metrics, expected.metrics);
        assert_eq!(r.merge_history, expected.merge_history);
    }
    assert!(run.next_threshold_in_place(volume.view_mut()).unwrap().is_none());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn unsupported_options_are_errors() {
    let g = gpu();
    let affs = Array4::<f32>::from_elem((3, 2, 3, 4), 0.5);
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let unsupported = |config: Config| Agglomeration::new(&graph, on_gpu(&g, config)).unwrap_err().kind();
    assert_eq!(unsupported(config(false).scoring(ScoringFunction::MaxAffinity)), ErrorKind::Unsupported);
    assert_eq!(unsupported(config(false).discretize_queue(256)), ErrorKind::Unsupported);
    assert_eq!(unsupported(config(false).arithmetic(Arithmetic::Waterz)), ErrorKind::Unsupported);
    assert_eq!(unsupported(config(false).epsilon(-1.0)), ErrorKind::InvalidInput);
    let bad_gt = Array3::<u64>::zeros((2, 3, 5));
    assert_eq!(unsupported(config(false).ground_truth(bad_gt)), ErrorKind::InvalidInput);
    // Auto runs what the GPU cannot on the CPU, and says why.
    let run = Agglomeration::new(&graph, config(false).scoring(ScoringFunction::MaxAffinity)).unwrap();
    assert_eq!(run.backend(), gpu_waterz::BackendKind::Cpu);
    assert!(run.backend_note().unwrap().contains("mean affinity"), "{:?}", run.backend_note());
    // ... and takes the GPU otherwise.
    assert_eq!(Agglomeration::new(&graph, config(false)).unwrap().backend(), gpu_waterz::BackendKind::Gpu);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn device_affinities_are_checked_as_host_ones_are() {
    let g = gpu();
    let dims = gpu_waterz::Dims3::new(2, 3, 40);
    let start = |affs: &Array4<f32>| {
        let device = gpu_waterz::DeviceAffinities::upload_f32(&g, affs.as_slice().unwrap(), dims).unwrap();
        Agglomeration::from_device(&device, &g, on_gpu(&g, config(false)))
    };
    let mut affs = Array4::<f32>::from_elem((3, 2, 3, 40), 0.5);
    assert!(start(&affs).unwrap().warnings().is_empty());
    // Values outside [0, 1]: a warning with their number, as for host ones.
    affs[[1, 0, 2, 7]] = 1.5;
    affs[[2, 1, 0, 39]] = -0.25;
    let host = Agglomeration::new(&AffinityGraph::from_f32(affs.view()).unwrap(), on_gpu(&g, config(false))).unwrap();
    let run = start(&affs).unwrap();
    assert_eq!(run.warnings(), host.warnings());
    assert!(run.warnings()[0].starts_with("2 affinities lie outside [0, 1]"), "{:?}", run.warnings());
    // NaN and infinity: the error that host values give, at the first one.
    for (bad, what) in [(f32::NAN, "NaN"), (f32::INFINITY, "infinite"), (f32::NEG_INFINITY, "infinite")] {
        let mut affs = affs.clone();
        affs[[2, 1, 2, 33]] = bad;
        affs[[1, 1, 0, 5]] = bad;
        let device = start(&affs).unwrap_err();
        let host = AffinityGraph::from_f32(affs.view()).unwrap_err();
        assert_eq!(device.kind(), ErrorKind::InvalidInput);
        assert_eq!(device.to_string(), gpu_waterz::Error::from(host).to_string(), "{what}");
        assert!(device.to_string().contains(what), "{device}");
    }
}

fn f32_volume(v: Volume) -> ndarray::ArrayD<f32> {
    match v {
        Volume::F32(a) => a,
        other => panic!("expected float32, got {}", other.dtype()),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn real_volumes_equal_the_cpu_parhac_and_stay_close_to_waterz() {
    let g = gpu();
    let mut volumes: Vec<(String, Array4<f32>)> = Vec::new();
    for name in ["gala-em-train.h5", "gala-em-test.h5"] {
        let path = data_file(name);
        let p = f32_volume(read_hdf5(&path, "boundary_probability").unwrap()).into_dimensionality::<Ix3>().unwrap();
        volumes.push((name.into(), from_inside_probability(&p.mapv(|v| 1.0 - v))));
    }
    let path = data_file("snemi-mini.h5");
    let q = f32_volume(read_hdf5(&path, "inside_probability").unwrap()).into_dimensionality::<Ix3>().unwrap();
    volumes.push(("snemi-mini".into(), from_inside_probability(&q)));
    let path = data_file("piriform-affinities.h5");
    let a = f32_volume(read_hdf5(&path, "affinities").unwrap()).into_dimensionality::<Ix4>().unwrap();
    volumes.push(("piriform".into(), a.as_standard_layout().to_owned()));
    for (name, affs) in volumes {
        let gpu_segs = against_cpu_parhac(&g, &affs, 0.0, &name);
        // Stock waterz's order (the reference in waterz arithmetic).
        let graph = AffinityGraph::from_f32(affs.view()).unwrap();
        let waterz_order = config(false).arithmetic(Arithmetic::Waterz).backend(Backend::Cpu);
        let mut waterz = Agglomeration::new(&graph, waterz_order).unwrap();
        // What users run: the default schedule, with the serial finish.
        let mut default = Agglomeration::new(&graph, on_gpu(&g, config(false))).unwrap();
        let (mut worst, mut worst_default) = (0.0f64, 0.0f64);
        for seg in &gpu_segs {
            let w = waterz.next_threshold().unwrap().unwrap();
            let m = gpu_waterz_eval::evaluate(seg.view(), w.segmentation.view()).unwrap();
            worst = worst.max(m.voi_split + m.voi_merge);
            let d = default.next_threshold().unwrap().unwrap();
            let m = gpu_waterz_eval::evaluate(d.segmentation.view(), w.segmentation.view()).unwrap();
            worst_default = worst_default.max(m.voi_split + m.voi_merge);
        }
        let _ = writeln!(
            std::io::stderr(),
            "{name}: largest VOI between the GPU and waterz's order {worst:.2e} bits (rounds only), {worst_default:.2e} bits (with the serial finish)"
        );
        assert!(worst < 0.05, "{name}: the GPU is {worst} bits from waterz's order");
        assert!(worst_default < 0.05, "{name}: the GPU (serial finish) is {worst_default} bits from waterz's order");
    }
}
