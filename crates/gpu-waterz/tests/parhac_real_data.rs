//! ParHAC at ε = 0 against waterz's serial order (the reference in exact
//! arithmetic). On CNN-like volumes (continuous values, no ties) the
//! partitions are equal at every threshold. The real volumes come from
//! 8-bit data and hold exactly tied boundary means, where the serial heap
//! and ParHAC's `(score, u, v)` order may break a tie differently; there
//! the test measures the difference as VOI between the two segmentations
//! and bounds it.

mod common;

use common::data_file;
use gpu_waterz_cli::io::{read_hdf5, Volume};
use gpu_waterz_core::affinities::from_inside_probability;
use gpu_waterz_core::synthetic::{cell_affinities, cell_labels};
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::cpu::{Edge, Parhac};
use gpu_waterz_parhac::IterativeMerging;
use ndarray::{Array3, Array4, Ix3};
use std::io::Write;

const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };

/// Runs both at thresholds 0.1 to 0.9; returns the largest VOI (split +
/// merge, bits) between their segmentations.
fn compare(affs: &Array4<f32>, what: &str) -> f64 {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let fragments = gpu_waterz_watershed::watershed(&graph, PARAMS);
    let dense = DenseLabels::new(fragments.labels.view()).unwrap();
    let rg = region_graph(&graph, fragments.labels.view(), dense.n_nodes());
    let stats = rg.contact_stats();
    let edges: Vec<Edge> = rg.edges.iter().zip(&stats).map(|(&[u, v], &s)| Edge { u, v, stats: s }).collect();
    let mut parhac = Parhac::new(rg.n_nodes, edges, 0.0).unwrap();
    let mut serial = IterativeMerging::from_contact_stats(rg.n_nodes, rg.edges.clone(), stats);
    let mut worst = 0.0f64;
    let mut differing = Vec::new();
    for t in [0.1f32, 0.3, 0.5, 0.7, 0.9] {
        parhac.merge_until(t, None);
        serial.merge_until(t, None);
        let a: Vec<u64> = (0..rg.n_nodes).map(|i| parhac.region_of(i)).collect();
        let b: Vec<u64> = (0..rg.n_nodes).map(|i| serial.region_of(i)).collect();
        let seg_a = fragments.labels.mapv(|l| a[l as usize]);
        let seg_b = fragments.labels.mapv(|l| b[l as usize] + 1);
        let m = gpu_waterz_eval::evaluate(seg_a.view(), seg_b.view()).unwrap();
        worst = worst.max(m.voi_split + m.voi_merge);
        differing.push(a.iter().zip(&b).filter(|(x, y)| x != y).count());
    }
    let _ = writeln!(
        std::io::stderr(),
        "{what}: {} fragments, {} edges, {} ParHAC rounds; fragments placed differently per threshold {differing:?}; largest VOI between the two {worst:.2e} bits",
        fragments.n_fragments,
        rg.n_edges(),
        parhac.rounds().len()
    );
    worst
}

fn f32_3d(v: Volume) -> Array3<f32> {
    match v {
        Volume::F32(a) => a.into_dimensionality::<Ix3>().unwrap(),
        other => panic!("expected float32, got {}", other.dtype()),
    }
}

#[test]
fn epsilon_zero_equals_the_serial_order_on_real_volumes() {
    for name in ["gala-em-train.h5", "gala-em-test.h5"] {
        let path = data_file(name);
        let p = f32_3d(read_hdf5(&path, "boundary_probability").unwrap());
        let voi = compare(&from_inside_probability(&p.mapv(|v| 1.0 - v)), name);
        assert!(voi < 0.05, "{name}: ParHAC at ε = 0 is {voi} bits from the serial order");
    }
    let path = data_file("snemi-mini.h5");
    let q = f32_3d(read_hdf5(&path, "inside_probability").unwrap());
    let voi = compare(&from_inside_probability(&q), "snemi-mini");
    assert!(voi < 0.05, "snemi-mini: ParHAC at ε = 0 is {voi} bits from the serial order");
}

#[test]
fn epsilon_zero_equals_the_serial_order_on_cnn_like_volumes() {
    for seed in 0..3 {
        let labels = cell_labels(seed, (16, 64, 64), 30);
        let voi = compare(&cell_affinities(seed, &labels, 0.3), &format!("cells seed {seed}"));
        assert_eq!(voi, 0.0, "tie-free volumes give the same partition");
    }
}
