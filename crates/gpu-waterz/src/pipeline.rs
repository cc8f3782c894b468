//! [`Agglomeration`]: the one pipeline type, on either backend.

use crate::config::{Backend, BackendKind, Config};
use crate::cpu::CpuEngine;
use crate::gpu::GpuEngine;
use crate::result::{DeviceThresholdResult, InPlaceResult, StageTimings, ThresholdResult};
use crate::{Error, Result};
use gpu_waterz_core::{AffinityGraph, Arithmetic, Thresholds};
use gpu_waterz_parhac::gpu::GpuRoundInfo;
use gpu_waterz_runtime::{DeviceBuffer, Gpu};
use gpu_waterz_watershed::gpu::{AffinityBuffer, DeviceAffinities};
use ndarray::{ArrayView3, ArrayViewMut3};

enum Engine {
    Cpu(Box<CpuEngine>),
    Gpu(Box<GpuEngine>),
}

/// Labels borrowed from the caller, uint32 or uint64: a ground truth for
/// [`Agglomeration::with_inputs`].
#[derive(Clone, Copy, Debug)]
pub enum LabelsView<'a> {
    /// uint32 labels.
    U32(ArrayView3<'a, u32>),
    /// uint64 labels.
    U64(ArrayView3<'a, u64>),
}

impl LabelsView<'_> {
    /// The labels' shape, `(z, y, x)`.
    pub fn shape(&self) -> &[usize] {
        match self {
            LabelsView::U32(v) => v.shape(),
            LabelsView::U64(v) => v.shape(),
        }
    }

    /// The same labels, viewed for as long as `self` is borrowed.
    pub(crate) fn reborrow(&self) -> LabelsView<'_> {
        match self {
            LabelsView::U32(v) => LabelsView::U32(v.view()),
            LabelsView::U64(v) => LabelsView::U64(v.view()),
        }
    }

    /// An owned uint64 copy (made on all threads).
    pub fn to_owned_u64(self) -> ndarray::Array3<u64> {
        match self {
            LabelsView::U32(v) => ndarray::Zip::from(v).par_map_collect(|&l| l as u64),
            LabelsView::U64(v) => ndarray::Zip::from(v).par_map_collect(|&l| l),
        }
    }
}

/// waterz's agglomeration: the watershed (or given fragments), the region
/// graph, then merging up to each threshold in turn, one result per
/// threshold, on the backend the [`Config`] chose. It owns everything it
/// needs (the GPU handle included), so it can be kept, moved and driven
/// later, like waterz's generator; it is also an [`Iterator`] of results.
///
/// ```
/// use gpu_waterz::{ndarray::Array4, AffinityGraph, Backend, Config, Agglomeration};
///
/// // Two voxels joined by a strong face, a weak face, then two more.
/// let mut affs = Array4::<f32>::zeros((3, 1, 1, 4));
/// affs[[2, 0, 0, 1]] = 0.9;
/// affs[[2, 0, 0, 2]] = 0.4;
/// affs[[2, 0, 0, 3]] = 0.8;
/// let affs = AffinityGraph::from_f32(affs.view())?;
/// let config = Config::new(&[0.5, 0.7]).backend(Backend::Cpu);
/// let mut run = Agglomeration::new(&affs, config)?;
/// let at_05 = run.next_threshold()?.unwrap();
/// assert_eq!(at_05.segmentation.as_slice().unwrap(), &[1, 1, 2, 2]);
/// let at_07 = run.next_threshold()?.unwrap();
/// assert_eq!(at_07.segmentation.as_slice().unwrap(), &[1, 1, 1, 1]);
/// # Ok::<(), gpu_waterz::Error>(())
/// ```
pub struct Agglomeration {
    engine: Engine,
    note: Option<String>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Agglomeration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agglomeration").field("backend", &self.backend()).finish_non_exhaustive()
    }
}

/// The backend chosen for `config`, and a note when `Auto` chose the CPU.
fn choose(config: &Config) -> Result<(Option<Gpu>, Option<String>)> {
    match &config.backend {
        Backend::Cpu => {
            if let Some(why) = config.cpu_unsupported() {
                return Err(Error::unsupported(why));
            }
            Ok((None, None))
        }
        Backend::Gpu(gpu) => {
            if let Some(why) = config.gpu_unsupported() {
                return Err(Error::unsupported(why));
            }
            Ok((Some(gpu.clone()), None))
        }
        Backend::Auto => {
            if let Some(why) = config.gpu_unsupported() {
                if let Some(also) = config.cpu_unsupported() {
                    return Err(Error::unsupported(format!("neither backend runs this configuration: {why}; {also}")));
                }
                return Ok((None, Some(format!("the CPU backend runs this configuration: {why}"))));
            }
            match Gpu::new(0) {
                Ok(gpu) => Ok((Some(gpu), None)),
                Err(e) => {
                    if let Some(why) = config.cpu_unsupported() {
                        return Err(Error::unsupported(format!("no usable GPU ({e}), and {why}")));
                    }
                    Ok((None, Some(format!("no usable GPU, so the CPU reference runs: {e}"))))
                }
            }
        }
    }
}

