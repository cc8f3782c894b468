//! The commands' inputs: affinities and labels named by a volume spec
//! (`a.npy`, `file.h5:/dataset`, `dir.zarr/array`), and `--shape z,y,x`.

use anyhow::{anyhow, bail, Context, Result};
use gpu_waterz_cli::io::{Volume, VolumeSource};
use gpu_waterz_core::AffinityGraph;
use ndarray::{Array3, Array4, ArrayD, Axis, Ix3, Ix4, Slice};

/// Labels (uint32/uint64, also uint8) of shape (z, y, x); `what` names
/// them in errors.
pub fn read_labels(spec: &str, what: &str) -> Result<Array3<u64>> {
    let volume = VolumeSource::parse(spec).read().with_context(|| format!("reading the {what}"))?;
    let labels = volume.into_labels(spec)?;
    let shape = labels.shape().to_vec();
    labels
        .into_dimensionality::<Ix3>()
        .map_err(|_| anyhow!("the {what} {spec} must be 3-dimensional (z, y, x), not {shape:?}"))
}

/// Affinities (channels, z, y, x) as read: float32, or uint8 meaning k/255.
pub enum Affinities {
    F32(Array4<f32>),
    U8(Array4<u8>),
}

impl Affinities {
    /// Reads the affinities named by `spec`.
    pub fn read(spec: &str) -> Result<Self> {
        let volume = VolumeSource::parse(spec).read().context("reading the affinities")?;
        Ok(match volume {
            Volume::F32(a) => Affinities::F32(to_4d(a, spec)?),
            Volume::U8(a) => Affinities::U8(to_4d(a, spec)?),
            other => bail!("affinities {spec} must be float32 (or uint8 meaning k/255), not {}", other.dtype()),
        })
    }

    /// The validated affinity graph over these values: the first three
    /// channels, as waterz uses them.
    pub fn graph(&self) -> Result<AffinityGraph<'_>> {
        Ok(match self {
            Affinities::F32(a) => AffinityGraph::from_f32(a.slice_axis(Axis(0), Slice::from(..3.min(a.dim().0))))?,
            Affinities::U8(a) => AffinityGraph::from_u8(a.slice_axis(Axis(0), Slice::from(..3.min(a.dim().0))))?,
        })
    }

    /// Says that only the first three channels are used, when there are
    /// more (as waterz does).
    pub fn channel_note(&self) -> Option<String> {
        let channels = match self {
            Affinities::F32(a) => a.dim().0,
            Affinities::U8(a) => a.dim().0,
        };
        channel_note(channels)
    }
}

/// The note for affinities of `channels` channels, when there are more
/// than the three that waterz uses.
fn channel_note(channels: usize) -> Option<String> {
    (channels > 3).then(|| format!("the affinities have {channels} channels; the first 3 are used, as waterz does"))
}

/// Bytes of a `.npy` read and uploaded at a time while the next piece is
/// read (chunked HDF5 and zarr pieces follow their chunks).
const UPLOAD_PIECE_BYTES: usize = 128 << 20;

/// A file whose affinities can be read in pieces.
enum PieceSource {
    Npy(gpu_waterz_cli::io::NpyFile),
    Hdf5(gpu_waterz_cli::io::ChunkedDataset),
    Zarr(gpu_waterz_cli::io::ZarrArray),
}

impl PieceSource {
    fn dtype(&self) -> gpu_waterz_cli::io::ElementType {
        match self {
            PieceSource::Npy(f) => f.dtype(),
            PieceSource::Hdf5(d) => d.dtype(),
            PieceSource::Zarr(a) => a.dtype(),
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            PieceSource::Npy(f) => f.shape(),
            PieceSource::Hdf5(d) => d.shape(),
            PieceSource::Zarr(a) => a.shape(),
        }
    }

