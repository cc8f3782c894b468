//! The `gpu-waterz` command line.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use gpu_waterz::cpu::{count_segments, Agglomeration, Options};
use gpu_waterz::io::{write_atomically, write_npy, Volume, VolumeSource};
use gpu_waterz_core::params::check_watershed_thresholds;
use gpu_waterz_core::{AffinityGraph, Arithmetic, ScoringFunction};
use ndarray::{ArrayD, Ix3, Ix4};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "gpu-waterz", version, about = "Affinity graphs to neuron segmentations, with waterz's semantics")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The serial CPU reference, identical to stock waterz.
    Cpu,
    /// The GPU pipeline.
    Gpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ArithmeticArg {
    /// waterz's float32 arithmetic (bit-identical to stock waterz).
    Waterz,
    /// Exact integer / fixed-point statistics, as the GPU computes.
    Exact,
}

/// The arguments of `gpu-waterz segment`.
#[derive(clap::Args)]
struct SegmentArgs {
    /// Affinities (3, z, y, x): a .npy (float32, or uint8 meaning k/255) or file.h5:/dataset.
    #[arg(long)]
    affinities: String,
    /// Merge thresholds, comma-separated, ascending, in [0, 1].
    #[arg(long, value_delimiter = ',', required = true)]
    thresholds: Vec<f64>,
    /// Output folder for segmentation_<i>.npy and summary.json.
    #[arg(long)]
    out_dir: PathBuf,
    /// Where to run.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// Fragments (uint32/uint64 labels) to use instead of the watershed.
    #[arg(long)]
    fragments: Option<String>,
    /// Ground truth (uint32/uint64 labels, 0 ignored) for metrics in summary.json.
    #[arg(long)]
    ground_truth: Option<String>,
    /// Watershed: affinities at or below this never connect voxels.
    #[arg(long, default_value_t = 0.0001)]
    aff_threshold_low: f64,
    /// Watershed: affinities at or above this always connect voxels.
    #[arg(long, default_value_t = 0.9999)]
    aff_threshold_high: f64,
    /// Edge score: mean, max, min, quantile-<Q>[-<bins>][-noinit], or waterz's C++ spelling.
    #[arg(long, default_value = "mean")]
    scoring: String,
    /// Statistics arithmetic of the CPU reference.
    #[arg(long, value_enum, default_value = "waterz")]
    arithmetic: ArithmeticArg,
    /// Use waterz's bin queue with this many bins (0: its priority queue).
    #[arg(long, default_value_t = 0)]
    discretize_queue: u64,
    /// Also write merge_history_<i>.json per threshold.
    #[arg(long)]
    merge_history: bool,
    /// Also write region_graph_<i>.json (the remaining edges) per threshold.
    #[arg(long)]
    region_graph: bool,
    /// ParHAC's epsilon (GPU backend).
    #[arg(long)]
    epsilon: Option<f64>,
    /// No progress on stderr.
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Segment an affinity graph at one or more thresholds.
    Segment(SegmentArgs),
    /// Generate CNN-like affinities with ground truth (seeded, deterministic).
    Generate {
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
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write uint8 affinities (k/255).
        #[arg(long)]
        uint8: bool,
    },
    /// The main job on a fresh machine: decode a generated CNN-like volume
    /// with ground truth on the GPU and print the time and VOI; without a
    /// GPU, say so and run the CPU reference on a smaller volume.
    Demo {
        /// Volume shape z,y,x for the GPU (the CPU fallback halves each side).
        #[arg(long, value_delimiter = ',', default_value = "64,512,512")]
        shape: Vec<usize>,
        /// Merge thresholds.
        #[arg(long, value_delimiter = ',', default_value = "0.3,0.5")]
        thresholds: Vec<f64>,
    },
    /// Compare a segmentation with ground truth; prints JSON.
    Evaluate {
        /// The segmentation (uint32/uint64 labels).
        #[arg(long)]
        segmentation: String,
        /// The ground truth (uint32/uint64 labels, 0 ignored).
        #[arg(long)]
        ground_truth: String,
    },
}

