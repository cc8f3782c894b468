//! The scale tests' generated volume (`ImplicitCells`) as a source
//! ([`ImplicitSource`]) that makes any region's affinities on the device,
//! the same bits as the host generator's ([`ImplicitCells::block`]), so
//! that [`crate::GpuSteps`] reads a generated volume without making it on
//! the host and uploading it. The kernels (`kernels-rs/src/generate.rs`)
//! are launched in `launch`, with `frames::launch` this crate's only
//! `unsafe` code.

#[allow(unsafe_code)]
mod launch;

use crate::{invalid, Block, Result};
use gpu_waterz_abi::Dims3;
use gpu_waterz_core::generate::{GeneratorParams, ImplicitCells, NoiseLattice};
use gpu_waterz_runtime::{Gpu, RuntimeError};
use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities};
use gpu_waterz_watershed::WatershedError;

fn dims3(shape: [u64; 3]) -> Dims3 {
    Dims3::new(shape[0], shape[1], shape[2])
}

fn gpu_err(e: RuntimeError) -> crate::BlockwiseError {
    WatershedError::from(e).into()
}

/// A generated volume ([`ImplicitCells`] without bait) as an
/// [`crate::AffinitySource`]: any region made on the host by
/// [`crate::AffinitySource::read`] ([`ImplicitCells::block`]), or on the GPU by
/// [`crate::AffinitySource::read_on_gpu`], the same values either way.
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

    /// The affinities `(3, z, y, x)` of `block`, made on `gpu`: bit for bit
    /// [`ImplicitCells::block`]'s (its labels from a table of the seeds
    /// around the block, the membrane, the blurs, the noise from a table of
    /// the lattice around it, and the affinities, each step a kernel over the
    /// block grown by the generator's halo).
    fn affinities_on(&self, gpu: &Gpu, block: Block) -> Result<DeviceAffinities> {
        let (field, params, dims) = (&self.field, &self.params, self.dims);
        block.check(dims)?;
        let halo = (params.membrane_half_width as u64).saturating_add(params.blur_passes as u64).saturating_add(2);
        let region = block.grown(dims, halo, halo);
        let n = region.len();
        if n >= u32::MAX as u64 {
            return Err(invalid(format!(
                "block {:?}..{:?} grown by the generator's halo of {halo} holds {n} voxels: fewer than 2^32 are taken",
                block.lo, block.hi
            )));
        }
        // The seeds around the region, as the host generator tables them,
        // and the span of the noise lattice around it.
        let lo = region.lo;
        let (at, extent) = (lo.map(|v| v as usize), region.shape().map(|v| v as usize));
        let table = field.seed_table(at, extent);
        let cell = [field.cell.0 as u64, field.cell.1 as u64, field.cell.2 as u64];
        let cells = table.extent.map(|n| n as u64);
        let seeds: Vec<f32> = table.seeds.iter().flatten().copied().collect();
        let (first_point, points) = NoiseLattice::span(at, extent);
        let (first_point, points) = (dims3(first_point.map(|v| v as u64)), dims3(points.map(|v| v as u64)));
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
        // The lattice's values hashed on the device, as the host's
        // `NoiseLattice` hashes them.
        let lattice = launch::noise_lattice(gpu, params.seed, first_point, points).map_err(gpu_err)?;
        launch::add_noise(gpu, &mut q, region_dims, origin, &lattice, first_point, points, params.noise)
            .map_err(gpu_err)?;
        let offset = dims3(std::array::from_fn(|a| block.lo[a] - lo[a]));
        let affinities =
            launch::affinities(gpu, &q, region_dims, origin, offset, dims3(block.shape())).map_err(gpu_err)?;
        DeviceAffinities::from_buffer(AffinityBuffer::F32(affinities), dims3(block.shape())).map_err(gpu_err)
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

    fn makes_on_gpu(&self) -> bool {
        true
    }

    fn read_on_gpu(&self, gpu: &Gpu, region: Block) -> Result<Option<DeviceAffinities>> {
        self.affinities_on(gpu, region).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AffinitySource;

    #[test]
    fn the_source_reads_the_generators_blocks_and_refuses_what_it_cannot_make() {
        let field = ImplicitCells { seed: 2, cell: (6, 5, 7) };
        let params = GeneratorParams { weak_spots: 0, false_walls: 0, ..Default::default() };
        let source = ImplicitSource::new(field, params.clone(), [12, 15, 20]).unwrap();
        let region = Block { lo: [3, 4, 5], hi: [9, 15, 11] };
        let (want, _) = field.block(&params, (12, 15, 20), (3, 4, 5), (6, 11, 6)).unwrap();
        assert_eq!(source.read(region).unwrap(), want);
        assert!(source.read(Block { lo: [0; 3], hi: [13, 1, 1] }).is_err());
        let bait = ImplicitSource::new(field, GeneratorParams::default(), [12, 15, 20]).unwrap_err();
        assert!(bait.to_string().contains("bait"), "{bait}");
        assert!(ImplicitSource::new(ImplicitCells { seed: 1, cell: (1, 1, 1) }, params.clone(), [2000, 1, 1]).is_err());
        assert!(ImplicitSource::new(field, params, [0, 4, 4]).is_err());
    }
}