    /// The first `n_values` values (at least) in pieces, as
    /// `NpyFile::read_in_pieces`, `ChunkedDataset::read_in_pieces` and
    /// `ZarrArray::read_in_pieces` give them.
    fn read_in_pieces<T: bytemuck::Pod + Send>(
        &self,
        n_values: usize,
        consume: impl FnMut(usize, &[T]) -> Result<()> + Send,
    ) -> Result<()> {
        match self {
            PieceSource::Npy(f) => f.read_in_pieces(n_values, UPLOAD_PIECE_BYTES / std::mem::size_of::<T>(), consume),
            PieceSource::Hdf5(d) => d.read_in_pieces(n_values, consume),
            PieceSource::Zarr(a) => a.read_in_pieces(n_values, consume),
        }
    }
}

/// Uploads the part of `values` (starting at element `first` of the file)
/// that lies in `buffer` (the first channels).
fn upload_range<T: gpu_waterz_runtime::DeviceElement>(
    gpu: &gpu_waterz::Gpu,
    buffer: &mut gpu_waterz::DeviceBuffer<T>,
    first: usize,
    values: &[T],
) -> Result<()> {
    let wanted = buffer.len().saturating_sub(first).min(values.len());
    if wanted > 0 {
        gpu.upload_into(buffer, first, &values[..wanted])?;
    }
    Ok(())
}

/// Affinities loaded for a pipeline: on the host, or already on the GPU
/// that will run it.
pub enum LoadedAffinities {
    /// Read into host memory.
    Host(Affinities),
    /// Uploaded piece by piece while the file was read (no host copy).
    Device {
        /// The first three channels.
        affinities: gpu_waterz::DeviceAffinities,
        /// The GPU that holds them.
        gpu: gpu_waterz::Gpu,
        /// The file's channels.
        channels: usize,
    },
}

impl LoadedAffinities {
    /// Reads the affinities named by `spec`. When the pipeline of `config`
    /// runs on a GPU and they are float32 or uint8 `(c, z, y, x)`, `c >= 3`,
    /// in a `.npy`, a chunked HDF5 dataset that the parallel reader takes
    /// or a zarr (v2 or v3) array, each piece read goes to the GPU while
    /// the next one is read, so reading and uploading overlap and the
    /// volume never sits in host memory; otherwise they are read on the
    /// host ([`Affinities::read`]).
    pub fn load(spec: &str, config: &gpu_waterz::Config) -> Result<Self> {
        let volume = VolumeSource::parse(spec);
        let streamable = match &volume {
            VolumeSource::Npy(path) => path.extension().is_some_and(|e| e == "npy"),
            VolumeSource::Hdf5 { .. } | VolumeSource::Zarr { .. } => true,
            _ => false,
        };
        // The backend first: a CPU run reads the file once, on the host.
        let gpu = if streamable { gpu_waterz::Agglomeration::gpu_for(config)? } else { None };
        if let Some(gpu) = gpu {
            let source = match volume {
                VolumeSource::Npy(path) => {
                    Some(PieceSource::Npy(gpu_waterz_cli::io::NpyFile::open(&path).context("reading the affinities")?))
                }
                VolumeSource::Hdf5 { file, dataset } => gpu_waterz_cli::io::ChunkedDataset::open(&file, &dataset)
                    .context("reading the affinities")?
                    .map(PieceSource::Hdf5),
                VolumeSource::Zarr { root, array } => gpu_waterz_cli::io::ZarrArray::open(&root, &array)
                    .context("reading the affinities")?
                    .map(PieceSource::Zarr),
                _ => None,
            };
            if let Some(source) = source {
                if let Some(loaded) = Self::upload(&source, gpu)? {
                    return Ok(loaded);
                }
            }
        }
        Ok(Self::Host(Affinities::read(spec)?))
    }

