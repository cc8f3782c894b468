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
        (channels > 3).then(|| format!("the affinities have {channels} channels; the first 3 are used, as waterz does"))
    }
}

fn to_4d<T>(a: ArrayD<T>, spec: &str) -> Result<Array4<T>> {
    let shape = a.shape().to_vec();
    a.into_dimensionality::<Ix4>()
        .map_err(|_| anyhow!("affinities {spec} must have the shape (3, z, y, x) (or more channels), not {shape:?}"))
}

/// `--shape z,y,x`: three sizes, none zero.
pub fn shape_zyx(shape: &[usize]) -> Result<(usize, usize, usize)> {
    let &[zd, yd, xd] = shape else { bail!("--shape takes three sizes z,y,x, not {shape:?}") };
    if zd == 0 || yd == 0 || xd == 0 {
        bail!("--shape {shape:?} has no voxels");
    }
    Ok((zd, yd, xd))
}