/// The warning for `outside` affinities outside `[0, 1]` (none when there
/// are none, or when the run keeps waterz's arithmetic), also logged.
fn outside_warning(outside: u64, exact: bool, backend: &str) -> Vec<String> {
    if outside == 0 || !exact {
        return Vec::new();
    }
    let warning = format!(
        "{outside} affinities lie outside [0, 1]; {backend} clamps them to [0, 1] in the merge statistics \
         (the watershed takes them as given), so scores of edges with such faces differ from stock \
         waterz's; the CPU backend in waterz's arithmetic takes them as waterz does"
    );
    tracing::warn!("{warning}");
    vec![warning]
}

impl Agglomeration {
    /// Runs the watershed (or takes the configured fragments) of host
    /// affinities and builds the region graph; merging happens threshold by
    /// threshold in [`Agglomeration::next_threshold`].
    pub fn new(affinities: &AffinityGraph<'_>, config: Config) -> Result<Self> {
        Self::with_inputs(affinities, None, None, config)
    }

    /// As [`Agglomeration::new`], with fragments borrowed instead of
    /// configured ([`Config::fragments`], which must then be unset): they
    /// are read while this runs (relabelled, on the GPU uploaded) and not
    /// needed afterwards, so the caller's array is used without a copy.
    pub fn with_fragments(
        affinities: &AffinityGraph<'_>,
        fragments: ArrayView3<'_, u64>,
        config: Config,
    ) -> Result<Self> {
        Self::with_inputs(affinities, Some(fragments), None, config)
    }

    /// As [`Agglomeration::new`], with fragments and a ground truth
    /// borrowed instead of configured ([`Config::fragments`] and
    /// [`Config::ground_truth`], which must then be unset for what is
    /// given here). The CPU backend reads the ground truth while this runs
    /// (into its contingency table with the fragments) and never copies
    /// it; the GPU backend keeps a uint64 copy to upload.
    pub fn with_inputs(
        affinities: &AffinityGraph<'_>,
        fragments: Option<ArrayView3<'_, u64>>,
        ground_truth: Option<LabelsView<'_>>,
        config: Config,
    ) -> Result<Self> {
        if fragments.is_some() && config.fragments.is_some() {
            return Err(Error::new(
                crate::ErrorKind::InvalidInput,
                "fragments given twice: borrowed and in the configuration",
            ));
        }
        if ground_truth.is_some() && config.ground_truth.is_some() {
            return Err(Error::new(
                crate::ErrorKind::InvalidInput,
                "a ground truth given twice: borrowed and in the configuration",
            ));
        }
        config.check_values(fragments.is_some())?;
        let thresholds = Thresholds::new(&config.thresholds)?.values().to_vec();
        let (gpu, note) = choose(&config)?;
        if let Some(note) = &note {
            tracing::info!("{note}");
        }
        let exact = gpu.is_some() || config.arithmetic == Some(Arithmetic::Exact);
        let backend = if gpu.is_some() { "the GPU backend" } else { "exact arithmetic" };
        let warnings = outside_warning(affinities.n_outside_unit_interval(), exact, backend);
        let engine = match gpu {
            Some(gpu) => Engine::Gpu(Box::new(GpuEngine::from_host(
                &gpu,
                affinities,
                fragments,
                ground_truth,
                config,
                thresholds,
            )?)),
            None => Engine::Cpu(Box::new(CpuEngine::new(affinities, fragments, ground_truth, config, thresholds)?)),
        };
        Ok(Self { engine, note, warnings })
    }

    /// As [`Agglomeration::new`], for affinities already on a GPU (uploaded
    /// by [`DeviceAffinities::upload_f32`] or borrowed from torch or cupy);
    /// the backend must be that GPU's (`Backend::Gpu`, or `Auto`, which
    /// then uses it). The affinities are not needed after this returns.
    pub fn from_device(affinities: &DeviceAffinities, gpu: &Gpu, config: Config) -> Result<Self> {
        Self::from_device_with_ground_truth(affinities, None, gpu, config)
    }

