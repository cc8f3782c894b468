//! `gpu-waterz demo`, the README's main job: decode a generated CNN-like
//! volume with ground truth on the GPU and print the time and VOI; without
//! a GPU, say so and run the CPU reference on a smaller volume.

use super::input::shape_zyx;
use anyhow::Result;
use gpu_waterz::{count_segments, AffinityGraph, Agglomeration, Backend, Config};
use gpu_waterz_cli::generate as generator;
use std::time::Instant;

/// The arguments of `gpu-waterz demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Volume shape z,y,x for the GPU (the CPU fallback halves each side).
    #[arg(long, value_delimiter = ',', default_value = "64,512,512")]
    shape: Vec<usize>,
    /// Merge thresholds.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.5")]
    thresholds: Vec<f64>,
}

pub fn run(args: &DemoArgs) -> Result<()> {
    let (zd, yd, xd) = shape_zyx(&args.shape)?;
    let thresholds = &args.thresholds;
    let gpu = gpu_waterz::Gpu::new(0);
    let shape = match &gpu {
        Ok(_) => (zd, yd, xd),
        Err(e) => {
            println!("No GPU: {e}");
            let half = |n: usize| (n / 2).max(1);
            println!("Running the CPU reference (stock waterz's exact algorithm) on a smaller volume instead.");
            (half(zd), half(yd), half(xd))
        }
    };
    let t = Instant::now();
    let labels = generator::neurite_labels(1, shape, (shape.0 * shape.1 * shape.2 / 20_000).max(8));
    let params = generator::GeneratorParams::default();
    let affs = generator::affinities(&labels, &params);
    let gt = labels.mapv(u64::from);
    let n = gt.len();
    println!(
        "Generated {}×{}×{} = {n} voxels of CNN-like affinities with ground truth in {:.1} s.",
        shape.0,
        shape.1,
        shape.2,
        t.elapsed().as_secs_f64()
    );
    let graph = AffinityGraph::from_f32(affs.view())?;
    let t = Instant::now();
    let backend = match &gpu {
        Ok(g) => format!("GPU ({})", g.name()?),
        Err(_) => "CPU reference".to_string(),
    };
    let backend_choice = match &gpu {
        Ok(g) => Backend::Gpu(g.clone()),
        Err(_) => Backend::Cpu,
    };
    let config = Config::new(thresholds).ground_truth(gt).backend(backend_choice);
    let mut run = Agglomeration::new(&graph, config)?;
    let mut lines = Vec::new();
    while let Some(r) = run.next_threshold()? {
        let m = r.metrics.expect("ground truth was given");
        lines.push(format!(
            "  threshold {}: {} segments, VOI split {:.4}, merge {:.4} (bits)",
            r.threshold,
            count_segments(&r.segmentation.view()),
            m.voi_split,
            m.voi_merge
        ));
    }
    let total = t.elapsed().as_secs_f64();
    let s = run.timings();
    let decode = s.watershed_s + s.region_graph_s + s.merging_s + s.extraction_s;
    println!(
        "{backend}: decoded {n} voxels at {} thresholds in {decode:.3} s ({:.1} Mvoxel/s; watershed {:.3} s, region graph {:.3} s, merging {:.3} s, segmentations {:.3} s); {total:.2} s with uploads and metrics.",
        thresholds.len(),
        n as f64 / decode / 1e6,
        s.watershed_s,
        s.region_graph_s,
        s.merging_s,
        s.extraction_s
    );
    for l in lines {
        println!("{l}");
    }
    Ok(())
}
