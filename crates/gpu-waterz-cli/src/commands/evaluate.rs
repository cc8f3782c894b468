//! `gpu-waterz evaluate`: waterz's metrics of a segmentation against
//! ground truth, as JSON on stdout.

use super::input::read_labels;
use anyhow::Result;

/// The arguments of `gpu-waterz evaluate`.
#[derive(clap::Args)]
pub struct EvaluateArgs {
    /// The segmentation (uint32/uint64 labels).
    #[arg(long)]
    segmentation: String,
    /// The ground truth (uint32/uint64 labels, 0 ignored).
    #[arg(long)]
    ground_truth: String,
}

pub fn run(args: &EvaluateArgs) -> Result<()> {
    let seg = read_labels(&args.segmentation, "segmentation")?;
    let gt = read_labels(&args.ground_truth, "ground truth")?;
    let m = gpu_waterz_eval::evaluate(seg.view(), gt.view())?;
    println!("{}", serde_json::to_string_pretty(&m)?);
    Ok(())
}
