//! `gpu-waterz ndimage`: scipy.ndimage's operators on volumes in files
//! (`gpu-waterz-morphology`): the exact Euclidean and chamfer distance
//! transforms (GPU for rank 1 to 3 when one is usable, the chamfer one for
//! axes of at most 12,288 elements; else the CPU), the grey-scale and
//! the binary morphology (GPU when one is usable, else the CPU). Prints a
//! JSON summary on stdout, with the seconds spent reading, opening the GPU,
//! computing (copies to and from the GPU included) and writing.

use super::outputs::OutputFolder;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use gpu_waterz_cli::io::{write_npy, Volume, VolumeSource};
use gpu_waterz_morphology::gpu::BinaryOperator;
use gpu_waterz_morphology::gpu::{GreyFilter, GreyOperator, GreyValue, NumpyArithmetic};
use gpu_waterz_morphology::{Element, Grey, Mode};
use ndarray::{ArrayD, CowArray, IxDyn};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Operator {
    /// Distance of every non-zero element to the nearest zero (float64).
    DistanceTransformEdt,
    /// The chamfer distance (`--metric`) of every non-zero element to the
    /// nearest zero (int32; -1 everywhere without a zero).
    DistanceTransformCdt,
    GreyErosion,
    GreyDilation,
    GreyOpening,
    GreyClosing,
    MorphologicalGradient,
    MorphologicalLaplace,
    WhiteTophat,
    BlackTophat,
    /// The binary operators: the input's non-zero elements are true; the
    /// result is written as uint8 (0 or 1).
    BinaryErosion,
    BinaryDilation,
    BinaryOpening,
    BinaryClosing,
    BinaryFillHoles,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The GPU when one is usable (the distance transform for rank 1 to 3), else the CPU.
    Auto,
    /// The GPU.
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
    /// Where to write the result (.npy: float64 or int32 distances, or the
    /// input's type for the morphology).
    #[arg(long)]
    out: PathBuf,
    /// The structuring element's size per axis (one value for all), for the
    /// morphology.
    #[arg(long, value_delimiter = ',', default_value = "3")]
    size: Vec<usize>,
    /// Boundary mode of the morphology: reflect, constant, nearest, mirror, wrap.
    #[arg(long, default_value = "reflect")]
    mode: String,
    /// The value outside the array with `--mode constant` (for integer
    /// input, a value of its type).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    cval: f64,
    /// The binary operators' structure: scipy's
    /// `generate_binary_structure(rank, connectivity)` (1: the cross).
    #[arg(long, default_value_t = 1)]
    connectivity: usize,
    /// The binary operators' steps (below 1: until nothing changes).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    iterations: i64,
    /// The value outside the array for the binary operators (0 or 1).
    #[arg(long, default_value_t = 0)]
    border_value: u8,
    /// Spacing per axis (one value for all) of the distance transform.
    #[arg(long, value_delimiter = ',')]
    sampling: Option<Vec<f64>>,
    /// The chamfer distance transform's metric: chessboard or taxicab.
    #[arg(long, default_value = "chessboard")]
    metric: String,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// Replace an existing output file.
    #[arg(long)]
    overwrite: bool,
}

/// A CPU grey-scale operator.
type GreyFn = fn(ndarray::ArrayViewD<'_, f64>, &Grey<'_>) -> gpu_waterz_morphology::Result<ArrayD<f64>>;

/// The element types the CLI reads and writes for the grey-scale
/// operators, with numpy's arithmetic, and the type that crosses to the
/// GPU holding every one of their values exactly (float32 and uint8 as
/// they are, each filtered in its own type on the device; float64 for
/// uint32 and uint64 up to 2^53).
trait Step: NumpyArithmetic + gpu_waterz_cli::io::NpyElement + 'static {
    /// The host type [`grey_filters_host`] takes.
    ///
    /// [`grey_filters_host`]: gpu_waterz_morphology::gpu::grey_filters_host
    type Gpu: GreyValue;
    fn to_gpu(self) -> Self::Gpu;
    fn from_gpu(v: Self::Gpu) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;

    /// The array in the GPU's host type (borrowed where that is its own).
    fn gpu_values(a: &ArrayD<Self>) -> CowArray<'_, Self::Gpu, IxDyn> {
        ndarray::Zip::from(a).par_map_collect(|&v| v.to_gpu()).into()
    }

    /// An array of the GPU's host type in this type (moved where that is
    /// its own).
    fn from_gpu_values(a: ArrayD<Self::Gpu>) -> ArrayD<Self> {
        ndarray::Zip::from(&a).par_map_collect(|&v| Self::from_gpu(v))
    }
}

