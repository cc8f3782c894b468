//! The `gpu-waterz` command line: argument parsing and dispatch. Each
//! command lives in its module under `commands`; file formats and the data
//! generator are the library half of this crate (`gpu_waterz_cli`).

#![forbid(unsafe_code)]

mod commands;

use clap::{Parser, Subcommand};
use commands::{blockwise, demo, evaluate, generate, greyscale, ndimage, segment};
use std::process::ExitCode;

/// jemalloc, keeping freed pages for reuse a while (`.cargo/config.toml`):
/// the blockwise decode takes and frees block-sized buffers all the time.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "gpu-waterz", version, about = "Affinity graphs to neuron segmentations, with waterz's semantics")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log the library's events on stderr: -v info, -vv debug, -vvv trace.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log level of the library's events (error, warn, info, debug, trace); overrides -v.
    #[arg(long, global = true)]
    log_level: Option<tracing::Level>,
}

/// Logs the library's `tracing` events on stderr at the level asked for
/// (errors only by default: the commands print the library's warnings
/// themselves, once). At the debug level and below each line starts with
/// the seconds since the start, so that a log tells when each block's
/// stages ran, not only how long.
fn init_logging(cli: &Cli) {
    let level = cli.log_level.unwrap_or(match cli.verbose {
        0 => tracing::Level::ERROR,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    });
    let logs = tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr);
    let _ = if level >= tracing::Level::DEBUG {
        logs.with_timer(tracing_subscriber::fmt::time::uptime()).try_init()
    } else {
        logs.without_time().try_init()
    };
}

#[derive(Subcommand)]
enum Command {
    /// Segment an affinity graph at one or more thresholds.
    Segment(segment::SegmentArgs),
    /// Generate CNN-like affinities with ground truth (seeded, deterministic).
    Generate(generate::GenerateArgs),
    /// The main job on a fresh machine: decode a generated CNN-like volume
    /// with ground truth on the GPU and print the time and VOI; without a
    /// GPU, say so and run the CPU reference on a smaller volume.
    Demo(demo::DemoArgs),
    /// Compare a segmentation with ground truth; prints JSON.
    Evaluate(evaluate::EvaluateArgs),
    /// The greyscale watershed of a 2D image or 3D volume (markers, mask,
    /// watershed lines); prints JSON.
    Watershed(greyscale::WatershedArgs),
    /// scipy.ndimage's operators on a volume in a file: the exact distance
    /// transform and the grey-scale morphology; prints JSON.
    Ndimage(ndimage::NdimageArgs),
    /// Segment a volume larger than memory block by block (exact: the
    /// whole volume's fragments and segmentations) into a zarr group;
    /// prints JSON. CPU.
    Blockwise(blockwise::BlockwiseArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli);
    let result = match &cli.command {
        Command::Segment(args) => segment::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Evaluate(args) => evaluate::run(args),
        Command::Watershed(args) => greyscale::run(args),
        Command::Ndimage(args) => ndimage::run(args),
        Command::Blockwise(args) => blockwise::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-waterz: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