fn read_labels(spec: &str, what: &str) -> Result<ndarray::Array3<u64>> {
    let volume = VolumeSource::parse(spec).read().with_context(|| format!("reading the {what}"))?;
    let labels = volume.into_labels(spec)?;
    let shape = labels.shape().to_vec();
    labels
        .into_dimensionality::<Ix3>()
        .map_err(|_| anyhow!("the {what} {spec} must be 3-dimensional (z, y, x), not {shape:?}"))
}

fn to_4d<T>(a: ArrayD<T>, spec: &str) -> Result<ndarray::Array4<T>> {
    let shape = a.shape().to_vec();
    a.into_dimensionality::<Ix4>()
        .map_err(|_| anyhow!("affinities {spec} must have the shape (3, z, y, x), not {shape:?}"))
}

/// Stage progress on stderr: a line per stage, completed in place with its
/// time, when stderr is a terminal and `--quiet` is not given.
struct Progress {
    enabled: bool,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        Self { enabled: !quiet && std::io::stderr().is_terminal() }
    }

    fn stage<T>(&self, name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.enabled {
            return work();
        }
        eprint!("gpu-waterz: {name} ...");
        let start = Instant::now();
        let result = work();
        eprintln!("\rgpu-waterz: {name} ... {:.2} s", start.elapsed().as_secs_f64());
        result
    }
}

/// Removes the files written so far when dropped without `keep`.
/// The CPU reference or the GPU pipeline, driven the same way.
enum Run<'g> {
    Cpu(Box<Agglomeration>),
    Gpu(Box<gpu_waterz::gpu::Agglomeration<'g>>),
}

impl Run<'_> {
    fn next_threshold(&mut self) -> Result<Option<gpu_waterz::cpu::ThresholdResult>, gpu_waterz::Error> {
        match self {
            Run::Cpu(r) => r.next_threshold(),
            Run::Gpu(r) => r.next_threshold(),
        }
    }

    fn timings(&self) -> &gpu_waterz::cpu::StageTimings {
        match self {
            Run::Cpu(r) => r.timings(),
            Run::Gpu(r) => r.timings(),
        }
    }
}

struct Outputs(Vec<PathBuf>);

