//! The scale tests' generated volume (`ImplicitCells`) made on the GPU:
//! [`implicit_affinities`] gives any region's affinities on the device,
//! the same bits as the host generator's ([`ImplicitCells::block`]), so
//! that [`crate::GpuSteps`] reads a generated volume without making it on
//! the host and uploading it. The kernels (`kernels-rs/src/generate.rs`)
//! are launched in `launch`, this crate's only `unsafe` code.

#[allow(unsafe_code)]
mod launch;

use crate::{invalid, Block, Result};
use gpu_waterz_abi::generate::NOISE_SPACING;
use gpu_waterz_abi::Dims3;
use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells};
use gpu_waterz_core::synthetic::lattice_value;
use gpu_waterz_runtime::{Gpu, RuntimeError};
use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities};
use gpu_waterz_watershed::WatershedError;
use rayon::prelude::*;

fn dims3(shape: [u64; 3]) -> Dims3 {
    Dims3::new(shape[0], shape[1], shape[2])
}

fn gpu_err(e: RuntimeError) -> crate::BlockwiseError {
    WatershedError::from(e).into()
}

/// The affinities `(3, z, y, x)` of `block` of the `field`'s volume of
/// `dims`, made on `gpu`: bit for bit [`ImplicitCells::block`]'s (its
/// labels from a table of the seeds around the block, the membrane, the
/// blurs, the noise from a table of the lattice around it, and the
/// affinities, each step a kernel over the block grown by the generator's
/// halo). Like the host generator it leaves out merge and split bait:
/// `params.weak_spots` and `params.false_walls` must be 0.
pub fn implicit_affinities(
    gpu: &Gpu,
    field: &ImplicitCells,
    params: &GeneratorParams,
    dims: [u64; 3],
    block: Block,
) -> Result<DeviceAffinities> {
    block.check(dims)?;
    field.check((dims[0] as usize, dims[1] as usize, dims[2] as usize)).map_err(invalid)?;
    if params.weak_spots != 0 || params.false_walls != 0 {
        return Err(invalid("generated blocks leave out merge and split bait: set weak_spots and false_walls to 0"));
    }
    let halo = (params.membrane_half_width as u64).saturating_add(params.blur_passes as u64).saturating_add(2);
    let region = block.grown(dims, halo, halo);
    let n = region.len();
    if n >= u32::MAX as u64 {
        return Err(invalid(format!(
            "block {:?}..{:?} grown by the generator's halo of {halo} holds {n} voxels: fewer than 2^32 are taken",
            block.lo, block.hi
        )));
    }
    let (lo, hi) = (region.lo, region.hi);
    // The seeds of the grid cells from one before the region's first
    // voxel's to one after its last voxel's.
    let cell = [field.cell.0 as u64, field.cell.1 as u64, field.cell.2 as u64];
    let first_cell: [i64; 3] = std::array::from_fn(|a| (lo[a] / cell[a]) as i64 - 1);
    let cells: [u64; 3] = std::array::from_fn(|a| (hi[a] - 1) / cell[a] + 3 - lo[a] / cell[a]);
    let seeds: Vec<f32> = (0..cells.iter().product::<u64>())
        .into_par_iter()
        .flat_map_iter(|t| {
            let c = [t / (cells[1] * cells[2]), (t / cells[2]) % cells[1], t % cells[2]];
            field.seed_of(std::array::from_fn(|a| first_cell[a] + c[a] as i64))
        })
        .collect();
    // The noise lattice's values at every corner of the region's voxels.
    let first_point: [u64; 3] = std::array::from_fn(|a| lo[a] / NOISE_SPACING);
    let points: [u64; 3] = std::array::from_fn(|a| (hi[a] - 1) / NOISE_SPACING + 2 - first_point[a]);
    let lattice: Vec<f32> = (0..points.iter().product::<u64>())
        .into_par_iter()
        .map(|t| {
            let p = [t / (points[1] * points[2]), (t / points[2]) % points[1], t % points[2]];
            let at = |a: usize| (first_point[a] + p[a]) as usize;
            lattice_value(params.seed, at(0), at(1), at(2))
        })
        .collect();
    let (region_dims, origin) = (dims3(region.shape()), dims3(lo));
    let seeds = gpu.upload(&seeds).map_err(gpu_err)?;
    let labels = launch::labels(gpu, &seeds, dims3(cells), dims3(cell), origin, region_dims).map_err(gpu_err)?;
    let mut mask = launch::boundary(gpu, &labels, region_dims).map_err(gpu_err)?;
    drop(labels);
    for _ in 1..params.membrane_half_width {
        mask = launch::dilate(gpu, &mask, region_dims).map_err(gpu_err)?;
    }
    let mut q = launch::inside(gpu, &mask).map_err(gpu_err)?;
    drop(mask);
    for _ in 0..params.blur_passes {
        for axis in 0..3 {
            q = launch::box_blur(gpu, &q, region_dims, axis).map_err(gpu_err)?;
        }
    }
    let lattice = gpu.upload(&lattice).map_err(gpu_err)?;
    launch::add_noise(gpu, &mut q, region_dims, origin, &lattice, dims3(first_point), dims3(points), params.noise)
        .map_err(gpu_err)?;
    let offset = dims3(std::array::from_fn(|a| block.lo[a] - lo[a]));
    let affinities = launch::affinities(gpu, &q, region_dims, origin, offset, dims3(block.shape())).map_err(gpu_err)?;
    DeviceAffinities::from_buffer(AffinityBuffer::F32(affinities), dims3(block.shape())).map_err(gpu_err)
}

