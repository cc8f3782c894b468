//! `gpu-waterz segment`: an affinity graph to one segmentation per
//! threshold, written as a folder of `.npy` with a `summary.json` (stage
//! timings, metrics), a zarr group or an HDF5 file (`containers`), with,
//! when asked, merge histories and remaining region graphs.

use super::containers::{spatial_attributes, Container, ContainerWriter, LabelType};
use super::input::{read_labels, Affinities, LoadedAffinities};
use super::outputs::OutputFolder;
use super::progress::{Progress, ProgressMode};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use gpu_waterz::{count_segments, Agglomeration, Arithmetic, BackendKind, Config, ScoringFunction, ThresholdResult};
use gpu_waterz_cli::io::VolumeSource;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// The serial CPU reference, identical to stock waterz.
    Cpu,
    /// The GPU pipeline.
    Gpu,
    /// The GPU when one is usable and runs these settings, else the CPU.
    Auto,
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
pub struct SegmentArgs {
    /// Affinities (channels, z, y, x), the first 3 channels used as waterz does: a .npy
    /// (float32, or uint8 meaning k/255), file.h5:/dataset or dir.zarr/array.
    #[arg(long)]
    affinities: String,
    /// Merge thresholds, comma-separated, ascending; any finite value (merging goes on while
    /// the best score is below the threshold, as in waterz).
    #[arg(long, value_delimiter = ',', required = true, allow_hyphen_values = true)]
    thresholds: Vec<f64>,
    /// Output folder for segmentation_<i>.npy and summary.json (the same as --out with a folder).
    #[arg(long, conflicts_with = "out", required_unless_present = "out")]
    out_dir: Option<PathBuf>,
    /// Output by suffix: PATH.zarr a zarr v3 group, PATH.h5 (.hdf5, .hdf) an HDF5 file, else a
    /// folder of .npy files; one segmentation_<i> per threshold with resolution, offset, axis
    /// names and units. Written whole or not at all (a run writes beside it, then renames).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Element type of the segmentations: auto (uint32 when every label fits, else uint64),
    /// uint32 or uint64 (waterz's).
    #[arg(long, value_enum, default_value = "auto")]
    label_type: LabelType,
    /// Voxel size z,y,x for the outputs' attributes (default: the input's `resolution`).
    #[arg(long, value_delimiter = ',')]
    resolution: Option<Vec<f64>>,
    /// Offset z,y,x in world units for the outputs' attributes (default: the input's `offset`).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    offset: Option<Vec<f64>>,
    /// Unit of the resolution and offset (e.g. nm) for the outputs' attributes.
    #[arg(long)]
    units: Option<String>,
    /// Also write the fragments the merging starts from (`fragments`).
    #[arg(long)]
    write_fragments: bool,
    /// zarr format of a .zarr --out: 3 or 2.
    #[arg(long, default_value_t = 3)]
    zarr_format: u8,
    /// Replace a non-empty --out-dir (only once the new result is complete).
    #[arg(long)]
    overwrite: bool,
    /// Flush the result to the disk before moving it into place, so that it
    /// survives a power cut (the write then runs at the disk's speed).
    /// Without, the result is complete as soon as it is in place, but the
    /// operating system writes it back in its own time.
    #[arg(long)]
    fsync: bool,
    /// Where to run: auto takes the GPU when one is usable and runs these settings, else the
    /// CPU (and says why).
    #[arg(long, value_enum, default_value = "auto")]
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
    /// Edge score: mean, max, min, quantile-<Q>[-<bins>][-noinit] (histogram),
    /// exact-quantile-<Q>[-noinit], mean-max-<K>, or waterz's C++ spelling.
    #[arg(long, default_value = "mean")]
    scoring: String,
    /// Statistics arithmetic: the CPU reference defaults to waterz's, the
    /// GPU computes exact statistics only.
    #[arg(long, value_enum)]
    arithmetic: Option<ArithmeticArg>,
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
    /// No progress or notes on stderr (warnings and errors still).
    #[arg(long)]
    quiet: bool,
    /// Progress on stderr: auto (spinners on a terminal), json (one object per line), none.
    #[arg(long, value_enum, default_value = "auto")]
    progress: ProgressMode,
    /// Device memory cap in bytes (suffixes k, M, G, T, or Ki, Mi, Gi, Ti): a volume whose
    /// decode would need more is decoded in blocks whose decode each fits it
    /// (`gpu_waterz_blockwise`: the same fragments, the exact statistics, waterz's serial
    /// order), even on a GPU large enough. The blocks' steps run on the CPU for now. The
    /// affinities are then read on the host first.
    #[arg(long, value_parser = parse_bytes)]
    max_gpu_bytes: Option<u64>,
}

