//! `bench-cremi`: the seed's end-to-end benchmark (`cargo xtask bench-cremi`
//! builds and runs it; on a machine without cargo, run the prebuilt binary).
//!
//! Labels come from a CREMI HDF5 (`--cremi sample_A.hdf`,
//! `volumes/labels/neuron_ids`, with affinities from `--cremi-affinities
//! DATASET` when it has them), else from the pinky40 segmentation in the
//! data directory, else from synthetic neurites; CNN-like affinities are
//! generated from them (`gpu_waterz_cli::generate`). The decode (watershed,
//! region graph, ParHAC at `--threshold`, the segmentation on the device)
//! is timed with the affinities resident.
//!
//! Two layouts:
//! - contiguous (the default): one volume of `--shape Z,Y,X` (default
//!   512³), the labels cropped or mirrored to it as `gpu-waterz generate
//!   --labels` does, so that merge chains are as long as a real volume's
//!   (`--implicit`: labels from the implicit cell field of `gpu-waterz
//!   generate --implicit` instead, no mirroring at any size).
//!   It reports the rounds and the merges per round; VOI is measured on the
//!   whole volume, where `--waterz` also runs stock waterz (PyPI, through
//!   `--python`) on the same data, up to 134 Mvoxel.
//! - `--tiled`: a `--tile` stacked along z on the GPU to `--voxels`
//!   (default 2.16e9, the seed's size), at every size of `--sizes`; VOI
//!   and stock waterz on one tile.

use anyhow::{anyhow, bail, Context, Result};
use gpu_waterz::{AffinityBuffer, DeviceAffinities, Gpu};
use gpu_waterz::{Agglomeration, Backend, Config, GpuStats, HostFinish};
use gpu_waterz_cli::generate::GeneratorParams;
use gpu_waterz_cli::io::{read_hdf5, write_atomically, write_npy, Volume};
use gpu_waterz_core::{AffinityGraph, Dims3};
use ndarray::{s, Array3, Array4, Ix3, Ix4};
use std::path::{Path, PathBuf};
use std::time::Instant;

struct Args {
    voxels: u64,
    threshold: f64,
    epsilon: f64,
    cremi: Option<PathBuf>,
    cremi_affinities: Option<String>,
    tile: (usize, usize, usize),
    sizes: Vec<u64>,
    repeats: usize,
    waterz: bool,
    python: String,
    json: PathBuf,
    markdown: Option<PathBuf>,
    tiled: bool,
    shape: (usize, usize, usize),
    /// The serial-finish policies: the first is the benchmark's, the
    /// others are compared with it (contiguous layout).
    host_finish: Vec<HostFinish>,
    /// Contiguous labels from the implicit cell field instead of pinky40.
    implicit: bool,
}

/// The largest contiguous volume on which stock waterz runs beside the GPU
/// (512³: about 19 s for it on the H200's host).
const WATERZ_MAX_VOXELS: u64 = 1 << 27;

const USAGE: &str = "usage: bench-cremi [--shape Z,Y,X | --tiled [--voxels N] [--tile Z,Y,X] [--sizes N1,N2,...]] [--threshold T] [--epsilon E] [--host-finish never|default|EDGES,MERGES,SMALL[/...]] [--cremi FILE.hdf [--cremi-affinities DATASET]] [--implicit] [--repeats R] [--waterz [--python PYTHON]] [--json OUT.json] [--markdown docs/BENCHMARKS.md]";

/// `Z,Y,X` as three positive sizes.
fn parse_shape(flag: &str, v: Option<String>) -> Result<(usize, usize, usize)> {
    let v = v.ok_or_else(|| anyhow!("{flag} needs Z,Y,X"))?;
    let p: Vec<usize> = v.split(',').map(|x| x.trim().parse()).collect::<Result<_, _>>()?;
    let &[z, y, x] = &p[..] else { bail!("{flag} takes three sizes Z,Y,X, not {v:?}") };
    if z == 0 || y == 0 || x == 0 {
        bail!("{flag} {v} has no voxels");
    }
    Ok((z, y, x))
}

/// Serial-finish policies separated by `/`: `never`, `default`, or
/// `EDGES,MERGES,SMALL[,SLOTS_PER_MERGE]` (`HostFinish`'s fields; the last
/// one 0 when left out).
fn parse_host_finish(v: Option<String>) -> Result<Vec<HostFinish>> {
    let v = v.ok_or_else(|| anyhow!("--host-finish needs never, default or EDGES,MERGES,SMALL"))?;
    v.split('/')
        .map(|p| match p.trim() {
            "never" => Ok(HostFinish::NEVER),
            "default" => Ok(HostFinish::default()),
            fields => {
                let f: Vec<u64> = fields.split(',').map(|x| x.trim().parse()).collect::<Result<_, _>>()?;
                let (max_edges, min_merges_per_round, small_edges, slots_per_merge) = match f[..] {
                    [a, b, c] => (a, b, c, 0),
                    [a, b, c, d] => (a, b, c, d),
                    _ => bail!("--host-finish takes never, default or EDGES,MERGES,SMALL[,SLOTS], not {p:?}"),
                };
                Ok(HostFinish { max_edges, min_merges_per_round, small_edges, slots_per_merge })
            }
        })
        .collect()
}