    /// Reads `source` onto `gpu` piece by piece; `None` when its type or
    /// shape is not one that this path takes (the host path then reads it
    /// and reports what is wrong).
    fn upload(source: &PieceSource, gpu: gpu_waterz::Gpu) -> Result<Option<Self>> {
        use gpu_waterz::{AffinityBuffer, DeviceAffinities};
        use gpu_waterz_cli::io::ElementType;
        let shape = source.shape();
        if shape.len() != 4 || shape[0] < 3 || !matches!(source.dtype(), ElementType::F32 | ElementType::U8) {
            return Ok(None);
        }
        let dims = gpu_waterz::Dims3::new(shape[1] as u64, shape[2] as u64, shape[3] as u64);
        let n = gpu_waterz_watershed::gpu::check_dims(dims)?;
        let affinity_bytes = 3 * n * source.dtype().size() as u64;
        gpu_waterz::check_fits(&gpu, n, affinity_bytes)?;
        let n_values = 3 * n as usize;
        let data = match source.dtype() {
            ElementType::F32 => {
                let mut buffer = gpu.uninit::<f32>(n_values)?;
                source
                    .read_in_pieces(n_values, |first, values: &[f32]| upload_range(&gpu, &mut buffer, first, values))?;
                AffinityBuffer::F32(buffer)
            }
            _ => {
                let mut buffer = gpu.uninit::<u8>(n_values)?;
                source
                    .read_in_pieces(n_values, |first, values: &[u8]| upload_range(&gpu, &mut buffer, first, values))?;
                AffinityBuffer::U8(buffer)
            }
        };
        gpu.synchronize()?;
        let affinities = DeviceAffinities::from_buffer(data, dims)?;
        Ok(Some(Self::Device { affinities, gpu, channels: shape[0] }))
    }

    /// Starts the pipeline on these affinities.
    pub fn start(&self, config: gpu_waterz::Config) -> Result<gpu_waterz::Agglomeration> {
        Ok(match self {
            Self::Host(a) => gpu_waterz::Agglomeration::new(&a.graph()?, config)?,
            Self::Device { affinities, gpu, .. } => gpu_waterz::Agglomeration::from_device(affinities, gpu, config)?,
        })
    }

    /// The volume's extent (of a pipeline started on them).
    pub fn dims(&self) -> gpu_waterz::Dims3 {
        match self {
            Self::Host(a) => {
                let shape = match a {
                    Affinities::F32(v) => v.dim(),
                    Affinities::U8(v) => v.dim(),
                };
                gpu_waterz::Dims3::new(shape.1 as u64, shape.2 as u64, shape.3 as u64)
            }
            Self::Device { affinities, .. } => affinities.dims(),
        }
    }

    /// As [`Affinities::channel_note`].
    pub fn channel_note(&self) -> Option<String> {
        match self {
            Self::Host(a) => a.channel_note(),
            Self::Device { channels, .. } => channel_note(*channels),
        }
    }

    /// Frees the affinities on a thread of their own while the thresholds
    /// run: giving gigabytes of host memory back to the operating system
    /// takes it a while (0.3 s for 6 GB). (Device buffers bind their
    /// context wherever they are dropped.) Join the handle before closing
    /// the GPU.
    pub fn release(self) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || drop(self))
    }

    /// Whether the affinities went to the GPU as they were read.
    pub fn streamed(&self) -> bool {
        matches!(self, Self::Device { .. })
    }
}

fn to_4d<T>(a: ArrayD<T>, spec: &str) -> Result<Array4<T>> {
    let shape = a.shape().to_vec();
    a.into_dimensionality::<Ix4>()
        .map_err(|_| anyhow!("affinities {spec} must have the shape (3, z, y, x) (or more channels), not {shape:?}"))
}

/// `--shape z,y,x`: three sizes, none zero.
/// Three positive sizes `z,y,x` given to `option`.
pub fn sizes_zyx(option: &str, values: &[usize]) -> Result<(usize, usize, usize)> {
    match *values {
        [z, y, x] if z > 0 && y > 0 && x > 0 => Ok((z, y, x)),
        _ => bail!("{option} takes three positive sizes z,y,x, not {values:?}"),
    }
}

pub fn shape_zyx(shape: &[usize]) -> Result<(usize, usize, usize)> {
    let &[zd, yd, xd] = shape else { bail!("--shape takes three sizes z,y,x, not {shape:?}") };
    if zd == 0 || yd == 0 || xd == 0 {
        bail!("--shape {shape:?} has no voxels");
    }
    Ok((zd, yd, xd))
}