/// A byte count: digits with an optional suffix k, M, G, T (powers of
/// 1000) or Ki, Mi, Gi, Ti (powers of 1024), B allowed after either.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t.strip_suffix('B').unwrap_or(t);
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    let scale: u64 = match suffix {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return Err(format!("{text:?} is not a byte count (digits, then k, M, G, T, Ki, Mi, Gi or Ti)")),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a byte count below 2^64"))
}

pub fn run(args: &SegmentArgs) -> Result<()> {
    let progress = Progress::new(args.progress, args.quiet);
    let start = Instant::now();
    // Open the device and take the output folder before reading anything,
    // so that a machine without one, or a folder in use, fails at once.
    let mut config = config(args)?;
    // `--backend auto` settles on its GPU here too, so that opening the
    // device counts in "open" whichever way the input is read.
    if args.backend == Backend::Auto {
        if let Some(gpu) = Agglomeration::gpu_for(&config)? {
            config = config.backend(gpu_waterz::Backend::Gpu(gpu));
        }
    }
    for (flag, values) in [("--resolution", &args.resolution), ("--offset", &args.offset)] {
        if let Some(v) = values.as_ref().filter(|v| v.len() != 3 || v.iter().any(|x| !x.is_finite())) {
            anyhow::bail!("{flag} takes three finite numbers z,y,x, not {v:?}");
        }
    }
    let target = args.out.as_ref().or(args.out_dir.as_ref()).context("--out or --out-dir names the output")?;
    let container = if args.out.is_some() { Container::of(target) } else { Container::NpyFolder };
    let folder = OutputFolder::begin(target, args.overwrite, container.is_file())?;
    // Opening the device (`--backend gpu`) and taking the output folder.
    let open_s = start.elapsed().as_secs_f64();

    let t = Instant::now();
    let affinities = match args.max_gpu_bytes {
        None => progress.stage("reading the affinities", || LoadedAffinities::load(&args.affinities, &config))?,
        Some(cap) => {
            let host = progress.stage("reading the affinities", || Affinities::read(&args.affinities))?;
            // The GPU's blockwise steps take float32 affinities.
            let gpu = config.gpu().cloned();
            if let Some(block) = blocking(&host, cap, gpu.is_some())? {
                let read_s = t.elapsed().as_secs_f64();
                let out = Output { folder, target, container, start, open_s, read_s };
                return decode_in_blocks(args, &progress, host, block, cap, gpu, out);
            }
            LoadedAffinities::Host(host)
        }
    };
    if let Some(f) = args.fragments.as_deref() {
        config = config.fragments(read_labels(f, "fragments")?);
    }
    if let Some(g) = args.ground_truth.as_deref() {
        config = config.ground_truth(read_labels(g, "ground truth")?);
    }
    let read_s = t.elapsed().as_secs_f64();

    let (mut writer, spatial) = writer_for(args, container, &folder)?;
    let scoring = args.scoring.parse::<ScoringFunction>()?;
    let t = Instant::now();
    let mut run = progress.stage("watershed and region graph", || affinities.start(config))?;
    // Starting the pipeline: its own stages (upload, watershed, region
    // graph) are in "stages"; the rest is checking the input.
    let pipeline_s = t.elapsed().as_secs_f64();
    if let Some(note) = run.backend_note() {
        progress.note(note);
    }
    if let Some(note) = affinities.channel_note() {
        progress.note(&note);
    }
    // The pipeline holds what it needs (on the GPU, the affinities were
    // uploaded): the host copy goes now, before the segmentations come.
    let dims = affinities.dims();
    let n_voxels = dims.z * dims.y * dims.x;
    let streamed = affinities.streamed();
    let t = Instant::now();
    let released = affinities.release();
    let release_s = t.elapsed().as_secs_f64();
    // Warnings are printed even with --quiet, and kept in summary.json.
    for warning in run.warnings() {
        eprintln!("gpu-waterz: warning: {warning}");
    }
    let t = Instant::now();
    let fragments_entry = if args.write_fragments {
        let fragments = run.fragments()?;
        let (name, dtype) = progress.stage("writing the fragments", || writer.fragments(&fragments))?;
        Some(serde_json::json!({ "file": name, "dtype": dtype, "n_fragments": run.n_fragments() }))
    } else {
        None
    };
    let fragments_s = t.elapsed().as_secs_f64();
    // The pipeline runs on its own thread, one threshold ahead: while this
    // thread writes a threshold's result, the next one is computed. The
    // rendezvous channel keeps at most one finished result waiting.
    let n_thresholds = args.thresholds.len();
    let t = Instant::now();
    let per_threshold = std::thread::scope(|scope| -> Result<Vec<serde_json::Value>> {
        let (send, receive) = std::sync::mpsc::sync_channel::<Result<ThresholdResult>>(0);
        let pipeline = &mut run;
        scope.spawn(move || {
            for _ in 0..n_thresholds {
                let next = pipeline.next_threshold().map_err(anyhow::Error::from).transpose();
                let Some(next) = next else { break };
                let failed = next.is_err();
                if send.send(next).is_err() || failed {
                    break;
                }
            }
        });
        let mut entries = Vec::new();
        for (i, threshold) in args.thresholds.iter().enumerate() {
            let stage = format!("threshold {}/{n_thresholds} ({threshold})", i + 1);
            // Waiting for the pipeline: its stages (merging, extraction,
            // downloads, metrics) for this threshold, less what overlapped
            // the previous write.
            let t = Instant::now();
            let Some(result) = progress.stage(&stage, || receive.recv().ok().transpose())? else { break };
            let wait_s = t.elapsed().as_secs_f64();
            let write = format!("writing threshold {}/{n_thresholds}", i + 1);
            let t = Instant::now();
            let mut entry = progress.stage(&write, || write_threshold(&mut writer, i, &result))?;
            entry["write_s"] = t.elapsed().as_secs_f64().into();
            entry["wait_s"] = wait_s.into();
            entries.push(entry);
        }
        Ok(entries)
    })?;
    let sum_of = |key: &str| per_threshold.iter().filter_map(|e| e[key].as_f64()).sum::<f64>();
    // After the last result: the pipeline's thread ending.
    let pipeline_end_s = (t.elapsed().as_secs_f64() - sum_of("wait_s") - sum_of("write_s")).max(0.0);
    let arithmetic = match (run.backend(), args.arithmetic) {
        (BackendKind::Cpu, None | Some(ArithmeticArg::Waterz)) => "waterz",
        _ => "exact",
    };
    let mut summary = serde_json::json!({
        "backend": run.backend().to_string(),
        "warnings": run.warnings(),
        "affinities": args.affinities,
        "shape": [dims.z, dims.y, dims.x],
        "n_voxels": n_voxels,
        "scoring_function": scoring.waterz_name(),
        "arithmetic": arithmetic,
        "aff_threshold_low": args.aff_threshold_low,
        "aff_threshold_high": args.aff_threshold_high,
        "thresholds": per_threshold,
        // Whether the affinities went to the GPU piece by piece as they
        // were read ("read" then includes their upload).
        "affinities_streamed_to_gpu": streamed,
        "timings_s": {
            "open": open_s,
            "read": read_s,
            "pipeline_start": pipeline_s,
            "stages": run.timings(),
            "release": release_s,
            "fragments": fragments_s,
            "wait": sum_of("wait_s"),
            "write": sum_of("write_s"),
            "pipeline_end": pipeline_end_s,
        },
    });
    if let (Some(stats), Some(gpu)) = (run.gpu_stats(), run.gpu()) {
        summary["gpu"] = serde_json::json!({
            "device": gpu.name()?,
            "epsilon": args.epsilon.unwrap_or(0.0),
            "n_fragments": run.n_fragments(),
            "n_edges": stats.n_edges,
            "parhac_rounds": stats.rounds.len(),
        });
    }
    if let Some(entry) = fragments_entry {
        summary["fragments"] = entry;
    }
    summary["output"] = serde_json::json!({
        "path": target,
        "container": format!("{container:?}"),
        "attributes": spatial,
    });
    // Closing the GPU: the pipeline, the affinities' thread and the
    // process's device handle go, so that the device's context (its memory
    // pool and page-locked buffers) is destroyed here, timed, instead of in
    // the process's exit (0.13–0.15 s at 134 Mvoxel on an H200). A CPU
    // pipeline is left to the exit: the operating system takes back its
    // host memory at once, faster than freeing it piece by piece.
    let t = Instant::now();
    let kept = if run.gpu().is_some() {
        drop(run);
        let _ = released.join();
        gpu_waterz::Gpu::forget_opened();
        None
    } else {
        Some(run)
    };
    summary["timings_s"]["teardown"] = t.elapsed().as_secs_f64().into();
    // "finish" is this last step (the summary, the commit, and removing a
    // result it replaces); "total" ends before it.
    summary["timings_s"]["total"] = start.elapsed().as_secs_f64().into();
    let t = Instant::now();
    progress.stage("finishing the output", || {
        writer.finish(&summary)?;
        folder.commit(args.fsync)
    })?;
    summary["timings_s"]["finish"] = t.elapsed().as_secs_f64().into();
    if container == Container::NpyFolder {
        // The folder's summary gets the finish too, replaced atomically: the
        // result is complete either way.
        // With --fsync, the new summary is flushed to the disk too.
        let text = serde_json::to_string_pretty(&summary)?;
        let mut rewritten = gpu_waterz_cli::io::write_atomically(&target.join("summary.json"), text.as_bytes())
            .map_err(anyhow::Error::from);
        if rewritten.is_ok() && args.fsync {
            rewritten = gpu_waterz_cli::io::sync_tree(target).map_err(anyhow::Error::from);
        }
        if let Err(e) = rewritten {
            eprintln!("gpu-waterz: warning: summary.json keeps no finish time: {e}");
        }
    }
    println!("{}", serde_json::to_string_pretty(&summary)?);
    // The process ends here (see the teardown above).
    std::mem::forget(kept);
    Ok(())
}

