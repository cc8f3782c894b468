//! The watershed on the GPU, label for label equal to the reference.
//!
//! The kernels (`kernels-rs/src/watershed/`) and the reasoning for
//! exactness are documented there; this module runs them in order:
//! edge masks, plateau corners (compacted in index order), an ordered
//! level-synchronous breadth-first search that reproduces waterz's queue
//! positions, plateau directions (the private `plateau` module drives
//! these three), union-find components (tiles in shared memory, then their
//! faces), labels by the smallest voxel of each component. Every launch,
//! and every `unsafe` block of this crate, is in the private `launch`
//! module, whose safe functions check what the kernels assume.

mod affinities;
mod block;
#[allow(unsafe_code)]
mod launch;
mod plateau;

pub use affinities::{check_dims, AffinityBuffer, DeviceAffinities, MAX_VOXELS};
pub use block::{block_basins, block_basins_on_device, block_plateaus_on_device, BlockInRegion, CORNER, OPEN};

use crate::WatershedError;
use gpu_waterz_core::{CoreError, Dims3, WatershedParams};
use gpu_waterz_runtime::{DeviceBuffer, Gpu, RuntimeError, StageTimer};
use ndarray::Array3;

/// What [`DeviceAffinities::check_values`] finds: the checks the host
/// makes of host affinities (`AffinityGraph::from_f32`), made on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AffinityValues {
    /// Values that are NaN or infinite.
    pub n_non_finite: u64,
    /// The index of the first of them (channel-major, C order).
    pub first_non_finite: Option<u64>,
    /// Finite values outside `[0, 1]`.
    pub n_outside_unit_interval: u64,
}

impl DeviceAffinities {
    /// Counts the values that are not finite and those outside `[0, 1]`,
    /// on the device (one pass; nothing for uint8 affinities).
    pub fn check_values(&self, gpu: &Gpu) -> Result<AffinityValues, RuntimeError> {
        launch::check_values(gpu, self)
    }
}

/// Fragments in device memory: one label per voxel (C order), 0 for
/// background, fragments `1..=n_fragments`.
///
/// Every label is at most [`DeviceFragments::n_fragments`]: later stages
/// index per-fragment arrays with the labels, so the labels are read-only
/// and only [`watershed`] and the checked constructors
/// ([`DeviceFragments::from_labels`], [`DeviceFragments::upload`],
/// [`DeviceFragments::from_runs`], [`DeviceFragments::from_checked_runs`])
/// make fragments.
#[derive(Debug)]
pub struct DeviceFragments {
    labels: DeviceBuffer<u32>,
    n_fragments: u64,
    dims: Dims3,
    plateau_levels: usize,
}

impl DeviceFragments {
    /// Fragments from labels already on the device (`dims.z * dims.y *
    /// dims.x` of them, C order), after checking that every label is at
    /// most `n_fragments` (which downloads them: this synchronizes).
    /// [`DeviceFragments::plateau_levels`] is 0 for such fragments.
    pub fn from_labels(
        gpu: &Gpu,
        labels: DeviceBuffer<u32>,
        dims: Dims3,
        n_fragments: u64,
    ) -> Result<Self, WatershedError> {
        gpu.check_device(&labels, "the labels")?;
        let n = check_dims(dims)?;
        if labels.len() as u64 != n {
            return Err(invalid_labels(format!("{} labels for a volume of {n} voxels ({dims:?})", labels.len())));
        }
        check_labels(&gpu.download(&labels)?, n_fragments)?;
        Ok(Self { labels, n_fragments, dims, plateau_levels: 0 })
    }

    /// Fragments from host labels (`dims.z * dims.y * dims.x` of them, C
    /// order), checked on the host (every label at most `n_fragments`),
    /// then uploaded once.
    pub fn upload(gpu: &Gpu, labels: &[u32], dims: Dims3, n_fragments: u64) -> Result<Self, WatershedError> {
        let n = check_dims(dims)?;
        if labels.len() as u64 != n {
            return Err(invalid_labels(format!("{} labels for a volume of {n} voxels ({dims:?})", labels.len())));
        }
        check_labels(labels, n_fragments)?;
        Ok(Self { labels: gpu.upload(labels)?, n_fragments, dims, plateau_levels: 0 })
    }

    /// Fragments given as runs along the flattened volume (C order): run
    /// `k` starts at voxel `starts[k]` (ascending from 0, each run at least
    /// one voxel, the last to the end) and holds label `labels[k]`. Checked
    /// on the host ([`FragmentRuns::new`]), uploaded, and written out per
    /// voxel on the device: a few bytes per run cross instead of four per
    /// voxel.
    pub fn from_runs(
        gpu: &Gpu,
        starts: &[u32],
        labels: &[u32],
        dims: Dims3,
        n_fragments: u64,
    ) -> Result<Self, WatershedError> {
        Self::from_checked_runs(gpu, &FragmentRuns::new(starts, labels, dims, n_fragments)?)
    }