macro_rules! own_step {
    ($($t:ty),*) => {$(
        impl Step for $t {
            type Gpu = $t;
            fn to_gpu(self) -> $t {
                self
            }
            fn from_gpu(v: $t) -> Self {
                v
            }
            fn gpu_values(a: &ArrayD<$t>) -> CowArray<'_, $t, IxDyn> {
                a.view().into()
            }
            fn from_gpu_values(a: ArrayD<$t>) -> ArrayD<$t> {
                a
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}

macro_rules! widened_step {
    ($($t:ty => $gpu:ty),*) => {$(
        impl Step for $t {
            type Gpu = $gpu;
            fn to_gpu(self) -> $gpu {
                self as $gpu
            }
            fn from_gpu(v: $gpu) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}

own_step!(f32, u8);
widened_step!(u32 => f64, u64 => f64);

/// `operator`'s filters of `input` on `gpu` (from `T::Gpu`, which holds
/// every value exactly: the filters only pick input values, so the results
/// come back unchanged) or, without one, on the CPU (in float64), combined
/// in the input's type ([`GreyOperator::combine`]). A float32 or uint8
/// input goes to the GPU and comes back without a conversion on the host.
fn grey_operator<T: Step>(
    gpu: Option<&gpu_waterz::Gpu>,
    input: &ArrayD<T>,
    grey: &Grey<'_>,
    operator: GreyOperator,
) -> Result<ArrayD<T>> {
    let filters = operator.filters();
    let filtered: Vec<ArrayD<T>> = match gpu {
        Some(g) => {
            let values = T::gpu_values(input);
            let strategy = gpu_waterz_morphology::gpu::Strategy::Auto;
            gpu_waterz_morphology::gpu::grey_filters_host(g, values.view(), 0, grey, filters, strategy)?
                .into_iter()
                .map(T::from_gpu_values)
                .collect()
        }
        None => {
            let values = ndarray::Zip::from(input).par_map_collect(|&v| v.to_f64());
            filters
                .iter()
                .map(|f| {
                    let op: GreyFn = match f {
                        GreyFilter::Erosion => gpu_waterz_morphology::grey_erosion,
                        GreyFilter::Dilation => gpu_waterz_morphology::grey_dilation,
                        GreyFilter::Opening => gpu_waterz_morphology::grey_opening,
                        GreyFilter::Closing => gpu_waterz_morphology::grey_closing,
                    };
                    Ok(op(values.view(), grey)?.mapv(T::from_f64))
                })
                .collect::<gpu_waterz_morphology::Result<Vec<_>>>()?
        }
    };
    Ok(operator.combine(filtered, input.view())?)
}

/// Where the input is not zero.
fn nonzero<T: From<bool> + Send>(volume: Volume, spec: &str) -> Result<ArrayD<T>> {
    Ok(match volume {
        Volume::F32(a) => ndarray::Zip::from(&a).par_map_collect(|&v| T::from(v != 0.0)),
        Volume::U8(a) => ndarray::Zip::from(&a).par_map_collect(|&v| T::from(v != 0)),
        Volume::U32(a) => ndarray::Zip::from(&a).par_map_collect(|&v| T::from(v != 0)),
        Volume::U64(a) => ndarray::Zip::from(&a).par_map_collect(|&v| T::from(v != 0)),
        other => bail!("{spec}: unsupported element type {}", other.dtype()),
    })
}

/// A result to write, in the type the operator gives.
enum Computed {
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
    I32(ArrayD<i32>),
    U8(ArrayD<u8>),
    U32(ArrayD<u32>),
    U64(ArrayD<u64>),
}

impl Computed {
    fn write(&self, path: &std::path::Path) -> std::result::Result<(), gpu_waterz_cli::io::IoError> {
        match self {
            Computed::F32(a) => write_npy(path, &a.view()),
            Computed::F64(a) => write_npy(path, &a.view()),
            Computed::I32(a) => write_npy(path, &a.view()),
            Computed::U8(a) => write_npy(path, &a.view()),
            Computed::U32(a) => write_npy(path, &a.view()),
            Computed::U64(a) => write_npy(path, &a.view()),
        }
    }
}

pub fn run(args: &NdimageArgs) -> Result<()> {
    let start = Instant::now();
    // The output appears whole or not at all (as `segment`'s do).
    let output = OutputFolder::begin(&args.out, args.overwrite, true)?;
    let volume = VolumeSource::parse(&args.input).read().context("reading the input")?;
    let shape = volume.shape().to_vec();
    let rank = shape.len();
    let read_s = start.elapsed().as_secs_f64();
    // The GPU where one is asked for or usable (the distance transforms'
    // for rank 1 to 3 only, the chamfer one's for axes that fit).
    let on_gpu = match args.op {
        Operator::DistanceTransformEdt => rank <= 3,
        Operator::DistanceTransformCdt => gpu_waterz_morphology::gpu::takes_chamfer(&shape),
        _ => true,
    };
    let metric: gpu_waterz_morphology::distance::Metric =
        args.metric.parse().map_err(|e| anyhow::anyhow!("--metric {}: {e}", args.metric))?;
    if args.op == Operator::DistanceTransformCdt && metric == gpu_waterz_morphology::distance::Metric::Euclidean {
        bail!("--metric of the chamfer transform is chessboard or taxicab, not {}", args.metric);
    }
    let opened = Instant::now();
    let gpu = match args.backend {
        Backend::Gpu => Some(gpu_waterz::Gpu::new(0).context("opening the GPU (--backend gpu)")?),
        Backend::Auto if on_gpu => gpu_waterz::Gpu::new(0).ok(),
        Backend::Auto | Backend::Cpu => None,
    };
    let gpu = gpu.as_ref();
    let gpu_open_s = opened.elapsed().as_secs_f64();
    let compute = Instant::now();
    let binary = match args.op {
        Operator::BinaryErosion => Some(BinaryOperator::Erosion),
        Operator::BinaryDilation => Some(BinaryOperator::Dilation),
        Operator::BinaryOpening => Some(BinaryOperator::Opening),
        Operator::BinaryClosing => Some(BinaryOperator::Closing),
        Operator::BinaryFillHoles => Some(BinaryOperator::FillHoles),
        _ => None,
    };
    let computed = if let Some(operator) = binary {
        if args.border_value > 1 {
            bail!("--border-value must be 0 or 1, not {}", args.border_value);
        }
        let structure = gpu_waterz_morphology::generate_binary_structure(rank, args.connectivity)?;
        let binary_args = gpu_waterz_morphology::Binary {
            structure: structure.view(),
            iterations: args.iterations,
            mask: None,
            border_value: args.border_value == 1,
            origin: vec![0; rank],
        };
        // On the GPU the input becomes the kernels' bytes (0 or 1), which
        // are also the result to write.
        Computed::U8(match gpu {
            Some(g) => {
                let bytes = nonzero::<u8>(volume, &args.input)?;
                gpu_waterz_morphology::gpu::binary_operator_bytes(g, bytes.view(), &binary_args, operator)?
            }
            None => {
                let mask = nonzero::<bool>(volume, &args.input)?;
                let view = mask.view();
                let result = match operator {
                    BinaryOperator::Erosion => gpu_waterz_morphology::binary_erosion(view, &binary_args)?,
                    BinaryOperator::Dilation => gpu_waterz_morphology::binary_dilation(view, &binary_args)?,
                    BinaryOperator::Opening => gpu_waterz_morphology::binary_opening(view, &binary_args)?,
                    BinaryOperator::Closing => gpu_waterz_morphology::binary_closing(view, &binary_args)?,
                    BinaryOperator::FillHoles => {
                        gpu_waterz_morphology::binary_fill_holes(view, structure.view(), &binary_args.origin)?
                    }
                };
                ndarray::Zip::from(&result).par_map_collect(|&v| u8::from(v))
            }
        })
    } else if args.op == Operator::DistanceTransformEdt {
        let mask = nonzero::<bool>(volume, &args.input)?;
        let sampling = args.sampling.as_deref();
        Computed::F64(match gpu {
            Some(g) => gpu_waterz_morphology::gpu::distance_transform_edt_host(g, mask.view(), 0, sampling)?,
            None => gpu_waterz_morphology::distance_transform_edt(mask.view(), sampling)?,
        })
    } else if args.op == Operator::DistanceTransformCdt {
        let mask = nonzero::<bool>(volume, &args.input)?;
        Computed::I32(match gpu {
            Some(g) => gpu_waterz_morphology::gpu::distance_transform_cdt_host(g, mask.view(), 0, metric, false)?.0,
            None => gpu_waterz_morphology::distance::distance_transform_cdt_distances(mask.view(), metric)?,
        })
    } else {
        let size = match args.size.len() {
            1 => vec![args.size[0]; rank],
            n if n == rank => args.size.clone(),
            n => bail!("--size has {n} values for an input of rank {rank}"),
        };
        let mode: Mode = args.mode.parse()?;
        let grey = Grey { element: Element::Size(size), mode, cval: args.cval, origin: vec![0; rank] };
        // The four filters run on the GPU (one upload, in a type that holds
        // the input's values exactly) or the CPU (in float64); their values
        // are the input's own (the element is a flat box), and the
        // composite operators combine them in the input's type, step by
        // step, as scipy does.
        let operator = match args.op {
            Operator::GreyErosion => GreyOperator::Erosion,
            Operator::GreyDilation => GreyOperator::Dilation,
            Operator::GreyOpening => GreyOperator::Opening,
            Operator::GreyClosing => GreyOperator::Closing,
            Operator::MorphologicalGradient => GreyOperator::Gradient,
            Operator::MorphologicalLaplace => GreyOperator::Laplace,
            Operator::WhiteTophat => GreyOperator::WhiteTophat,
            Operator::BlackTophat => GreyOperator::BlackTophat,
            _ => unreachable!("the distance transforms and the binary operators are handled above"),
        };
        // An integer volume's results are its values or cval: scipy casts
        // a cval outside the type's range as C does, which leaves it
        // undefined, so only the type's own values are taken.
        let largest = match &volume {
            Volume::U8(_) => Some(f64::from(u8::MAX)),
            Volume::U32(_) => Some(f64::from(u32::MAX)),
            Volume::U64(_) => Some((1u64 << 53) as f64),
            _ => None,
        };
        if let Some(largest) = largest {
            if mode == Mode::Constant && !(args.cval.fract() == 0.0 && (0.0..=largest).contains(&args.cval)) {
                bail!(
                    "--cval {} is not a value of the input's type {} (a whole number from 0 to {largest})",
                    args.cval,
                    volume.dtype()
                );
            }
        }
        match volume {
            Volume::F32(a) => Computed::F32(grey_operator(gpu, &a, &grey, operator)?),
            Volume::U8(a) => Computed::U8(grey_operator(gpu, &a, &grey, operator)?),
            Volume::U32(a) => Computed::U32(grey_operator(gpu, &a, &grey, operator)?),
            Volume::U64(a) => {
                if a.iter().any(|&v| v > 1 << 53) {
                    bail!("{}: uint64 values above 2^53 do not survive float64", args.input);
                }
                Computed::U64(grey_operator(gpu, &a, &grey, operator)?)
            }
            other => bail!("{}: unsupported element type {}", args.input, other.dtype()),
        }
    };
    let compute_s = compute.elapsed().as_secs_f64();
    let written = Instant::now();
    computed.write(output.path()).with_context(|| format!("writing {}", args.out.display()))?;
    output.commit(false)?;
    let summary = serde_json::json!({
        "op": format!("{:?}", args.op),
        "input": args.input,
        "shape": shape,
        "backend": if gpu.is_some() { "gpu" } else { "cpu" },
        "timings_s": {
            "read": read_s,
            "gpu_open": gpu_open_s,
            "compute": compute_s,
            "write": written.elapsed().as_secs_f64(),
        },
        "wall_s": start.elapsed().as_secs_f64(),
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
