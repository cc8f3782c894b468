//! `gpu-waterz ndimage`: scipy.ndimage's operators on volumes in files
//! (`gpu-waterz-morphology`): the exact Euclidean distance transform (GPU
//! for rank 1 to 3 when one is usable, else the CPU), the grey-scale and
//! the binary morphology (GPU when one is usable, else the CPU). Prints a
//! JSON summary on stdout.

use super::outputs::OutputFolder;
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use gpu_waterz_cli::io::{write_npy, Volume, VolumeSource};
use gpu_waterz_morphology::gpu::BinaryOperator;
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
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// Replace an existing output file.
    #[arg(long)]
    overwrite: bool,
}

/// A CPU grey-scale operator.
type GreyFn = fn(ndarray::ArrayViewD<'_, f64>, &Grey<'_>) -> gpu_waterz_morphology::Result<ArrayD<f64>>;

/// How a composite operator combines its filters, in the input's type
/// (wrapping for unsigned integers, as numpy's arithmetic).
#[derive(Clone, Copy)]
enum Combine {
    /// The filter itself.
    Take,
    /// Dilation minus erosion (gradient).
    FirstMinusSecond,
    /// Dilation plus erosion, minus the input twice (Laplace).
    Laplace,
    /// The input minus the opening (white top-hat).
    InputMinusFirst,
    /// The closing minus the input (black top-hat).
    FirstMinusInput,
}

/// The element types the CLI writes, with numpy's arithmetic.
trait Step: Copy + gpu_waterz_cli::io::NpyElement {
    fn from_f64(v: f64) -> Self;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
}

impl Step for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn add(self, other: Self) -> Self {
        self + other
    }
    fn sub(self, other: Self) -> Self {
        self - other
    }
}

macro_rules! wrapping_step {
    ($($t:ty),*) => {$(
        impl Step for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            fn sub(self, other: Self) -> Self {
                self.wrapping_sub(other)
            }
        }
    )*};
}

wrapping_step!(u8, u32, u64);

impl Combine {
    /// The result in type `T` from the filters `a` and `b` (exact input
    /// values, held as float64) and the input.
    fn apply<T: Step>(self, a: &ArrayD<f64>, b: Option<&ArrayD<f64>>, input: &ArrayD<f64>) -> ArrayD<T> {
        let t = |x: &ArrayD<f64>| x.mapv(T::from_f64);
        let (a, x) = (t(a), t(input));
        let b = b.map(t);
        match (self, b) {
            (Combine::Take, _) => a,
            (Combine::FirstMinusSecond, Some(b)) => ndarray::Zip::from(&a).and(&b).map_collect(|&p, &q| p.sub(q)),
            (Combine::Laplace, Some(b)) => {
                ndarray::Zip::from(&a).and(&b).and(&x).map_collect(|&p, &q, &v| p.add(q).sub(v).sub(v))
            }
            (Combine::InputMinusFirst, _) => ndarray::Zip::from(&x).and(&a).map_collect(|&v, &p| v.sub(p)),
            (Combine::FirstMinusInput, _) => ndarray::Zip::from(&a).and(&x).map_collect(|&p, &v| p.sub(v)),
            (_, None) => unreachable!("the gradient and the Laplacian take two filters"),
        }
    }
}