    /// [`DeviceFragments::from_runs`] of runs checked already: only the
    /// upload and the kernel that writes them out, for a caller that checks
    /// the runs before it takes its turn on the GPU (the blockwise decode).
    pub fn from_checked_runs(gpu: &Gpu, runs: &FragmentRuns<'_>) -> Result<Self, WatershedError> {
        Ok(Self::from_checked_runs_beside(gpu, runs, |_| ())?.0)
    }

    /// [`DeviceFragments::from_checked_runs`] with the runs going up on the
    /// device's copy stream while `work` queues other work (in the
    /// blockwise decode, the making of the block's affinities), which the
    /// copy overlaps ([`Gpu::upload_beside`]; runs in page-locked memory);
    /// gives `work`'s result too.
    pub fn from_checked_runs_beside<R>(
        gpu: &Gpu,
        runs: &FragmentRuns<'_>,
        work: impl FnOnce(&Gpu) -> R,
    ) -> Result<(Self, R), WatershedError> {
        let n_runs = runs.starts.len() as u64;
        let (buffers, out) = gpu.upload_beside(&[runs.starts, runs.labels], work)?;
        let [starts, run_labels] = <[_; 2]>::try_from(buffers).map_err(|_| {
            WatershedError::Gpu(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
                kernel: "expand_runs_u32",
                reason: "two uploads gave another number of buffers".into(),
            })
        })?;
        let n = runs.dims.z * runs.dims.y * runs.dims.x;
        let labels = gpu_waterz_runtime::primitives::expand_runs_u32(gpu, &starts, &run_labels, n_runs, n)?;
        Ok((Self { labels, n_fragments: runs.n_fragments, dims: runs.dims, plateau_levels: 0 }, out))
    }

    /// One label per voxel (C order): 0 for background, else `1..=n_fragments`.
    pub fn labels(&self) -> &DeviceBuffer<u32> {
        &self.labels
    }

    /// The labels, giving up the fragments.
    pub fn into_labels(self) -> DeviceBuffer<u32> {
        self.labels
    }

    /// The number of fragments, the largest label there can be.
    pub fn n_fragments(&self) -> u64 {
        self.n_fragments
    }

    /// The volume's extent.
    pub fn dims(&self) -> Dims3 {
        self.dims
    }

    /// Levels of the plateau breadth-first search (its depth).
    pub fn plateau_levels(&self) -> usize {
        self.plateau_levels
    }

    /// Copies the labels to the host as waterz's uint64 volume.
    pub fn download(&self, gpu: &Gpu) -> Result<Array3<u64>, WatershedError> {
        let labels = gpu.download(&self.labels)?;
        let shape = (self.dims.z as usize, self.dims.y as usize, self.dims.x as usize);
        Ok(Array3::from_shape_vec(shape, labels.into_iter().map(u64::from).collect()).expect("one label per voxel"))
    }
}

/// A volume's fragments as runs along the flattened volume (C order),
/// checked: run `k` starts at voxel `starts[k]` (the starts ascend from 0
/// and stay inside the volume, so each run holds at least one voxel and the
/// last runs to the end) and holds label `labels[k]`, at most
/// `n_fragments` (which fits u32 labels). What
/// [`DeviceFragments::from_checked_runs`] puts on the device.
#[derive(Clone, Copy, Debug)]
pub struct FragmentRuns<'a> {
    starts: &'a [u32],
    labels: &'a [u32],
    dims: Dims3,
    n_fragments: u64,
}

impl<'a> FragmentRuns<'a> {
    /// The runs, checked (on the calling thread's rayon pool: the blockwise
    /// decode checks millions of runs per block).
    pub fn new(starts: &'a [u32], labels: &'a [u32], dims: Dims3, n_fragments: u64) -> Result<Self, WatershedError> {
        let n = check_dims(dims)?;
        if starts.len() != labels.len() {
            return Err(invalid_labels(format!("{} run starts for {} run labels", starts.len(), labels.len())));
        }
        let ascending = starts.first().map_or(n == 0, |&s| s == 0)
            && gpu_waterz_core::parallel::first_index(starts.len().saturating_sub(1), |k| starts[k] >= starts[k + 1])
                .is_none()
            && starts.last().is_none_or(|&s| (s as u64) < n);
        if !ascending {
            return Err(invalid_labels(format!(
                "run starts that do not rise from 0 through a volume of {n} voxels ({dims:?})"
            )));
        }
        if n_fragments > u32::MAX as u64 {
            return Err(invalid_labels(format!("{n_fragments} fragments do not fit u32 labels")));
        }
        if let Some(k) = gpu_waterz_core::parallel::first_position(labels, |&l| l as u64 > n_fragments) {
            let label = labels[k];
            return Err(invalid_labels(format!("run {k} has label {label}, above the {n_fragments} fragments")));
        }
        Ok(Self { starts, labels, dims, n_fragments })
    }

