//! The ε trade-off of ParHAC, measured: for each volume and ε, the rounds
//! and the split/merge VOI against ground truth at thresholds 0.1 to 0.9,
//! next to stock waterz's (the CPU reference in waterz arithmetic, which is
//! bit-identical to stock waterz). Prints a Markdown table.
//!
//! Usage: `cargo run --release -p gpu-waterz-benches --bin epsilon_study [DATA_DIR]`

use anyhow::{Context, Result};
use gpu_waterz::{Agglomeration, Backend, Config};
use gpu_waterz_cli::io::{read_hdf5, Volume};
use gpu_waterz_core::affinities::from_inside_probability;
use gpu_waterz_core::synthetic::cell_affinities;
use gpu_waterz_core::{AffinityGraph, WatershedParams};
use gpu_waterz_graph::{region_graph, DenseLabels};
use gpu_waterz_parhac::cpu::{Edge, Parhac};
use ndarray::{s, Array3, Array4, Ix3};
use std::path::{Path, PathBuf};
use std::time::Instant;

const THRESHOLDS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
const EPSILONS: [f64; 7] = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5];

fn f32_3d(v: Volume) -> Result<Array3<f32>> {
    match v {
        Volume::F32(a) => Ok(a.into_dimensionality::<Ix3>()?),
        other => anyhow::bail!("expected float32, got {}", other.dtype()),
    }
}

/// A named volume: affinities and ground truth.
type Labelled = (String, Array4<f32>, Array3<u64>);

fn volumes(dir: &Path) -> Result<Vec<Labelled>> {
    let mut out = Vec::new();
    for name in ["gala-em-train.h5", "gala-em-test.h5"] {
        let path = dir.join(name);
        let p = f32_3d(read_hdf5(&path, "boundary_probability")?)?;
        let gt = read_hdf5(&path, "gt")?.into_labels(name)?.into_dimensionality::<Ix3>()?;
        out.push((name.to_string(), from_inside_probability(&p.mapv(|v| 1.0 - v)), gt));
    }
    let path = dir.join("snemi-mini.h5");
    let q = f32_3d(read_hdf5(&path, "inside_probability")?)?;
    let gt = read_hdf5(&path, "gt")?.into_labels("snemi")?.into_dimensionality::<Ix3>()?;
    out.push(("snemi-mini.h5".into(), from_inside_probability(&q), gt));
    let path = dir.join("pinky40-labels-512.h5");
    let labels = read_hdf5(&path, "labels")?.into_labels("pinky40")?.into_dimensionality::<Ix3>()?;
    let crop = labels.slice(s![..64, ..256, ..256]).to_owned();
    let affs = cell_affinities(40, &crop.mapv(|l| l as u32), 0.4);
    out.push(("pinky40 64x256x256, CNN-like".into(), affs, crop));
    Ok(out)
}

fn main() -> Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let params = WatershedParams { aff_threshold_low: 0.0001, aff_threshold_high: 0.9999 };
    println!("| volume | method | rounds | merge time | VOI split at 0.1 / 0.3 / 0.5 / 0.7 / 0.9 | VOI merge at 0.1 / 0.3 / 0.5 / 0.7 / 0.9 | worst deviation from waterz |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, affs, gt) in volumes(&dir).context("reading ../shared/data")? {
        let graph = AffinityGraph::from_f32(affs.view())?;
        let config = Config::new(&THRESHOLDS).ground_truth(gt.clone()).backend(Backend::Cpu);
        let mut waterz = Agglomeration::new(&graph, config)?;
        let mut reference = Vec::new();
        let t = Instant::now();
        while let Some(r) = waterz.next_threshold()? {
            reference.push(r.metrics.expect("ground truth given"));
        }
        let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" / ");
        let split: Vec<f64> = reference.iter().map(|m| m.voi_split).collect();
        let merge: Vec<f64> = reference.iter().map(|m| m.voi_merge).collect();
        println!(
            "| {name} | stock waterz (reference) | - | {:.3} s | {} | {} | - |",
            t.elapsed().as_secs_f64(),
            fmt(&split),
            fmt(&merge)
        );

        let fragments = gpu_waterz_watershed::watershed(&graph, params);
        let dense = DenseLabels::new(fragments.labels.view())?;
        let rg = region_graph(&graph, fragments.labels.view(), dense.n_nodes());
        let edges: Vec<Edge> =
            rg.edges.iter().zip(rg.contact_stats()).map(|(&[u, v], stats)| Edge { u, v, stats }).collect();
        for eps in EPSILONS {
            let mut parhac = Parhac::new(rg.n_nodes, edges.clone(), eps)?;
            let (mut s, mut m) = (Vec::new(), Vec::new());
            let mut merge_time = 0.0;
            for &t in &THRESHOLDS {
                let start = Instant::now();
                parhac.merge_until(t as f32, None);
                merge_time += start.elapsed().as_secs_f64();
                let regions: Vec<u64> = (0..rg.n_nodes).map(|i| parhac.region_of(i)).collect();
                let seg = fragments.labels.mapv(|l| regions[l as usize]);
                let metrics = gpu_waterz_eval::evaluate(seg.view(), gt.view())?;
                s.push(metrics.voi_split);
                m.push(metrics.voi_merge);
            }
            // Worst deviation: the larger of |Δ| / max(1 % of waterz, 0.005 bits).
            let worst = s
                .iter()
                .zip(&split)
                .chain(m.iter().zip(&merge))
                .map(|(a, b)| (a - b).abs() / (0.01 * b.abs()).max(0.005))
                .fold(0.0f64, f64::max);
            println!(
                "| {name} | ParHAC ε = {eps} | {} | {merge_time:.3} s | {} | {} | {worst:.2} of the allowance{} |",
                parhac.rounds().len(),
                fmt(&s),
                fmt(&m),
                if worst <= 1.0 { "" } else { " (outside)" }
            );
        }
    }
    Ok(())
}