    /// As [`Agglomeration::from_device`], with the ground truth on the
    /// device too (one u64 label per voxel, C order; `None` for the
    /// configured one, if any): it is read before this returns (narrowed to
    /// u32 on the device when every label fits, else downloaded) and takes
    /// the place of [`Config::ground_truth`].
    pub fn from_device_with_ground_truth(
        affinities: &DeviceAffinities,
        ground_truth: Option<&DeviceBuffer<u64>>,
        gpu: &Gpu,
        config: Config,
    ) -> Result<Self> {
        config.check_values(false)?;
        let thresholds = Thresholds::new(&config.thresholds)?.values().to_vec();
        match &config.backend {
            Backend::Cpu => {
                return Err(Error::unsupported(
                    "affinities on the GPU need the GPU backend; download them for the CPU backend",
                ))
            }
            Backend::Gpu(other) if other.ordinal() != gpu.ordinal() => {
                return Err(Error::unsupported(format!(
                    "the affinities are on device {}, the configured backend is device {}",
                    gpu.ordinal(),
                    other.ordinal()
                )))
            }
            _ => {}
        }
        if let Some(why) = config.gpu_unsupported() {
            return Err(Error::unsupported(why));
        }
        // The checks `AffinityGraph::from_f32` makes of host values.
        let values = affinities.check_values(gpu)?;
        // Only float32 affinities can be NaN or infinite.
        if let (Some(first), AffinityBuffer::F32(buffer)) = (values.first_non_finite, affinities.data()) {
            let value = gpu.download_element(buffer, first as usize)?;
            let dims = affinities.dims();
            let n = affinities.n_voxels();
            let (channel, i) = (first / n, first % n);
            return Err(gpu_waterz_core::CoreError::AffinityValue {
                value,
                what: if value.is_nan() { "NaN" } else { "infinite" },
                channel: channel as usize,
                z: (i / (dims.y * dims.x)) as usize,
                y: (i / dims.x % dims.y) as usize,
                x: (i % dims.x) as usize,
            }
            .into());
        }
        let warnings = outside_warning(values.n_outside_unit_interval, true, "the GPU backend");
        let engine = GpuEngine::with_device_ground_truth(gpu, affinities, ground_truth, config, thresholds)?;
        Ok(Self { engine: Engine::Gpu(Box::new(engine)), note: None, warnings })
    }

    /// The GPU that a pipeline of `config` runs on: the configured one,
    /// or for [`Backend::Auto`] the first GPU when one opens and runs the
    /// configuration; `None` when the CPU backend runs it. A caller with
    /// affinities to load can put them on this GPU as it reads them, then
    /// start with [`Agglomeration::from_device`].
    pub fn gpu_for(config: &Config) -> Result<Option<Gpu>> {
        Ok(choose(config)?.0)
    }

    /// The backend this pipeline runs on.
    pub fn backend(&self) -> BackendKind {
        match self.engine {
            Engine::Cpu(_) => BackendKind::Cpu,
            Engine::Gpu(_) => BackendKind::Gpu,
        }
    }

    /// Why [`Backend::Auto`] chose the CPU, when it did.
    pub fn backend_note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// What the input made this run do differently from stock waterz, each
    /// stated once (also logged as a `tracing` warning): affinities outside
    /// `[0, 1]` clamped by exact statistics (affinities already on the
    /// device are counted there). Empty for most inputs.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The GPU this pipeline runs on, if it does.
    pub fn gpu(&self) -> Option<&Gpu> {
        match &self.engine {
            Engine::Gpu(g) => Some(g.gpu()),
            Engine::Cpu(_) => None,
        }
    }

    /// Merges up to the next threshold and returns its result, or `None`
    /// after the last threshold.
    pub fn next_threshold(&mut self) -> Result<Option<ThresholdResult>> {
        match &mut self.engine {
            Engine::Cpu(c) => c.next_threshold(),
            Engine::Gpu(g) => g.next_threshold(),
        }
    }

