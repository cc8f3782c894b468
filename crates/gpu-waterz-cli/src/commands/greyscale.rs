//! `gpu-waterz watershed`: the greyscale watershed of a 2D image or 3D
//! volume (seed 001's cellular automaton), file to file. Prints a JSON
//! summary (shape, backend, schedule, global steps per phase, seconds per
//! stage) on stdout.

use super::outputs::OutputFolder;
use anyhow::{anyhow, bail, Context, Result};
use clap::ValueEnum;
use gpu_waterz_abi::greyscale::f32_key;
use gpu_waterz_abi::Dims3;
use gpu_waterz_cli::io::{write_npy, Volume, VolumeSource};
use gpu_waterz_watershed::greyscale::{cpu, gpu as on_gpu, reference, Config, Image, Schedule, Segmentation};
use ndarray::ArrayViewD;
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The GPU.
    Gpu,
    /// Tiles on every CPU core.
    Cpu,
    /// The plain synchronous automaton (slow; the definition).
    Reference,
    /// The GPU when one is usable, else the CPU.
    Auto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ScheduleArg {
    /// Tiles settle between global steps; equal to the synchronous labels.
    ArtifactFree,
    /// Tiles settle between global steps with the first-arrival wavefront
    /// (artifacts on plateaus).
    BlockAsynchronous,
    /// One update per cell per global step.
    Synchronous,
}

/// The arguments of `gpu-waterz watershed`.
#[derive(clap::Args)]
pub struct WatershedArgs {
    /// The image: `.npy`, `file.h5:/dataset` or `dir.zarr/array`; 2D or 3D,
    /// float32, uint8, uint32 or uint64.
    #[arg(long)]
    image: String,
    /// Where to write the labels (.npy, uint32, the image's shape).
    #[arg(long)]
    out: PathBuf,
    /// Markers (integer labels, 0 unmarked) of the image's shape; the
    /// regional minima without.
    #[arg(long)]
    markers: Option<String>,
    /// Mask of the image's shape (0: outside, labelled 0).
    #[arg(long)]
    mask: Option<String>,
    /// Neighbours: 1 (4 or 6), 2 (8 or 18) or 3 (26).
    #[arg(long, default_value_t = 1)]
    connectivity: u32,
    /// Set the cells between basins to 0.
    #[arg(long)]
    watershed_line: bool,
    /// The update schedule.
    #[arg(long, value_enum, default_value_t = ScheduleArg::ArtifactFree)]
    schedule: ScheduleArg,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// Replace an existing output file.
    #[arg(long)]
    overwrite: bool,
}

/// The 3D extent of a 2D or 3D shape (`z = 1` for 2D).
fn dims_of(shape: &[usize], what: &str) -> Result<Dims3> {
    match *shape {
        [y, x] => Ok(Dims3::new(1, y as u64, x as u64)),
        [z, y, x] => Ok(Dims3::new(z as u64, y as u64, x as u64)),
        _ => bail!("the {what} must be 2D or 3D, not of shape {shape:?}"),
    }
}

/// Order-keeping `u32` keys of an image.
fn keys_of(volume: Volume, spec: &str) -> Result<Vec<u32>> {
    Ok(match volume {
        Volume::F32(a) => {
            let nan = || anyhow!("the image {spec} holds NaN, which has no order");
            match a.as_slice() {
                Some(values) => values.par_iter().map(|&v| f32_key(v)).collect::<Option<Vec<u32>>>().ok_or_else(nan)?,
                None => a.iter().map(|&v| f32_key(v)).collect::<Option<Vec<u32>>>().ok_or_else(nan)?,
            }
        }
        Volume::U8(a) => a.iter().map(|&v| v as u32).collect(),
        Volume::U32(a) => a.iter().copied().collect(),
        Volume::U64(a) => {
            // The rank of each value among the distinct values.
            let mut distinct: Vec<u64> = a.iter().copied().collect();
            distinct.par_sort_unstable();
            distinct.dedup();
            let values: Vec<u64> = a.iter().copied().collect();
            values.par_iter().map(|v| distinct.binary_search(v).expect("every value is there") as u32).collect()
        }
        other => bail!("the image {spec} must be float32, uint8, uint32 or uint64, not {}", other.dtype()),
    })
}

