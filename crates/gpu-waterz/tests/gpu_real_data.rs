//! The GPU watershed and region graph against the reference on the real
//! volumes in `../shared/data` (or `GPU_WATERZ_DATA`); a GPU test, and the
//! data must be there.

mod common;

use common::data_file;
use gpu_waterz_cli::io::{read_hdf5, Volume};
use gpu_waterz_core::affinities::from_inside_probability;
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_graph::{gpu as graph_gpu, region_graph};
use gpu_waterz_runtime::testing::gpu;
use gpu_waterz_runtime::Gpu;
use gpu_waterz_watershed::gpu::DeviceAffinities;
use gpu_waterz_watershed::{gpu as ws_gpu, reference};
use ndarray::{s, Array4, ArrayD, Ix3, Ix4};
use std::io::Write;

const PARAMS: WatershedParams = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };

fn f32_volume(v: Volume) -> ArrayD<f32> {
    match v {
        Volume::F32(a) => a,
        other => panic!("expected float32, got {}", other.dtype()),
    }
}

fn compare(g: &Gpu, affs: &Array4<f32>, what: &str) {
    let graph = AffinityGraph::from_f32(affs.view()).unwrap();
    let expected = reference::watershed(&graph, PARAMS);
    let device = DeviceAffinities::upload_f32(g, affs.as_slice().unwrap(), graph.dims()).unwrap();
    let fragments = ws_gpu::watershed(g, &device, PARAMS).unwrap();
    assert_eq!(fragments.download(g).unwrap(), expected.labels, "{what}: watershed labels");
    let expected_graph = region_graph(&graph, expected.labels.view(), expected.n_fragments + 1);
    let got = graph_gpu::region_graph(g, &device, &fragments).unwrap().download(g).unwrap();
    assert_eq!(got.edges, expected_graph.edges, "{what}: edges");
    assert_eq!(got.stats, expected_graph.contact_stats(), "{what}: statistics");
    let _ = writeln!(
        std::io::stderr(),
        "{what}: {} fragments, {} edges, {} plateau levels: GPU = reference",
        expected.n_fragments,
        got.edges.len(),
        fragments.plateau_levels()
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored (cargo xtask gpu-test)"]
fn real_volumes_match_the_reference() {
    let g = gpu();
    for name in ["gala-em-train.h5", "gala-em-test.h5"] {
        let path = data_file(name);
        let p = f32_volume(read_hdf5(&path, "boundary_probability").unwrap()).into_dimensionality::<Ix3>().unwrap();
        compare(&g, &from_inside_probability(&p.mapv(|v| 1.0 - v)), name);
    }
    let path = data_file("snemi-mini.h5");
    let q = f32_volume(read_hdf5(&path, "inside_probability").unwrap()).into_dimensionality::<Ix3>().unwrap();
    compare(&g, &from_inside_probability(&q), "snemi-mini");
    let path = data_file("piriform-affinities.h5");
    let a = f32_volume(read_hdf5(&path, "affinities").unwrap()).into_dimensionality::<Ix4>().unwrap();
    compare(&g, &a.as_standard_layout().to_owned(), "piriform");
    let path = data_file("pinky40-labels-512.h5");
    let labels =
        read_hdf5(&path, "labels").unwrap().into_labels("pinky40").unwrap().into_dimensionality::<Ix3>().unwrap();
    let crop = labels.slice(s![..64, ..256, ..256]).mapv(|l| l as u32);
    let affs = gpu_waterz_core::synthetic::cell_affinities(40, &crop, 0.3);
    compare(&g, &affs, "pinky40 crop, cell-like affinities");
    let quantized = affs.mapv(|v| (v * 255.0).round() / 255.0);
    compare(&g, &quantized, "pinky40 crop, uint8-quantized");
}