    /// As [`Agglomeration::next_threshold`], writing the segmentation into
    /// `segmentation` (the run's shape) instead of a new volume, as waterz
    /// does with its one buffer: no per-voxel copy of the fragments is kept
    /// after the first call, so a run takes one volume less memory. The
    /// first call overwrites `segmentation` without reading it; every later
    /// call relabels it, so it must still hold the previous threshold's
    /// segmentation (a label that is no fragment of this run is an error).
    /// Once called, [`Agglomeration::next_threshold`] and
    /// [`Agglomeration::fragments`] fail on the CPU backend.
    pub fn next_threshold_in_place(&mut self, segmentation: ArrayViewMut3<'_, u64>) -> Result<Option<InPlaceResult>> {
        let dims = match &self.engine {
            Engine::Cpu(c) => c.dims(),
            Engine::Gpu(g) => g.dims(),
        };
        // Checked before merging, so that a wrong volume costs no threshold.
        gpu_waterz_core::check_volume_shape("the segmentation volume", segmentation.shape(), dims)?;
        match &mut self.engine {
            Engine::Cpu(c) => c.next_threshold_in_place(segmentation),
            Engine::Gpu(g) => g.next_threshold_in_place(segmentation),
        }
    }

    /// As [`Agglomeration::next_threshold`], with the segmentation left on
    /// the GPU (waterz's uint64 ids). GPU backend only.
    pub fn next_threshold_device(&mut self) -> Result<Option<DeviceThresholdResult>> {
        match &mut self.engine {
            Engine::Gpu(g) => g.next_threshold_device(),
            Engine::Cpu(_) => Err(Error::unsupported("results on the device need the GPU backend")),
        }
    }

    /// Merges up to the next threshold and returns it with its segmentation
    /// on the GPU as dense u32 region ids (C order; with given fragments,
    /// dense fragment ids), the cheapest output, for benchmarks and
    /// device-side consumers. GPU backend only.
    pub fn next_threshold_dense_device(&mut self) -> Result<Option<(f64, DeviceBuffer<u32>)>> {
        match &mut self.engine {
            Engine::Gpu(g) => g.next_threshold_dense(),
            Engine::Cpu(_) => Err(Error::unsupported("results on the device need the GPU backend")),
        }
    }

    /// Downloads a segmentation that [`Agglomeration::next_threshold_device`]
    /// left on the GPU.
    pub fn download(&self, segmentation: &DeviceBuffer<u64>) -> Result<ndarray::Array3<u64>> {
        match &self.engine {
            Engine::Gpu(g) => g.download(segmentation),
            Engine::Cpu(_) => Err(Error::unsupported("the CPU backend has no device results")),
        }
    }

    /// Downloads a segmentation that [`Agglomeration::next_threshold_device`]
    /// left on the GPU into `volume` (the run's shape).
    pub fn download_into(&self, segmentation: &DeviceBuffer<u64>, volume: ArrayViewMut3<'_, u64>) -> Result<()> {
        match &self.engine {
            Engine::Gpu(g) => g.download_into(segmentation, volume),
            Engine::Cpu(_) => Err(Error::unsupported("the CPU backend has no device results")),
        }
    }

    /// Time spent so far, per stage.
    pub fn timings(&self) -> &StageTimings {
        match &self.engine {
            Engine::Cpu(c) => c.timings(),
            Engine::Gpu(g) => g.timings(),
        }
    }

    /// The number of fragments (from the watershed, or given).
    pub fn n_fragments(&self) -> u64 {
        match &self.engine {
            Engine::Cpu(c) => c.n_fragments(),
            Engine::Gpu(g) => g.n_fragments(),
        }
    }

    /// The fragments the merging starts from (the watershed's, or the
    /// configured ones), in the caller's ids (waterz's uint64 labels; 0 is
    /// the background), on the host.
    pub fn fragments(&self) -> Result<ndarray::Array3<u64>> {
        match &self.engine {
            Engine::Cpu(c) => c.fragments(),
            Engine::Gpu(g) => g.fragments(),
        }
    }

    /// The GPU backend's figures: ParHAC rounds so far, slot compactions,
    /// region-graph edges before merging. `None` on the CPU backend.
    pub fn gpu_stats(&self) -> Option<GpuStats<'_>> {
        match &self.engine {
            Engine::Gpu(g) => {
                Some(GpuStats { rounds: g.rounds(), n_compactions: g.n_compactions(), n_edges: g.n_edges() })
            }
            Engine::Cpu(_) => None,
        }
    }
}

/// Figures of the GPU backend's merging so far.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct GpuStats<'a> {
    /// Every ParHAC round run so far, and every serial finish of a
    /// threshold on the host (`on_host`, one entry each).
    pub rounds: &'a [GpuRoundInfo],
    /// How often the edge slots were compacted.
    pub n_compactions: u64,
    /// Region-graph edges before merging.
    pub n_edges: u64,
}

impl Iterator for Agglomeration {
    type Item = Result<ThresholdResult>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_threshold().transpose()
    }
}