/// Where the input is not zero.
fn nonzero(volume: Volume, spec: &str) -> Result<ArrayD<bool>> {
    Ok(match volume {
        Volume::F32(a) => a.mapv(|v| v != 0.0),
        Volume::U8(a) => a.mapv(|v| v != 0),
        Volume::U32(a) => a.mapv(|v| v != 0),
        Volume::U64(a) => a.mapv(|v| v != 0),
        other => bail!("{spec}: unsupported element type {}", other.dtype()),
    })
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
    let binary = match args.op {
        Operator::BinaryErosion => Some(BinaryOperator::Erosion),
        Operator::BinaryDilation => Some(BinaryOperator::Dilation),
        Operator::BinaryOpening => Some(BinaryOperator::Opening),
        Operator::BinaryClosing => Some(BinaryOperator::Closing),
        Operator::BinaryFillHoles => Some(BinaryOperator::FillHoles),
        _ => None,
    };
    if let Some(operator) = binary {
        let mask = nonzero(volume, &args.input)?;
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
        let gpu = match args.backend {
            Backend::Gpu => Some(gpu_waterz::Gpu::new(0).context("opening the GPU (--backend gpu)")?),
            Backend::Auto => gpu_waterz::Gpu::new(0).ok(),
            Backend::Cpu => None,
        };
        let result = match &gpu {
            Some(g) => {
                ran = "gpu";
                gpu_waterz_morphology::gpu::binary_operator_host(g, mask.view(), &binary_args, operator)?
            }
            None => {
                ran = "cpu";
                let view = mask.view();
                match operator {
                    BinaryOperator::Erosion => gpu_waterz_morphology::binary_erosion(view, &binary_args)?,
                    BinaryOperator::Dilation => gpu_waterz_morphology::binary_dilation(view, &binary_args)?,
                    BinaryOperator::Opening => gpu_waterz_morphology::binary_opening(view, &binary_args)?,
                    BinaryOperator::Closing => gpu_waterz_morphology::binary_closing(view, &binary_args)?,
                    BinaryOperator::FillHoles => {
                        gpu_waterz_morphology::binary_fill_holes(view, structure.view(), &binary_args.origin)?
                    }
                }
            }
        };
        write_npy(output.path(), &result.mapv(|v| v as u8).view())
            .with_context(|| format!("writing {}", args.out.display()))?;
    } else if args.op == Operator::DistanceTransformEdt {
        let mask = nonzero(volume, &args.input)?;
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
        let gpu = match args.backend {
            Backend::Gpu => Some(gpu_waterz::Gpu::new(0).context("opening the GPU (--backend gpu)")?),
            Backend::Auto => gpu_waterz::Gpu::new(0).ok(),
            Backend::Cpu => None,
        };
        let size = match args.size.len() {
            1 => vec![args.size[0]; rank],
            n if n == rank => args.size.clone(),
            n => bail!("--size has {n} values for an input of rank {rank}"),
        };
        let mode: Mode = args.mode.parse()?;
        let grey = Grey { element: Element::Size(size), mode, cval: args.cval, origin: vec![0; rank] };
        use gpu_waterz_morphology::gpu::GreyFilter;
        // The four filters run on the GPU (one upload) or the CPU (their
        // values are the input's own: the element is a flat box); the
        // composite operators combine them in the input's type, step by
        // step, as scipy does.
        let (filters, combine) = match args.op {
            Operator::GreyErosion => (vec![GreyFilter::Erosion], Combine::Take),
            Operator::GreyDilation => (vec![GreyFilter::Dilation], Combine::Take),
            Operator::GreyOpening => (vec![GreyFilter::Opening], Combine::Take),
            Operator::GreyClosing => (vec![GreyFilter::Closing], Combine::Take),
            Operator::MorphologicalGradient => {
                (vec![GreyFilter::Dilation, GreyFilter::Erosion], Combine::FirstMinusSecond)
            }
            Operator::MorphologicalLaplace => (vec![GreyFilter::Dilation, GreyFilter::Erosion], Combine::Laplace),
            Operator::WhiteTophat => (vec![GreyFilter::Opening], Combine::InputMinusFirst),
            Operator::BlackTophat => (vec![GreyFilter::Closing], Combine::FirstMinusInput),
            _ => unreachable!("the distance transform and the binary operators are handled above"),
        };
        let results = match &gpu {
            Some(g) => {
                ran = "gpu";
                gpu_waterz_morphology::gpu::grey_filters_host(g, input.view(), &grey, &filters)?
            }
            None => {
                ran = "cpu";
                filters
                    .iter()
                    .map(|f| {
                        let op: GreyFn = match f {
                            GreyFilter::Erosion => gpu_waterz_morphology::grey_erosion,
                            GreyFilter::Dilation => gpu_waterz_morphology::grey_dilation,
                            GreyFilter::Opening => gpu_waterz_morphology::grey_opening,
                            GreyFilter::Closing => gpu_waterz_morphology::grey_closing,
                        };
                        op(input.view(), &grey)
                    })
                    .collect::<gpu_waterz_morphology::Result<Vec<_>>>()?
            }
        };
        let (a, b) = (&results[0], results.get(1));
        let path = output.path();
        let written = match dtype {
            "float32" => write_npy(path, &combine.apply::<f32>(a, b, &input).view()),
            "uint8" => write_npy(path, &combine.apply::<u8>(a, b, &input).view()),
            "uint32" => write_npy(path, &combine.apply::<u32>(a, b, &input).view()),
            _ => write_npy(path, &combine.apply::<u64>(a, b, &input).view()),
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
