//! `gpu-waterz generate`: CNN-like affinities with ground truth, seeded and
//! deterministic (the generator is `gpu_waterz_cli::generate`).

use super::input::{read_labels, shape_zyx, sizes_zyx};
use super::outputs::Outputs;
use anyhow::Result;
use gpu_waterz_cli::generate as generator;
use gpu_waterz_cli::io::write_npy;
use std::path::PathBuf;

/// The arguments of `gpu-waterz generate`.
#[derive(clap::Args)]
pub struct GenerateArgs {
    /// Volume shape z,y,x.
    #[arg(long, value_delimiter = ',', required = true)]
    shape: Vec<usize>,
    /// Where to write the affinities (.npy, float32 or with --uint8 uint8).
    #[arg(long)]
    out_affinities: PathBuf,
    /// Where to write the ground-truth labels (.npy, uint64).
    #[arg(long)]
    out_ground_truth: PathBuf,
    /// Real labels to use (e.g. ../shared/data/pinky40-labels-512.h5:/labels),
    /// cropped from the origin and mirrored where the shape is larger;
    /// drifting-Voronoi neurites otherwise.
    #[arg(long)]
    labels: Option<String>,
    /// Number of neurites when no labels are given.
    #[arg(long, default_value_t = 60)]
    cells: usize,
    /// Labels from the implicit cell field (`ImplicitCells`: any block
    /// computable alone, for blockwise runs) instead; no merge or split
    /// bait.
    #[arg(long, conflicts_with = "labels")]
    implicit: bool,
    /// The implicit field's cell size z,y,x in voxels.
    #[arg(long, value_delimiter = ',', default_value = "48,24,24", requires = "implicit")]
    cell: Vec<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write uint8 affinities (k/255).
    #[arg(long)]
    uint8: bool,
}

pub fn run(args: &GenerateArgs) -> Result<()> {
    let shape = shape_zyx(&args.shape)?;
    let (affs, labels) = if args.implicit {
        let cell = sizes_zyx("--cell", &args.cell)?;
        let field = generator::ImplicitCells { seed: args.seed, cell };
        let params =
            generator::GeneratorParams { seed: args.seed, weak_spots: 0, false_walls: 0, ..Default::default() };
        field.block(&params, shape, (0, 0, 0), shape).map_err(anyhow::Error::msg)?
    } else {
        let labels = match &args.labels {
            Some(spec) => generator::crop_or_mirror(&read_labels(spec, "labels")?, shape),
            None => generator::neurite_labels(args.seed, shape, args.cells),
        };
        let params = generator::GeneratorParams { seed: args.seed, ..Default::default() };
        (generator::affinities(&labels, &params), labels)
    };
    let mut written = Outputs::default();
    if args.uint8 {
        write_npy(&args.out_affinities, &generator::quantize(&affs).view())?;
    } else {
        write_npy(&args.out_affinities, &affs.view())?;
    }
    written.push(args.out_affinities.clone());
    write_npy(&args.out_ground_truth, &ndarray::Zip::from(&labels).par_map_collect(|&l| u64::from(l)).view())?;
    written.keep();
    Ok(())
}