impl Outputs {
    fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn segment(args: &SegmentArgs) -> Result<()> {
    let SegmentArgs {
        affinities,
        thresholds,
        out_dir,
        backend,
        fragments,
        ground_truth,
        aff_threshold_low: low,
        aff_threshold_high: high,
        scoring,
        arithmetic,
        discretize_queue,
        merge_history,
        region_graph,
        epsilon,
        quiet,
    } = args;
    let (low, high, backend, arithmetic, epsilon) = (*low, *high, *backend, *arithmetic, *epsilon);
    let progress = Progress::new(*quiet);
    let start = Instant::now();
    let mut options = Options::new(thresholds)?;
    options.watershed = check_watershed_thresholds(low, high)?;
    options.scoring = scoring.parse::<ScoringFunction>()?;
    options.arithmetic = match arithmetic {
        ArithmeticArg::Waterz => Arithmetic::Waterz,
        ArithmeticArg::Exact => Arithmetic::Exact,
    };
    options.discretize_queue = *discretize_queue;
    options.merge_history = *merge_history;
    options.region_graph = *region_graph;
    if let Some(e) = epsilon {
        if !e.is_finite() || e < 0.0 {
            return Err(gpu_waterz_core::CoreError::Epsilon(e).into());
        }
    }
    if backend == Backend::Cpu && epsilon.is_some() {
        bail!("--epsilon sets ParHAC's parallel merging on the GPU; the CPU reference merges serially (leave --epsilon out, or use --backend gpu)");
    }
    // Open the device before reading anything, so that a machine without
    // one fails at once.
    let device = match backend {
        Backend::Gpu => Some(gpu_waterz_runtime::Gpu::new(0).context("--backend gpu needs a CUDA GPU")?),
        Backend::Cpu => None,
    };

    let t = Instant::now();
    let volume = progress
        .stage("reading the affinities", || VolumeSource::parse(affinities).read().context("reading the affinities"))?;
    let (f32_affs, u8_affs) = match volume {
        Volume::F32(a) => (Some(to_4d(a, affinities)?), None),
        Volume::U8(a) => (None, Some(to_4d(a, affinities)?)),
        other => bail!("affinities {affinities} must be float32 (or uint8 meaning k/255), not {}", other.dtype()),
    };
    let affs = match (&f32_affs, &u8_affs) {
        (Some(a), _) => AffinityGraph::from_f32(a.view())?,
        (_, Some(a)) => AffinityGraph::from_u8(a.view())?,
        _ => unreachable!("one of the two is set"),
    };
    let fragments = fragments.as_deref().map(|f| read_labels(f, "fragments")).transpose()?;
    let gt = ground_truth.as_deref().map(|g| read_labels(g, "ground truth")).transpose()?;
    let read_s = t.elapsed().as_secs_f64();

    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let mut run = progress.stage("watershed and region graph", || {
        let fragments = fragments.as_ref().map(|f| f.view());
        Ok(match &device {
            None => Run::Cpu(Box::new(Agglomeration::new(&affs, fragments, gt, &options)?)),
            Some(g) => Run::Gpu(Box::new(gpu_waterz::gpu::Agglomeration::from_host(
                g,
                &affs,
                fragments,
                gt,
                &options,
                epsilon.unwrap_or(0.0),
            )?)),
        })
    })?;
    let mut outputs = Outputs(Vec::new());
    let mut per_threshold = Vec::new();
    let n_thresholds = thresholds.len();
    for (i, threshold) in thresholds.iter().enumerate() {
        let stage = format!("threshold {}/{n_thresholds} ({threshold})", i + 1);
        let Some(result) = progress.stage(&stage, || Ok(run.next_threshold()?))? else { break };
        let file = format!("segmentation_{i}.npy");
        let path = out_dir.join(&file);
        write_npy(&path, &result.segmentation.view())?;
        outputs.0.push(path);
        let mut entry = serde_json::json!({
            "threshold": result.threshold,
            "file": file,
            "n_segments": count_segments(&result.segmentation.view()),
        });
        if let Some(m) = &result.metrics {
            entry["metrics"] = serde_json::to_value(m)?;
        }
        if let Some(h) = &result.merge_history {
            let hfile = format!("merge_history_{i}.json");
            let hpath = out_dir.join(&hfile);
            write_atomically(&hpath, serde_json::to_string(h)?.as_bytes())?;
            outputs.0.push(hpath);
            entry["merge_history_file"] = hfile.into();
            entry["n_merges"] = h.len().into();
        }
        if let Some(g) = &result.region_graph {
            let gfile = format!("region_graph_{i}.json");
            let gpath = out_dir.join(&gfile);
            write_atomically(&gpath, serde_json::to_string(g)?.as_bytes())?;
            outputs.0.push(gpath);
            entry["region_graph_file"] = gfile.into();
        }
        per_threshold.push(entry);
    }
    let dims = affs.dims();
    let arithmetic = match &run {
        Run::Cpu(_) => format!("{:?}", options.arithmetic).to_lowercase(),
        Run::Gpu(_) => "exact".to_string(),
    };
    let mut summary = serde_json::json!({
        "backend": if device.is_some() { "gpu" } else { "cpu" },
        "affinities": affinities,
        "shape": [dims.z, dims.y, dims.x],
        "n_voxels": affs.n_voxels(),
        "scoring_function": options.scoring.waterz_name(),
        "arithmetic": arithmetic,
        "aff_threshold_low": low,
        "aff_threshold_high": high,
        "thresholds": per_threshold,
        "timings_s": {
            "read": read_s,
            "stages": run.timings(),
            "total": start.elapsed().as_secs_f64(),
        },
    });
    if let (Run::Gpu(r), Some(g)) = (&run, &device) {
        summary["gpu"] = serde_json::json!({
            "device": g.name()?,
            "epsilon": epsilon.unwrap_or(0.0),
            "n_fragments": r.n_fragments(),
            "n_edges": r.n_edges(),
            "parhac_rounds": r.rounds().len(),
        });
    }
    let summary_path = out_dir.join("summary.json");
    write_atomically(&summary_path, serde_json::to_string_pretty(&summary)?.as_bytes())?;
    outputs.keep();
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn generate(
    shape: &[usize],
    out_affinities: &Path,
    out_ground_truth: &Path,
    labels: Option<&str>,
    cells: usize,
    seed: u64,
    uint8: bool,
) -> Result<()> {
    let &[zd, yd, xd] = shape else { bail!("--shape takes three sizes z,y,x, not {shape:?}") };
    if zd == 0 || yd == 0 || xd == 0 {
        bail!("--shape {shape:?} has no voxels");
    }
    let labels = match labels {
        Some(spec) => {
            let source = read_labels(spec, "labels")?;
            let (sz, sy, sx) = source.dim();
            // A centred crop; mirrored where the shape is larger than the
            // source (0, 1, ..., n-1, n-1, ..., 0, 0, 1, ...).
            let offset = |want: usize, have: usize| have.saturating_sub(want) / 2;
            let (oz, oy, ox) = (offset(zd, sz), offset(yd, sy), offset(xd, sx));
            let mirror = |i: usize, n: usize| {
                let k = i % (2 * n);
                if k < n {
                    k
                } else {
                    2 * n - 1 - k
                }
            };
            ndarray::Array3::from_shape_fn((zd, yd, xd), |(z, y, x)| {
                source[[mirror(z + oz, sz), mirror(y + oy, sy), mirror(x + ox, sx)]] as u32
            })
        }
        None => gpu_waterz::generate::neurite_labels(seed, (zd, yd, xd), cells),
    };
    let params = gpu_waterz::generate::GeneratorParams { seed, ..Default::default() };
    let affs = gpu_waterz::generate::affinities(&labels, &params);
    let mut written = Outputs(Vec::new());
    if uint8 {
        write_npy(out_affinities, &gpu_waterz::generate::quantize(&affs).view())?;
    } else {
        write_npy(out_affinities, &affs.view())?;
    }
    written.0.push(out_affinities.to_path_buf());
    write_npy(out_ground_truth, &labels.mapv(u64::from).view())?;
    written.keep();
    Ok(())
}

fn demo(shape: &[usize], thresholds: &[f64]) -> Result<()> {
    let &[zd, yd, xd] = shape else { bail!("--shape takes three sizes z,y,x, not {shape:?}") };
    if zd == 0 || yd == 0 || xd == 0 {
        bail!("--shape {shape:?} has no voxels");
    }
    let options = Options::new(thresholds)?;
    let gpu = gpu_waterz_runtime::Gpu::new(0);
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
    let labels = gpu_waterz::generate::neurite_labels(1, shape, (shape.0 * shape.1 * shape.2 / 20_000).max(8));
    let params = gpu_waterz::generate::GeneratorParams::default();
    let affs = gpu_waterz::generate::affinities(&labels, &params);
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
    let (backend, mut run) = match &gpu {
        Ok(g) => (
            format!("GPU ({})", g.name()?),
            Run::Gpu(Box::new(gpu_waterz::gpu::Agglomeration::from_host(g, &graph, None, Some(gt), &options, 0.0)?)),
        ),
        Err(_) => {
            ("CPU reference".to_string(), Run::Cpu(Box::new(Agglomeration::new(&graph, None, Some(gt), &options)?)))
        }
    };
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

fn evaluate(segmentation: &str, ground_truth: &str) -> Result<()> {
    let seg = read_labels(segmentation, "segmentation")?;
    let gt = read_labels(ground_truth, "ground truth")?;
    let m = gpu_waterz_eval::evaluate(seg.view(), gt.view())?;
    println!("{}", serde_json::to_string_pretty(&m)?);
    Ok(())
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Segment(args) => segment(&args),
        Command::Evaluate { segmentation, ground_truth } => evaluate(&segmentation, &ground_truth),
        Command::Demo { shape, thresholds } => demo(&shape, &thresholds),
        Command::Generate { shape, out_affinities, out_ground_truth, labels, cells, seed, uint8 } => {
            generate(&shape, &out_affinities, &out_ground_truth, labels.as_deref(), cells, seed, uint8)
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-waterz: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