fn same_shape(shape: &[usize], want: &[usize], what: &str) -> Result<()> {
    if shape != want {
        bail!("the {what} has shape {shape:?}, the image {want:?}");
    }
    Ok(())
}

fn flat<T: Copy>(a: ArrayViewD<'_, T>) -> Vec<T> {
    a.iter().copied().collect()
}

pub fn run(args: &WatershedArgs) -> Result<()> {
    let start = Instant::now();
    // The output appears whole or not at all (as `segment`'s do).
    let output = OutputFolder::begin(&args.out, args.overwrite, true)?;
    let image = VolumeSource::parse(&args.image).read().context("reading the image")?;
    let shape = image.shape().to_vec();
    let dims = dims_of(&shape, "image")?;
    let keys = keys_of(image, &args.image)?;
    let markers = match &args.markers {
        Some(spec) => {
            let m = VolumeSource::parse(spec).read().context("reading the markers")?.into_labels(spec)?;
            same_shape(m.shape(), &shape, "markers")?;
            let values = flat(m.view());
            let wide = values.iter().find(|&&v| v > u32::MAX as u64);
            if let Some(v) = wide {
                bail!("marker {v} does not fit 32 bits");
            }
            Some(values.into_iter().map(|v| v as u32).collect::<Vec<u32>>())
        }
        None => None,
    };
    let mask = match &args.mask {
        Some(spec) => {
            let m = VolumeSource::parse(spec).read().context("reading the mask")?;
            same_shape(m.shape(), &shape, "mask")?;
            Some(match m {
                Volume::F32(a) => a.iter().map(|&v| (v != 0.0) as u8).collect::<Vec<u8>>(),
                Volume::U8(a) => a.iter().map(|&v| (v != 0) as u8).collect(),
                Volume::U32(a) => a.iter().map(|&v| (v != 0) as u8).collect(),
                Volume::U64(a) => a.iter().map(|&v| (v != 0) as u8).collect(),
                other => bail!("the mask must hold numbers, not {}", other.dtype()),
            })
        }
        None => None,
    };
    let read_s = start.elapsed().as_secs_f64();
    let schedule = match args.schedule {
        ScheduleArg::ArtifactFree => Schedule::ArtifactFree,
        ScheduleArg::BlockAsynchronous => Schedule::BlockAsynchronous,
        ScheduleArg::Synchronous => Schedule::Synchronous,
    };
    let config = Config::new().connectivity(args.connectivity).watershed_line(args.watershed_line).schedule(schedule);
    let input = Image { keys: &keys, dims, markers: markers.as_deref(), mask: mask.as_deref() };
    let gpu = match args.backend {
        Backend::Gpu => Some(gpu_waterz::Gpu::new(0).context("opening the GPU (--backend gpu)")?),
        Backend::Auto => gpu_waterz::Gpu::new(0).ok(),
        Backend::Cpu | Backend::Reference => None,
    };
    let compute = Instant::now();
    let (out, ran): (Segmentation, &str) = match (&gpu, args.backend) {
        (Some(g), _) => (on_gpu::watershed(g, &input, &config)?, "gpu"),
        (None, Backend::Reference) => (reference::watershed(&input, &config)?, "reference"),
        (None, _) => (cpu::watershed(&input, &config)?, "cpu"),
    };
    let compute_s = compute.elapsed().as_secs_f64();
    let write = Instant::now();
    let labels = ndarray::ArrayView::from_shape(shape.clone(), &out.labels).expect("one label per cell");
    write_npy(output.path(), &labels).with_context(|| format!("writing {}", args.out.display()))?;
    output.commit(false)?;
    let summary = serde_json::json!({
        "image": args.image,
        "shape": shape,
        "backend": ran,
        "schedule": schedule.name(),
        "connectivity": args.connectivity,
        "watershed_line": args.watershed_line,
        "n_minima": out.n_minima,
        "global_steps": out.steps,
        "read_s": read_s,
        "compute_s": compute_s,
        "write_s": write.elapsed().as_secs_f64(),
        "wall_s": start.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