/// The block shape for affinities whose decode would need more device
/// memory than `cap`, or `None` when it fits.
fn blocking(affinities: &Affinities, cap: u64, float_blocks: bool) -> Result<Option<[u64; 3]>> {
    let (shape, value_bytes) = match affinities {
        Affinities::F32(a) => (a.shape(), 4),
        Affinities::U8(a) => (a.shape(), 1),
    };
    if shape.len() != 4 || shape[0] < 3 {
        // The pipeline reports the shape it takes.
        return Ok(None);
    }
    let dims = [shape[1] as u64, shape[2] as u64, shape[3] as u64];
    let n: u64 = dims.iter().product();
    if gpu_waterz::bytes_needed(n, 3 * n * value_bytes) <= cap {
        return Ok(None);
    }
    // Blocks decoded on the GPU upload float32 affinities.
    let block_value_bytes = if float_blocks { 4 } else { value_bytes };
    match gpu_waterz::block_shape_within(dims, cap, 3 * block_value_bytes) {
        Some(block) => Ok(Some(block)),
        None => bail!(
            "--max-gpu-bytes {cap}: not even a block of one voxel (with its halo) fits; the decode needs {} bytes per voxel",
            gpu_waterz::bytes_needed(1, 3 * block_value_bytes)
        ),
    }
}