    /// The number of runs.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether there are no runs (an empty volume).
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

fn invalid_labels(reason: String) -> WatershedError {
    WatershedError::Gpu(RuntimeError::InvalidLaunch { kernel: "DeviceFragments::from_labels", reason })
}

/// Fails unless every label is at most `n_fragments`, and `n_fragments`
/// fits the u32 labels.
fn check_labels(labels: &[u32], n_fragments: u64) -> Result<(), WatershedError> {
    if n_fragments > u32::MAX as u64 {
        return Err(invalid_labels(format!("{n_fragments} fragments do not fit u32 labels")));
    }
    // On the calling thread's rayon pool: a block of the blockwise decode
    // checks some 10^8 labels here.
    if let Some(voxel) = gpu_waterz_core::parallel::first_position(labels, |&l| l as u64 > n_fragments) {
        let label = labels[voxel];
        return Err(invalid_labels(format!("voxel {voxel} has label {label}, above the {n_fragments} fragments")));
    }
    Ok(())
}

/// waterz's watershed of device affinities; the result stays on the device.
///
/// The thresholds must satisfy `aff_threshold_low < aff_threshold_high`
/// (else a face outside the volume could be marked).
pub fn watershed(
    gpu: &Gpu,
    affs: &DeviceAffinities,
    params: WatershedParams,
) -> Result<DeviceFragments, WatershedError> {
    affs.check_device(gpu)?;
    check_thresholds(params)?;
    let dims = affs.dims();
    let mut timer = StageTimer::new(gpu, tracing::enabled!(tracing::Level::DEBUG))?;
    let bits = launch::mask(gpu, affs, params)?;
    timer.mark("edge masks")?;
    let plateaus = plateau::divide(gpu, bits, &mut timer)?;
    let (plateau_levels, queued) = (plateaus.levels, plateaus.queued);
    let forest = launch::tile_components(gpu, plateaus.edges)?;
    timer.mark("components in tiles")?;
    let components = launch::join_tile_faces(gpu, forest)?;
    timer.mark("components across tiles")?;
    let (labels, n_fragments) = launch::labels(gpu, &components)?;
    timer.mark("labels")?;
    tracing::debug!(n_fragments, plateau_levels, queued, stages_ms = ?timer.stages(), max_used_bytes = timer.max_used_bytes(), "GPU watershed");
    Ok(DeviceFragments { labels, n_fragments, dims, plateau_levels })
}

/// Fails unless `aff_threshold_low < aff_threshold_high` (else a face
/// outside the volume could be marked, and the kernels follow marks).
pub(crate) fn check_thresholds(params: WatershedParams) -> Result<(), WatershedError> {
    if !params.keeps_masks_inside() {
        return Err(WatershedError::Input(CoreError::WatershedThresholds {
            low: params.aff_threshold_low as f64,
            high: params.aff_threshold_high as f64,
            reason: "aff_threshold_low must be smaller than aff_threshold_high",
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_above_the_fragment_count_are_rejected() {
        assert!(check_labels(&[0, 1, 2, 2, 0], 2).is_ok());
        assert!(check_labels(&[], 0).is_ok());
        let e = check_labels(&[0, 1, 3], 2).unwrap_err().to_string();
        assert!(e.contains("voxel 2 has label 3"), "{e}");
        assert!(check_labels(&[0, 1], u32::MAX as u64 + 1).is_err());
        assert!(check_labels(&[u32::MAX], u32::MAX as u64).is_ok());
    }

    /// Runs are taken only when their starts rise from 0 inside the volume
    /// and their labels are fragments; each refusal says why.
    #[test]
    fn fragment_runs_are_checked_on_the_host() {
        let dims = Dims3::new(1, 2, 5);
        let runs = FragmentRuns::new(&[0, 3, 9], &[1, 0, 2], dims, 2).unwrap();
        assert_eq!(runs.len(), 3);
        assert!(!runs.is_empty());
        let refused = |starts: &[u32], labels: &[u32], n_fragments: u64| {
            FragmentRuns::new(starts, labels, dims, n_fragments).unwrap_err().to_string()
        };
        assert!(refused(&[0, 3], &[1], 2).contains("2 run starts for 1 run labels"));
        for starts in [&[1u32, 3][..], &[0, 3, 3], &[0, 4, 2], &[0, 10], &[]] {
            let labels = vec![1; starts.len()];
            assert!(refused(starts, &labels, 2).contains("do not rise from 0"), "{starts:?}");
        }
        assert!(refused(&[0, 3], &[1, 3], 2).contains("run 1 has label 3"));
        assert!(refused(&[0], &[1], u32::MAX as u64 + 1).contains("do not fit u32 labels"));
    }
}
