//! The main job from a downstream crate, through the public API only:
//! affinities in, one segmentation and its scores per threshold out, on the
//! GPU when there is one (`Backend::Auto`, the default), else on the CPU.
#![forbid(unsafe_code)]

use gpu_waterz::core::synthetic::{cell_affinities, cell_labels};
use gpu_waterz::{AffinityGraph, Agglomeration, Config};

fn main() -> Result<(), gpu_waterz::Error> {
    let truth = cell_labels(7, (32, 96, 96), 60);
    let affinities = cell_affinities(7, &truth, 0.25);
    let config = Config::new(&[0.3, 0.5, 0.7]).ground_truth(truth.mapv(u64::from));
    let run = Agglomeration::new(&AffinityGraph::from_f32(affinities.view())?, config)?;
    println!("backend: {}{}", run.backend(), run.backend_note().map(|n| format!(" ({n})")).unwrap_or_default());
    for result in run {
        let result = result?;
        let voi = result.metrics.expect("ground truth was given");
        println!("threshold {}: VOI split {:.4}, merge {:.4}", result.threshold, voi.voi_split, voi.voi_merge);
    }
    Ok(())
}