/// Where a run writes (its staging folder, the final path, the
/// container), when it started, and the seconds it spent opening and
/// reading.
struct Output<'a> {
    folder: OutputFolder,
    target: &'a PathBuf,
    container: Container,
    start: Instant,
    open_s: f64,
    read_s: f64,
}

/// The writer of the outputs into `folder`, and their spatial attributes
/// (the input's, or the arguments').
fn writer_for(
    args: &SegmentArgs,
    container: Container,
    folder: &OutputFolder,
) -> Result<(ContainerWriter, serde_json::Map<String, serde_json::Value>)> {
    let spatial = spatial_attributes(
        &VolumeSource::parse(&args.affinities).attributes(),
        args.resolution.as_deref(),
        args.offset.as_deref(),
        args.units.as_deref(),
    );
    let writer = ContainerWriter::new(container, folder.path(), args.label_type, spatial.clone(), args.zarr_format)?;
    Ok((writer, spatial))
}

/// `segment` with `--max-gpu-bytes` below the volume's need: the volume
/// decoded in blocks of `block` ([`gpu_waterz_blockwise::decode`], on the
/// CPU), written as `segment` writes.
fn decode_in_blocks(
    args: &SegmentArgs,
    progress: &Progress,
    affinities: Affinities,
    block: [u64; 3],
    cap: u64,
    gpu: Option<gpu_waterz::Gpu>,
    out: Output<'_>,
) -> Result<()> {
    // What the blockwise decode does not compute: say so rather than
    // dropping it.
    let unsupported = [
        ("--fragments", args.fragments.is_some()),
        ("--ground-truth", args.ground_truth.is_some()),
        ("--merge-history", args.merge_history),
        ("--region-graph", args.region_graph),
        ("--discretize-queue", args.discretize_queue != 0),
        ("--epsilon", args.epsilon.is_some()),
        ("--arithmetic waterz", args.arithmetic == Some(ArithmeticArg::Waterz)),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
        bail!(
            "{flag} is not available when --max-gpu-bytes decodes in blocks (the volume needs more than {cap} bytes)"
        );
    }
    let scoring = args.scoring.parse::<ScoringFunction>()?;
    if scoring != ScoringFunction::MeanAffinity {
        bail!("--scoring {}: decoding in blocks (--max-gpu-bytes) scores by the mean affinity only", args.scoring);
    }
    if args.thresholds.windows(2).any(|w| w[0] > w[1]) {
        bail!("--thresholds must be ascending, not {:?}", args.thresholds);
    }
    let mut distinct = args.thresholds.clone();
    distinct.dedup();
    let (mut writer, spatial) = writer_for(args, out.container, &out.folder)?;
    let backend = if gpu.is_some() { "gpu" } else { "cpu" };
    let on = if gpu.is_some() {
        "steps 1, 3 and 5 of each block and the merge on the GPU, the rest on the CPU"
    } else {
        "on the CPU"
    };
    progress.note(&format!("the decode needs more than --max-gpu-bytes {cap}: decoding in blocks of {block:?} ({on})"));
    let t = Instant::now();
    let (values, channels) = match affinities {
        Affinities::F32(a) => {
            let channels = a.dim().0;
            let first = a.slice_axis(ndarray::Axis(0), ndarray::Slice::from(..3));
            (if channels == 3 { a } else { first.to_owned() }, channels)
        }
        Affinities::U8(a) => {
            let channels = a.dim().0;
            let first = a.slice_axis(ndarray::Axis(0), ndarray::Slice::from(..3));
            (first.mapv(gpu_waterz_core::affinities::u8_affinity), channels)
        }
    };
    if channels > 3 {
        progress.note(&format!("the affinities have {channels} channels; the first 3 are used, as waterz does"));
    }
    let params = gpu_waterz_core::WatershedParams {
        aff_threshold_low: args.aff_threshold_low as f32,
        aff_threshold_high: args.aff_threshold_high as f32,
    };
    let (decoded, peak_device_bytes) = progress.stage("decoding in blocks", || {
        match gpu {
            Some(gpu) => {
                let steps = gpu_waterz_blockwise::GpuSteps::new(gpu)?;
                gpu_waterz_blockwise::decode_with(values.view(), block, params, &distinct, &steps)
                    .map(|decoded| (decoded, steps.peak_device_bytes()))
            }
            None => gpu_waterz_blockwise::decode(values.view(), block, params, &distinct).map(|d| (d, None)),
        }
        .map_err(anyhow::Error::from)
    })?;
    drop(values);
    let decode_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let fragments_entry = if args.write_fragments {
        let (name, dtype) = progress.stage("writing the fragments", || writer.fragments(&decoded.fragments))?;
        Some(serde_json::json!({ "file": name, "dtype": dtype, "n_fragments": decoded.n_fragments }))
    } else {
        None
    };
    let mut entries = Vec::new();
    for (i, &threshold) in args.thresholds.iter().enumerate() {
        let k = distinct.iter().position(|&d| d == threshold).expect("every threshold is among the distinct ones");
        let segmentation = &decoded.segmentations[k];
        let (name, dtype) = progress
            .stage(&format!("writing threshold {}/{}", i + 1, args.thresholds.len()), || {
                writer.segmentation(i, threshold, segmentation)
            })?;
        entries.push(serde_json::json!({
            "threshold": threshold,
            "file": name,
            "dtype": dtype,
            "n_segments": count_segments(&segmentation.view()),
        }));
    }
    let write_s = t.elapsed().as_secs_f64();
    let shape = decoded.fragments.shape().to_vec();
    let mut summary = serde_json::json!({
        "backend": backend,
        "warnings": Vec::<String>::new(),
        "affinities": args.affinities,
        "shape": shape,
        "n_voxels": decoded.fragments.len(),
        "scoring_function": scoring.waterz_name(),
        "arithmetic": "exact",
        "aff_threshold_low": args.aff_threshold_low,
        "aff_threshold_high": args.aff_threshold_high,
        "thresholds": entries,
        "blockwise": {
            "max_gpu_bytes": cap,
            "peak_device_bytes": peak_device_bytes,
            "block_shape": block,
            "n_fragments": decoded.n_fragments,
            "open_voxels": decoded.open_voxels,
            "n_edges": decoded.n_edges,
            "step_seconds": super::blockwise::step_seconds(&decoded.seconds),
        },
        "timings_s": { "open": out.open_s, "read": out.read_s, "decode": decode_s, "write": write_s },
    });
    if let Some(entry) = fragments_entry {
        summary["fragments"] = entry;
    }
    summary["output"] = serde_json::json!({
        "path": out.target,
        "container": format!("{:?}", out.container),
        "attributes": spatial,
    });
    summary["timings_s"]["total"] = out.start.elapsed().as_secs_f64().into();
    progress.stage("finishing the output", || {
        writer.finish(&summary)?;
        out.folder.commit(args.fsync)
    })?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

/// The pipeline's configuration from the arguments; `--backend gpu` opens
/// the device here. Values are checked when the pipeline starts.
fn config(args: &SegmentArgs) -> Result<Config> {
    let backend = match args.backend {
        Backend::Cpu => gpu_waterz::Backend::Cpu,
        Backend::Auto => gpu_waterz::Backend::Auto,
        Backend::Gpu => gpu_waterz::Backend::gpu(0).context("--backend gpu needs a CUDA GPU")?,
    };
    let mut config = Config::new(&args.thresholds)
        .watershed_thresholds(args.aff_threshold_low, args.aff_threshold_high)
        .scoring(args.scoring.parse::<ScoringFunction>()?)
        .discretize_queue(args.discretize_queue)
        .merge_history(args.merge_history)
        .region_graph(args.region_graph)
        .epsilon(args.epsilon.unwrap_or(0.0))
        .backend(backend);
    if let Some(a) = args.arithmetic {
        config = config.arithmetic(match a {
            ArithmeticArg::Waterz => Arithmetic::Waterz,
            ArithmeticArg::Exact => Arithmetic::Exact,
        });
    }
    Ok(config)
}

/// Writes threshold `i`'s results with `writer` and returns its entry of
/// the summary.
fn write_threshold(writer: &mut ContainerWriter, i: usize, result: &ThresholdResult) -> Result<serde_json::Value> {
    let (name, dtype) = writer.segmentation(i, result.threshold, &result.segmentation)?;
    let mut entry = serde_json::json!({
        "threshold": result.threshold,
        "file": name,
        "dtype": dtype,
        "n_segments": count_segments(&result.segmentation.view()),
    });
    if let Some(m) = &result.metrics {
        entry["metrics"] = serde_json::to_value(m)?;
    }
    if let Some(h) = &result.merge_history {
        let names = writer.merge_history(i, h)?;
        entry["merge_history_file"] = names[0].clone().into();
        if let Some(scores) = names.get(1) {
            entry["merge_scores"] = scores.clone().into();
        }
        entry["n_merges"] = h.len().into();
    }
    if let Some(g) = &result.region_graph {
        let names = writer.region_graph(i, g)?;
        entry["region_graph_file"] = names[0].clone().into();
        if let Some(scores) = names.get(1) {
            entry["region_graph_scores"] = scores.clone().into();
        }
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_take_decimal_and_binary_suffixes() {
        assert_eq!(parse_bytes("123"), Ok(123));
        assert_eq!(parse_bytes("30k"), Ok(30_000));
        assert_eq!(parse_bytes("2G"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("28Ki"), Ok(28 * 1024));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("16Ti"), Ok(16 << 40));
        for bad in ["", "k", "1.5G", "-1", "12Q", "99999999999T"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }
}
