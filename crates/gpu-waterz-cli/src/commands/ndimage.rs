//! `gpu-waterz ndimage`: scipy.ndimage's operators on volumes in files
//! (`gpu-waterz-morphology`): the exact Euclidean distance transform (GPU
//! for rank 1 to 3 when one is usable, else the CPU) and the grey-scale
//! morphology (CPU). Prints a JSON summary on stdout.

use super::outputs::OutputFolder;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use gpu_waterz_cli::io::{write_npy, Volume, VolumeSource};
use gpu_waterz_morphology::{Element, Grey, Mode};
use ndarray::ArrayD;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Operator {
    /// Distance of every non-zero element to the nearest zero (float64).
    DistanceTransformEdt,
    GreyErosion,
    GreyDilation,
    GreyOpening,
    GreyClosing,
    MorphologicalGradient,
    MorphologicalLaplace,
    WhiteTophat,
    BlackTophat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The GPU when one is usable (distance transform, rank 1 to 3), else the CPU.
    Auto,
    /// The GPU (distance transform only).
    Gpu,
    /// The CPU.
    Cpu,
}

/// The arguments of `gpu-waterz ndimage`.
#[derive(clap::Args)]
pub struct NdimageArgs {
    /// The operator, with scipy.ndimage's name.
    #[arg(long, value_enum)]
    op: Operator,
    /// The input: `.npy`, `file.h5:/dataset` or `dir.zarr/array` (float32,
    /// uint8, uint32 or uint64).
    #[arg(long)]
    input: String,
    /// Where to write the result (.npy: float64 distances, or the input's
    /// type for the morphology).
    #[arg(long)]
    out: PathBuf,
    /// The structuring element's size per axis (one value for all), for the
    /// morphology.
    #[arg(long, value_delimiter = ',', default_value = "3")]
    size: Vec<usize>,
    /// Boundary mode of the morphology: reflect, constant, nearest, mirror, wrap.
    #[arg(long, default_value = "reflect")]
    mode: String,
    /// The value outside the array with `--mode constant`.
    #[arg(long, default_value_t = 0.0)]
    cval: f64,
    /// Spacing per axis (one value for all) of the distance transform.
    #[arg(long, value_delimiter = ',')]
    sampling: Option<Vec<f64>>,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// Replace an existing output file.
    #[arg(long)]
    overwrite: bool,
}

/// The input as float64 (exact for every type read but uint64 above 2^53).
fn as_f64(volume: Volume, spec: &str) -> Result<(ArrayD<f64>, &'static str)> {
    let dtype = volume.dtype();
    Ok(match volume {
        Volume::F32(a) => (a.mapv(f64::from), dtype),
        Volume::U8(a) => (a.mapv(f64::from), dtype),
        Volume::U32(a) => (a.mapv(f64::from), dtype),
        Volume::U64(a) => {
            if a.iter().any(|&v| v > 1 << 53) {
                bail!("{spec}: uint64 values above 2^53 do not survive float64");
            }
            (a.mapv(|v| v as f64), dtype)
        }
        other => bail!("{spec}: unsupported element type {}", other.dtype()),
    })
}

pub fn run(args: &NdimageArgs) -> Result<()> {
    let start = Instant::now();
    // The output appears whole or not at all (as `segment`'s do).
    let output = OutputFolder::begin(&args.out, args.overwrite, true)?;
    let volume = VolumeSource::parse(&args.input).read().context("reading the input")?;
    let shape = volume.shape().to_vec();
    let rank = shape.len();
    let read_s = start.elapsed().as_secs_f64();
    let compute = Instant::now();
    let ran;
    if args.op == Operator::DistanceTransformEdt {
        let mask = match volume {
            Volume::F32(a) => a.mapv(|v| v != 0.0),
            Volume::U8(a) => a.mapv(|v| v != 0),
            Volume::U32(a) => a.mapv(|v| v != 0),
            Volume::U64(a) => a.mapv(|v| v != 0),
            other => bail!("{}: unsupported element type {}", args.input, other.dtype()),
        };
        let gpu = match args.backend {
            Backend::Gpu => Some(gpu_waterz::Gpu::new(0).context("opening the GPU (--backend gpu)")?),
            Backend::Auto if rank <= 3 => gpu_waterz::Gpu::new(0).ok(),
            _ => None,
        };
        let distances = match &gpu {
            Some(g) => {
                ran = "gpu";
                gpu_waterz_morphology::gpu::distance_transform_edt_host(g, mask.view(), args.sampling.as_deref())?
            }
            None => {
                ran = "cpu";
                gpu_waterz_morphology::distance_transform_edt(mask.view(), args.sampling.as_deref())?
            }
        };
        write_npy(output.path(), &distances.view()).with_context(|| format!("writing {}", args.out.display()))?;
    } else {
        let (input, dtype) = as_f64(volume, &args.input)?;
        if args.backend == Backend::Gpu {
            bail!("the morphology runs on the CPU (--backend cpu or auto)");
        }
        ran = "cpu";
        let size = match args.size.len() {
            1 => vec![args.size[0]; rank],
            n if n == rank => args.size.clone(),
            n => bail!("--size has {n} values for an input of rank {rank}"),
        };
        let mode: Mode = args.mode.parse()?;
        let grey = Grey { element: Element::Size(size), mode, cval: args.cval, origin: vec![0; rank] };
        let op = match args.op {
            Operator::GreyErosion => gpu_waterz_morphology::grey_erosion,
            Operator::GreyDilation => gpu_waterz_morphology::grey_dilation,
            Operator::GreyOpening => gpu_waterz_morphology::grey_opening,
            Operator::GreyClosing => gpu_waterz_morphology::grey_closing,
            Operator::MorphologicalGradient => gpu_waterz_morphology::morphological_gradient,
            Operator::MorphologicalLaplace => gpu_waterz_morphology::morphological_laplace,
            Operator::WhiteTophat => gpu_waterz_morphology::white_tophat,
            Operator::BlackTophat => gpu_waterz_morphology::black_tophat,
            Operator::DistanceTransformEdt => unreachable!("handled above"),
        };
        let result = op(input.view(), &grey)?;
        // Back to the input's type, as scipy returns it (the values are the
        // input's own for the flat operators, differences of them else).
        let path = output.path();
        let written = match dtype {
            "float32" => write_npy(path, &result.mapv(|v| v as f32).view()),
            "uint8" => write_npy(path, &result.mapv(|v| v as u8).view()),
            "uint32" => write_npy(path, &result.mapv(|v| v as u32).view()),
            _ => write_npy(path, &result.mapv(|v| v as u64).view()),
        };
        written.with_context(|| format!("writing {}", args.out.display()))?;
    }
    output.commit(false)?;
    let summary = serde_json::json!({
        "op": format!("{:?}", args.op),
        "input": args.input,
        "shape": shape,
        "backend": ran,
        "read_s": read_s,
        "compute_and_write_s": compute.elapsed().as_secs_f64(),
        "wall_s": start.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