/// GPU rounds and serial finishes on the host.
fn round_counts(stats: &GpuStats<'_>) -> (usize, usize) {
    let on_host = stats.rounds.iter().filter(|r| r.on_host).count();
    (stats.rounds.len() - on_host, on_host)
}

/// Debug logs on standard error (the serial finish's phases, the
/// thresholds) when `GPU_WATERZ_LOG` is `debug` or `trace`.
fn init_logging() {
    let level = match std::env::var("GPU_WATERZ_LOG").as_deref() {
        Ok("debug") => tracing::Level::DEBUG,
        Ok("trace") => tracing::Level::TRACE,
        _ => return,
    };
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).init();
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        voxels: 2_160_000_000,
        threshold: 0.3,
        epsilon: 0.0,
        cremi: None,
        cremi_affinities: None,
        tile: (64, 512, 512),
        sizes: Vec::new(),
        repeats: 3,
        waterz: false,
        python: "python3".into(),
        json: PathBuf::from("bench-cremi.json"),
        markdown: None,
        tiled: false,
        shape: (512, 512, 512),
        host_finish: vec![HostFinish::default()],
        implicit: false,
    };
    let mut tiled_only = Vec::new();
    let mut it = std::env::args().skip(1);
    let number = |v: Option<String>, name: &str| -> Result<f64> {
        let v = v.ok_or_else(|| anyhow!("{name} needs a value\n{USAGE}"))?;
        v.parse::<f64>().map_err(|_| anyhow!("{name} takes a number, not {v:?}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--voxels" => {
                args.voxels = number(it.next(), "--voxels")? as u64;
                tiled_only.push("--voxels");
            }
            "--tiled" => args.tiled = true,
            "--shape" => args.shape = parse_shape("--shape", it.next())?,
            "--threshold" => args.threshold = number(it.next(), "--threshold")?,
            "--epsilon" => args.epsilon = number(it.next(), "--epsilon")?,
            "--host-finish" => args.host_finish = parse_host_finish(it.next())?,
            "--cremi" => args.cremi = Some(it.next().ok_or_else(|| anyhow!("--cremi needs a file"))?.into()),
            "--cremi-affinities" => args.cremi_affinities = it.next(),
            "--tile" => {
                args.tile = parse_shape("--tile", it.next())?;
                tiled_only.push("--tile");
            }
            "--sizes" => {
                tiled_only.push("--sizes");
                let v = it.next().ok_or_else(|| anyhow!("--sizes needs a list"))?;
                args.sizes =
                    v.split(',').map(|x| x.trim().parse::<f64>().map(|f| f as u64)).collect::<Result<_, _>>()?;
            }
            "--repeats" => args.repeats = (number(it.next(), "--repeats")? as usize).max(1),
            "--waterz" => args.waterz = true,
            "--implicit" => args.implicit = true,
            "--python" => args.python = it.next().ok_or_else(|| anyhow!("--python needs a path"))?,
            "--json" => args.json = it.next().ok_or_else(|| anyhow!("--json needs a path"))?.into(),
            "--markdown" => args.markdown = Some(it.next().ok_or_else(|| anyhow!("--markdown needs a path"))?.into()),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if args.implicit && (args.tiled || args.cremi.is_some()) {
        bail!("--implicit sets the contiguous volume's labels: not with --tiled or --cremi");
    }
    if let Some(flag) = tiled_only.first().filter(|_| !args.tiled) {
        bail!("{flag} sets the tiled layout: pass --tiled too (the contiguous layout takes --shape)");
    }
    if !(0.0..=1.0).contains(&args.threshold) {
        bail!("--threshold must lie in [0, 1], not {}", args.threshold);
    }
    if args.voxels == 0 {
        bail!("--voxels must be positive");
    }
    if args.sizes.is_empty() {
        args.sizes = [100_000_000, 500_000_000, 1_000_000_000].into_iter().filter(|&s| s < args.voxels).collect();
    }
    args.sizes.push(args.voxels);
    args.sizes.sort_unstable();
    args.sizes.dedup();
    Ok(args)
}

fn data_dir() -> PathBuf {
    std::env::var_os("GPU_WATERZ_DATA").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("../shared/data"))
}

/// The ground-truth tile and its affinities, and where they came from.
fn make_tile(args: &Args) -> Result<(Array3<u32>, Array4<f32>, String)> {
    let (tz, ty, tx) = args.tile;
    let crop = |labels: &Array3<u64>, what: &str| -> Result<Array3<u32>> {
        let (z, y, x) = labels.dim();
        if z < tz || y < ty || x < tx {
            bail!("{what} is {:?}, smaller than the tile {:?}; pass a smaller --tile", labels.dim(), args.tile);
        }
        let (oz, oy, ox) = ((z - tz) / 2, (y - ty) / 2, (x - tx) / 2);
        let c = labels.slice(s![oz..oz + tz, oy..oy + ty, ox..ox + tx]);
        if c.iter().any(|&l| l > u32::MAX as u64) {
            bail!("{what} holds labels above 2^32");
        }
        Ok(c.mapv(|l| l as u32))
    };
    let params = gpu_waterz_cli::generate::GeneratorParams { seed: 1, ..Default::default() };
    if let Some(path) = &args.cremi {
        let labels = read_hdf5(path, "volumes/labels/neuron_ids")
            .with_context(|| format!("reading volumes/labels/neuron_ids from {}", path.display()))?
            .into_labels("neuron_ids")?
            .into_dimensionality::<Ix3>()
            .map_err(|_| anyhow!("volumes/labels/neuron_ids must be 3-dimensional"))?;
        let tile = crop(&labels, "the CREMI labels")?;
        let affs = match &args.cremi_affinities {
            Some(dataset) => {
                let a = match read_hdf5(path, dataset)? {
                    Volume::F32(a) => a,
                    other => bail!("{dataset} must be float32, not {}", other.dtype()),
                };
                let a = a.into_dimensionality::<Ix4>().map_err(|_| anyhow!("{dataset} must be (3, z, y, x)"))?;
                let (_, z, y, x) = a.dim();
                let (oz, oy, ox) = ((z - tz) / 2, (y - ty) / 2, (x - tx) / 2);
                a.slice(s![..3, oz..oz + tz, oy..oy + ty, ox..ox + tx]).as_standard_layout().to_owned()
            }
            None => gpu_waterz_cli::generate::affinities(&tile, &params),
        };
        return Ok((tile, affs, format!("CREMI {}", path.display())));
    }
    let pinky = data_dir().join("pinky40-labels-512.h5");
    if pinky.exists() {
        let labels = read_hdf5(&pinky, "labels")?
            .into_labels("pinky40")?
            .into_dimensionality::<Ix3>()
            .map_err(|_| anyhow!("pinky40 labels must be 3-dimensional"))?;
        let tile = crop(&labels, "pinky40")?;
        let affs = gpu_waterz_cli::generate::affinities(&tile, &params);
        return Ok((tile, affs, "pinky40 labels (512³ crop), generated CNN-like affinities".into()));
    }
    eprintln!("bench-cremi: {} is absent; using synthetic neurites", pinky.display());
    let tile = gpu_waterz_cli::generate::neurite_labels(1, args.tile, 200);
    let affs = gpu_waterz_cli::generate::affinities(&tile, &params);
    Ok((tile, affs, "synthetic drifting-Voronoi neurites, generated affinities".into()))
}

/// The tile's affinities stacked `n_tiles` times along z, on the device.
fn stacked(gpu: &Gpu, tile: &Array4<f32>, n_tiles: u64) -> Result<DeviceAffinities> {
    let (_, tz, ty, tx) = tile.dim();
    let tile_voxels = tz * ty * tx;
    let dims = Dims3::new(tz as u64 * n_tiles, ty as u64, tx as u64);
    let n = tile_voxels * n_tiles as usize;
    let mut buffer = gpu.zeros::<f32>(3 * n)?;
    let flat = tile.as_slice().expect("standard layout");
    for c in 0..3 {
        for k in 0..n_tiles as usize {
            gpu.upload_into(&mut buffer, c * n + k * tile_voxels, &flat[c * tile_voxels..(c + 1) * tile_voxels])?;
        }
    }
    Ok(DeviceAffinities::from_buffer(AffinityBuffer::F32(buffer), dims)?)
}

#[derive(serde::Serialize)]
struct SizeResult {
    voxels: u64,
    shape: [u64; 3],
    n_fragments: u64,
    n_edges: u64,
    parhac_rounds: usize,
    median_s: f64,
    times_s: Vec<f64>,
    gvoxels_per_s: f64,
    stages_s: serde_json::Value,
    /// The pool's high watermark; `None` on devices without memory pools.
    peak_device_bytes: Option<u64>,
    affinity_bytes: u64,
    slots_per_round_quantiles: [u64; 5],
}

/// One decode; returns its seconds, and the run for its figures.
fn decode(gpu: &Gpu, affs: &DeviceAffinities, config: &Config) -> Result<(f64, Agglomeration)> {
    gpu.synchronize()?;
    let t = Instant::now();
    let mut run = Agglomeration::from_device(affs, gpu, config.clone())?;
    let (_, seg) = run.next_threshold_dense_device()?.ok_or_else(|| anyhow!("no threshold"))?;
    gpu.synchronize()?;
    let seconds = t.elapsed().as_secs_f64();
    drop(seg);
    Ok((seconds, run))
}

/// ParHAC alone at thresholds 0.1 to 0.9 on the volume's region graph:
/// the median merging time over `repeats` runs, the rounds and the graph.
fn parhac_five_thresholds(
    gpu: &Gpu,
    affs: &DeviceAffinities,
    epsilon: f64,
    host_finish: HostFinish,
    repeats: usize,
) -> Result<serde_json::Value> {
    let config = Config::new(&[0.1, 0.3, 0.5, 0.7, 0.9])
        .epsilon(epsilon)
        .host_finish(host_finish)
        .backend(Backend::Gpu(gpu.clone()));
    let mut times = Vec::new();
    let mut summary = serde_json::Value::Null;
    for _ in 0..repeats.max(1) {
        let mut run = Agglomeration::from_device(affs, gpu, config.clone())?;
        while let Some((_, seg)) = run.next_threshold_dense_device()? {
            drop(seg);
        }
        let merging = run.timings().merging_s;
        times.push(merging);
        let stats = run.gpu_stats().ok_or_else(|| anyhow!("the GPU backend reports its figures"))?;
        let (rounds, on_host) = round_counts(&stats);
        summary = serde_json::json!({
            "n_fragments": run.n_fragments(),
            "n_edges": stats.n_edges,
            "rounds": rounds,
            "host_finishes": on_host,
            "compactions": stats.n_compactions,
            "merging_s": merging,
            "mean_round_us": merging * 1e6 / rounds.max(1) as f64,
        });
    }
    times.sort_by(f64::total_cmp);
    summary["median_merging_s"] = times[times.len() / 2].into();
    summary["times_s"] = serde_json::to_value(&times)?;
    eprintln!("bench-cremi: ParHAC at 0.1..0.9 on the largest volume: {summary}");
    Ok(summary)
}

/// A peak in GB and bytes per voxel (affinities included), or "unknown".
fn peak_text(peak: Option<u64>, n_voxels: u64) -> String {
    match peak {
        Some(p) => format!("{:.1} GB, {:.1} B/voxel", p as f64 / 1e9, p as f64 / n_voxels as f64),
        None => "unknown (no memory pool)".into(),
    }
}

const WATERZ_SCRIPT: &str = r#"
import json, sys, time
import numpy as np
import waterz
affs = np.load(sys.argv[1]); gt = np.load(sys.argv[2]).astype(np.uint32); t = float(sys.argv[3])
def timed(thresholds):
    start = time.perf_counter()
    segs = [s.copy() for s in waterz.agglomerate(affs, thresholds)]
    return time.perf_counter() - start, segs
seconds, (seg,) = timed([t])
metrics = waterz.evaluate(seg.astype(np.uint64), gt.astype(np.uint64))
ws_rg, _ = timed([0.0])
five, _ = timed([0.1, 0.3, 0.5, 0.7, 0.9])
print(json.dumps({"seconds": seconds, "voi_split": metrics["voi_split"], "voi_merge": metrics["voi_merge"],
                  "watershed_and_graph_seconds": ws_rg, "five_thresholds_seconds": five,
                  "merging_five_thresholds_seconds": five - ws_rg}))
"#;

fn run_waterz(args: &Args, tile: &Array4<f32>, gt: &Array3<u64>) -> Result<serde_json::Value> {
    let dir = std::env::temp_dir().join(format!("bench-cremi-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (a, g) = (dir.join("affs.npy"), dir.join("gt.npy"));
    write_npy(&a, &tile.view())?;
    write_npy(&g, &gt.view())?;
    let out = std::process::Command::new(&args.python)
        .args(["-c", WATERZ_SCRIPT])
        .arg(&a)
        .arg(&g)
        .arg(args.threshold.to_string())
        .output()
        .with_context(|| format!("running {} (stock waterz)", args.python))?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        bail!("stock waterz failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().ok_or_else(|| anyhow!("stock waterz printed nothing"))?;
    Ok(serde_json::from_str(line)?)
}

fn main() -> Result<()> {
    init_logging();
    let args = parse_args()?;
    let gpu = Gpu::new(0).context("bench-cremi measures the GPU pipeline and needs a CUDA GPU")?;
    if args.tiled {
        tiled(&args, &gpu)
    } else {
        contiguous(&args, &gpu)
    }
}

/// The labels of the contiguous volume, cropped or mirrored to `--shape`,
/// and where they came from.
fn contiguous_labels(args: &Args) -> Result<(Array3<u32>, String)> {
    let shape = args.shape;
    let from = |path: &Path, dataset: &str, what: &str| -> Result<Array3<u32>> {
        let labels = read_hdf5(path, dataset)
            .with_context(|| format!("reading {dataset} from {}", path.display()))?
            .into_labels(what)?
            .into_dimensionality::<Ix3>()
            .map_err(|_| anyhow!("{what} must be 3-dimensional"))?;
        Ok(gpu_waterz_cli::generate::crop_or_mirror(&labels, shape))
    };
    if let Some(path) = &args.cremi {
        return Ok((from(path, "volumes/labels/neuron_ids", "neuron_ids")?, format!("CREMI {}", path.display())));
    }
    if args.implicit {
        let field = gpu_waterz_cli::generate::ImplicitCells::new(1);
        field.check(shape).map_err(anyhow::Error::msg)?;
        return Ok((field.labels((0, 0, 0), shape), format!("implicit cells of {:?} voxels", field.cell)));
    }
    let pinky = data_dir().join("pinky40-labels-512.h5");
    if pinky.exists() {
        return Ok((from(&pinky, "labels", "pinky40")?, "pinky40 labels (512³) cropped or mirrored".into()));
    }
    eprintln!("bench-cremi: {} is absent; using synthetic neurites", pinky.display());
    let n = shape.0 * shape.1 * shape.2;
    let labels = gpu_waterz_cli::generate::neurite_labels(1, shape, (n / 500_000).max(60));
    Ok((labels, "synthetic drifting-Voronoi neurites".into()))
}

/// The quantiles 0, 10, 50, 90 and 100 % of `values` in their order.
fn quantiles(values: &[u64]) -> [u64; 5] {
    let at = |q: f64| values.get(((values.len() as f64 - 1.0) * q) as usize).copied().unwrap_or(0);
    [at(0.0), at(0.1), at(0.5), at(0.9), at(1.0)]
}

/// The contiguous layout: one volume of `--shape`, no stacking.
fn contiguous(args: &Args, gpu: &Gpu) -> Result<()> {
    let device = gpu.name()?;
    let (z, y, x) = args.shape;
    let t = Instant::now();
    let (labels, source) = contiguous_labels(args)?;
    let affs = match &args.cremi_affinities {
        Some(_) => bail!("--cremi-affinities goes with --tiled (the contiguous layout generates the affinities)"),
        None => gpu_waterz_cli::generate::affinities(&labels, &GeneratorParams { seed: 1, ..Default::default() }),
    };
    eprintln!("bench-cremi: {:?} volume from {source} in {:.1} s", args.shape, t.elapsed().as_secs_f64());
    let dims = Dims3::new(z as u64, y as u64, x as u64);
    let n = dims.z * dims.y * dims.x;
    let config = Config::new(&[args.threshold])
        .epsilon(args.epsilon)
        .host_finish(args.host_finish[0])
        .backend(Backend::Gpu(gpu.clone()));
    let device_affs = DeviceAffinities::upload_f32(gpu, affs.as_slice().expect("generated in C order"), dims)?;
    gpu.reset_peak_pool_bytes()?;
    let (warm_s, run) = decode(gpu, &device_affs, &config)?;
    let peak = gpu.peak_pool_bytes()?;
    let stats = run.gpu_stats().ok_or_else(|| anyhow!("the GPU backend reports its figures"))?;
    let (rounds, host_finishes) = round_counts(&stats);
    let gpu_rounds: Vec<_> = stats.rounds.iter().filter(|r| !r.on_host).collect();
    let merges = quantiles(&gpu_rounds.iter().map(|r| r.n_merged).collect::<Vec<_>>());
    let slots = quantiles(&gpu_rounds.iter().map(|r| r.n_edges).collect::<Vec<_>>());
    let host_merged: u64 = stats.rounds.iter().filter(|r| r.on_host).map(|r| r.n_merged).sum();
    let (n_fragments, n_edges) = (run.n_fragments(), stats.n_edges);
    drop(run);
    let mut times = Vec::new();
    let mut stages = serde_json::Value::Null;
    for _ in 0..args.repeats {
        let (s, run) = decode(gpu, &device_affs, &config)?;
        times.push(s);
        stages = serde_json::to_value(run.timings())?;
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let merging = stages["merging_s"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "bench-cremi: contiguous {:?} = {n} voxels: median {median:.3} s (warm-up {warm_s:.3} s), merging {merging:.3} s, {n_fragments} fragments, {n_edges} edges, {rounds} GPU rounds + {host_finishes} serial finishes ({host_merged} merges on the host); merges per GPU round at 0/10/50/90/100 % of the rounds: {merges:?}; edge slots per round: {slots:?}; stages of the last run (s): {stages}",
        args.shape
    );
    let parhac = parhac_five_thresholds(gpu, &device_affs, args.epsilon, args.host_finish[0], args.repeats)?;
    // The other policies, on the same volume, for the crossover.
    let mut sweep = Vec::new();
    for &policy in &args.host_finish[1..] {
        let config = config.clone().host_finish(policy);
        let mut times = Vec::new();
        let mut row = serde_json::Value::Null;
        for _ in 0..args.repeats {
            let (s, run) = decode(gpu, &device_affs, &config)?;
            let stats = run.gpu_stats().ok_or_else(|| anyhow!("the GPU backend reports its figures"))?;
            let (rounds, on_host) = round_counts(&stats);
            times.push(s);
            row = serde_json::json!({
                "policy": format!("{policy:?}"),
                "merging_s": run.timings().merging_s,
                "rounds": rounds,
                "host_finishes": on_host,
                "host_merges": stats.rounds.iter().filter(|r| r.on_host).map(|r| r.n_merged).sum::<u64>(),
                "host_seconds": stats.rounds.iter().filter(|r| r.on_host).map(|r| r.seconds).sum::<f64>(),
            });
        }
        times.sort_by(f64::total_cmp);
        row["median_decode_s"] = times[times.len() / 2].into();
        row["five_thresholds"] = parhac_five_thresholds(gpu, &device_affs, args.epsilon, policy, args.repeats)?;
        eprintln!("bench-cremi: policy {row}");
        sweep.push(row);
    }
    drop(device_affs);

    let measure_quality = n <= WATERZ_MAX_VOXELS;
    let gt = labels.mapv(u64::from);
    let mut evaluation = serde_json::Value::Null;
    let metrics = if measure_quality {
        let graph = AffinityGraph::from_f32(affs.view())?;
        let mut run = Agglomeration::new(&graph, config.clone().ground_truth(gt.clone()))?;
        let result = run.next_threshold()?.ok_or_else(|| anyhow!("no threshold"))?;
        // The evaluation on the GPU against the CPU's on the same volumes.
        let gpu_s = run.timings().evaluation_s;
        let t = Instant::now();
        let cpu = gpu_waterz_eval::evaluate(result.segmentation.view(), gt.view())?;
        let cpu_s = t.elapsed().as_secs_f64();
        let equal = result.metrics.is_some_and(|m| {
            [m.voi_split, m.voi_merge, m.rand_split, m.rand_merge].map(f64::to_bits)
                == [cpu.voi_split, cpu.voi_merge, cpu.rand_split, cpu.rand_merge].map(f64::to_bits)
        });
        evaluation = serde_json::json!({ "gpu_s": gpu_s, "cpu_s": cpu_s, "bit_identical": equal });
        eprintln!("bench-cremi: evaluation on the GPU {gpu_s:.4} s (ground truth upload included), on the CPU {cpu_s:.4} s ({} threads); bit-identical: {equal}", rayon::current_num_threads());
        result.metrics
    } else {
        None
    };
    let waterz = if args.waterz && measure_quality { Some(run_waterz(args, &affs, &gt)?) } else { None };
    let mut summary = serde_json::json!({
        "device": device,
        "layout": "contiguous",
        "source": source,
        "shape": [z, y, x],
        "voxels": n,
        "threshold": args.threshold,
        "epsilon": args.epsilon,
        "decode": {
            "median_s": median,
            "times_s": times,
            "warm_up_s": warm_s,
            "gvoxels_per_s": n as f64 / median / 1e9,
            "stages_s": stages,
            "peak_device_bytes": peak,
            "n_fragments": n_fragments,
            "n_edges": n_edges,
            "rounds": rounds,
            "host_finishes": host_finishes,
            "host_merges": host_merged,
            "host_finish": format!("{:?}", args.host_finish[0]),
            "merges_per_round_quantiles": merges,
            "slots_per_round_quantiles": slots,
        },
        "parhac_five_thresholds": parhac,
        "host_finish_sweep": sweep,
        "evaluation": evaluation,
    });
    if let Some(m) = &metrics {
        summary["gpu_voi_split"] = m.voi_split.into();
        summary["gpu_voi_merge"] = m.voi_merge.into();
    }
    let mut waterz_cell = if measure_quality {
        "not run (pass --waterz)".to_string()
    } else {
        format!("not run: more than {WATERZ_MAX_VOXELS} voxels")
    };
    if let Some(w) = &waterz {
        let seconds = w["seconds"].as_f64().unwrap_or(f64::NAN);
        summary["waterz"] = w.clone();
        summary["speedup"] = (seconds / median).into();
        waterz_cell = format!(
            "{seconds:.2} s ({:.2} Mvoxel/s); VOI split/merge {:.4}/{:.4}; GPU {:.0}× faster; its merging at 0.1..0.9 {:.2} s",
            n as f64 / seconds / 1e6,
            w["voi_split"].as_f64().unwrap_or(f64::NAN),
            w["voi_merge"].as_f64().unwrap_or(f64::NAN),
            seconds / median,
            w["merging_five_thresholds_seconds"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let text = serde_json::to_string_pretty(&summary)?;
    write_atomically(&args.json, text.as_bytes())?;
    println!("{text}");
    if let Some(md) = &args.markdown {
        let quality = match &metrics {
            Some(m) => format!("GPU VOI split/merge {:.4}/{:.4}", m.voi_split, m.voi_merge),
            None => "VOI not measured (volume too large for the side-by-side)".into(),
        };
        let row = format!(
            "| bench-cremi (contiguous) | {device} | threshold {}, ε {}, {source} | {z}×{y}×{x} = {:.3} G: {median:.3} s ({:.2} Gvox/s, peak {}); merging {merging:.3} s in {rounds} GPU rounds + {host_finishes} serial finish ({host_merged} merges) (merges per GPU round, quantiles 0/10/50/90/100 %: {merges:?}); ParHAC at 0.1..0.9 {:.3} s, {} GPU rounds + {} serial finishes | {quality} | {waterz_cell} |\n",
            args.threshold,
            args.epsilon,
            n as f64 / 1e9,
            n as f64 / median / 1e9,
            peak_text(peak, n),
            parhac["median_merging_s"].as_f64().unwrap_or(f64::NAN),
            parhac["rounds"],
            parhac["host_finishes"],
        );
        let mut md_text = std::fs::read_to_string(md).unwrap_or_default();
        md_text.push_str(&row);
        write_atomically(md, md_text.as_bytes())?;
    }
    Ok(())
}

/// The tiled layout: a tile stacked along z to each size.
fn tiled(args: &Args, gpu: &Gpu) -> Result<()> {
    let device = gpu.name()?;
    let (_, total_memory) = gpu.memory_info()?;
    let t = Instant::now();
    let (tile_labels, tile_affs, source) = make_tile(args)?;
    eprintln!("bench-cremi: tile {:?} from {source} in {:.1} s", args.tile, t.elapsed().as_secs_f64());
    let tile_voxels = (args.tile.0 * args.tile.1 * args.tile.2) as u64;
    let config = Config::new(&[args.threshold])
        .epsilon(args.epsilon)
        .host_finish(args.host_finish[0])
        .backend(Backend::Gpu(gpu.clone()));

    let mut sizes = Vec::new();
    let mut parhac = None;
    for &target in &args.sizes {
        let n_tiles = (target as f64 / tile_voxels as f64).round().max(1.0) as u64;
        let affs = stacked(gpu, &tile_affs, n_tiles)?;
        let dims = affs.dims();
        let n = affs.n_voxels();
        // The first decode warms up and measures the memory: the high
        // watermark of the stream-ordered pool every buffer comes from
        // (affinities included).
        gpu.reset_peak_pool_bytes()?;
        let (warm_s, run) = decode(gpu, &affs, &config)?;
        let peak = gpu.peak_pool_bytes()?;
        let stats = run.gpu_stats().ok_or_else(|| anyhow!("the GPU backend reports its figures"))?;
        let (n_fragments, n_edges, parhac_rounds) = (run.n_fragments(), stats.n_edges, round_counts(&stats).0);
        let slots: Vec<u64> = stats.rounds.iter().map(|r| r.n_edges).collect();
        let at = |q: f64| slots.get(((slots.len() as f64 - 1.0) * q) as usize).copied().unwrap_or(0);
        let slot_profile = [at(0.0), at(0.1), at(0.5), at(0.9), at(1.0)];
        drop(run);
        let mut times = Vec::new();
        let mut stages = serde_json::Value::Null;
        for _ in 0..args.repeats {
            let (s, run) = decode(gpu, &affs, &config)?;
            times.push(s);
            stages = serde_json::to_value(run.timings())?;
        }
        eprintln!("bench-cremi: stages of the last run (s): {stages}; edge slots per round at 0/10/50/90/100 % of the rounds: {slot_profile:?}");
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        eprintln!(
            "bench-cremi: {n} voxels {dims:?}: median {median:.3} s ({:.2} Gvoxel/s; warm-up {warm_s:.3} s), {n_fragments} fragments, {n_edges} edges, {parhac_rounds} rounds, peak device memory {}",
            n as f64 / median / 1e9,
            peak_text(peak, n)
        );
        if target == *args.sizes.last().expect("sizes") {
            parhac = Some(parhac_five_thresholds(gpu, &affs, args.epsilon, args.host_finish[0], args.repeats)?);
        }
        sizes.push(SizeResult {
            voxels: n,
            shape: [dims.z, dims.y, dims.x],
            n_fragments,
            n_edges,
            parhac_rounds,
            median_s: median,
            times_s: times,
            gvoxels_per_s: n as f64 / median / 1e9,
            stages_s: stages,
            peak_device_bytes: peak,
            affinity_bytes: 12 * n,
            slots_per_round_quantiles: slot_profile,
        });
        drop(affs);
    }

    // VOI on one tile, where stock waterz can run too.
    let gt = tile_labels.mapv(u64::from);
    let graph = AffinityGraph::from_f32(tile_affs.view())?;
    let mut crop_run = Agglomeration::new(&graph, config.clone().ground_truth(gt.clone()))?;
    let crop_result = crop_run.next_threshold()?.ok_or_else(|| anyhow!("no threshold"))?;
    let crop_metrics = crop_result.metrics.ok_or_else(|| anyhow!("no metrics"))?;
    let waterz = if args.waterz { Some(run_waterz(args, &tile_affs, &gt)?) } else { None };
    let largest = sizes.last().expect("at least one size");
    let gpu_rate = largest.voxels as f64 / largest.median_s;
    let mut summary = serde_json::json!({
        "device": device,
        "device_memory_bytes": total_memory,
        "source": source,
        "tile": [args.tile.0, args.tile.1, args.tile.2],
        "threshold": args.threshold,
        "epsilon": args.epsilon,
        "sizes": sizes,
        "parhac_five_thresholds": parhac,
        "crop": {
            "voxels": tile_voxels,
            "gpu_voi_split": crop_metrics.voi_split,
            "gpu_voi_merge": crop_metrics.voi_merge,
        },
    });
    let mut waterz_cell = "not run (pass --waterz)".to_string();
    if let Some(w) = &waterz {
        let seconds = w["seconds"].as_f64().unwrap_or(f64::NAN);
        let rate = tile_voxels as f64 / seconds;
        summary["crop"]["waterz"] = w.clone();
        summary["crop"]["waterz_mvoxels_per_s"] = (rate / 1e6).into();
        summary["speedup_per_voxel"] = (gpu_rate / rate).into();
        waterz_cell = format!(
            "{:.2} Mvoxel/s ({seconds:.2} s on the tile); VOI split/merge {:.4}/{:.4}; GPU {:.0}× per voxel; merging at 0.1..0.9 {:.2} s on the tile",
            rate / 1e6,
            w["voi_split"].as_f64().unwrap_or(f64::NAN),
            w["voi_merge"].as_f64().unwrap_or(f64::NAN),
            gpu_rate / rate,
            w["merging_five_thresholds_seconds"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let text = serde_json::to_string_pretty(&summary)?;
    write_atomically(&args.json, text.as_bytes())?;
    println!("{text}");
    if let Some(p) = &summary["parhac_five_thresholds"].as_object() {
        waterz_cell.push_str(&format!(
            "; GPU ParHAC at 0.1..0.9 on the largest graph ({} edges): {:.3} s, {} rounds",
            p["n_edges"],
            p["median_merging_s"].as_f64().unwrap_or(f64::NAN),
            p["rounds"]
        ));
    }
    if let Some(md) = &args.markdown {
        append_row(md, &device, args, &sizes, &crop_metrics, &waterz_cell)?;
    }
    Ok(())
}

fn append_row(
    md: &Path,
    device: &str,
    args: &Args,
    sizes: &[SizeResult],
    crop: &gpu_waterz::Metrics,
    waterz_cell: &str,
) -> Result<()> {
    let times: Vec<String> = sizes
        .iter()
        .map(|s| {
            format!(
                "{:.2} G: {:.3} s ({:.2} Gvox/s, peak {})",
                s.voxels as f64 / 1e9,
                s.median_s,
                s.gvoxels_per_s,
                peak_text(s.peak_device_bytes, s.voxels)
            )
        })
        .collect();
    let row = format!(
        "| bench-cremi | {device} | threshold {}, ε {}, tile {:?} | {} | GPU VOI split/merge {:.4}/{:.4} on one tile | {waterz_cell} |\n",
        args.threshold,
        args.epsilon,
        args.tile,
        times.join("; "),
        crop.voi_split,
        crop.voi_merge
    );
    let mut text = std::fs::read_to_string(md).unwrap_or_default();
    text.push_str(&row);
    write_atomically(md, text.as_bytes())?;
    Ok(())
}