/// A generated volume ([`ImplicitCells`] without bait) as an
/// [`crate::AffinitySource`]: any region made on the host by
/// [`crate::AffinitySource::read`] ([`ImplicitCells::block`]), or on the GPU by
/// [`crate::AffinitySource::read_on_gpu`] ([`implicit_affinities`]), the same
/// values either way.
#[derive(Clone, Debug)]
pub struct ImplicitSource {
    field: ImplicitCells,
    params: GeneratorParams,
    dims: [u64; 3],
}

impl ImplicitSource {
    /// The volume of `dims` of `field`, made with `params`; fails for a
    /// volume the field's numbering does not fit, or with merge or split
    /// bait (`params.weak_spots`, `params.false_walls` not 0), which is
    /// drawn over the whole volume.
    pub fn new(field: ImplicitCells, params: GeneratorParams, dims: [u64; 3]) -> Result<Self> {
        crate::check_dims(dims)?;
        field.check((dims[0] as usize, dims[1] as usize, dims[2] as usize)).map_err(invalid)?;
        if params.weak_spots != 0 || params.false_walls != 0 {
            return Err(invalid(
                "generated blocks leave out merge and split bait: set weak_spots and false_walls to 0",
            ));
        }
        Ok(Self { field, params, dims })
    }
}

impl crate::AffinitySource for ImplicitSource {
    fn dims(&self) -> [u64; 3] {
        self.dims
    }

    fn read(&self, region: Block) -> Result<ndarray::Array4<f32>> {
        region.check(self.dims)?;
        let volume = (self.dims[0] as usize, self.dims[1] as usize, self.dims[2] as usize);
        let [z, y, x] = region.lo.map(|v| v as usize);
        let [sz, sy, sx] = region.shape().map(|v| v as usize);
        let (affinities, _labels) = self.field.block(&self.params, volume, (z, y, x), (sz, sy, sx)).map_err(invalid)?;
        Ok(affinities)
    }

    fn read_on_gpu(&self, gpu: &Gpu, region: Block) -> Result<Option<DeviceAffinities>> {
        implicit_affinities(gpu, &self.field, &self.params, self.dims, region).map(Some)
    }
}
