//! What to compute: the [`Config`] builder and the [`Backend`] choice.

use crate::{Error, Result};
use gpu_waterz_core::{Arithmetic, ScoringFunction};
use gpu_waterz_parhac::gpu::HostFinish;
use gpu_waterz_runtime::Gpu;
use ndarray::Array3;

/// Where the pipeline runs.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Backend {
    /// The GPU when a usable one is present (device 0) and the
    /// configuration is one the GPU backend honours, else the CPU reference;
    /// [`Agglomeration::backend`](crate::Agglomeration::backend) and
    /// [`Agglomeration::backend_note`](crate::Agglomeration::backend_note)
    /// say which and why. The default.
    #[default]
    Auto,
    /// The CPU reference: stock waterz's results, bit for bit.
    Cpu,
    /// This GPU: exact integer statistics, ParHAC merging.
    Gpu(Gpu),
}

impl Backend {
    /// The GPU backend on CUDA device `ordinal`; fails with
    /// [`ErrorKind::NoGpu`](crate::ErrorKind::NoGpu) when there is none.
    pub fn gpu(ordinal: usize) -> Result<Self> {
        Ok(Self::Gpu(Gpu::new(ordinal)?))
    }
}

/// The backend a pipeline actually runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    /// The CPU reference.
    Cpu,
    /// The GPU pipeline.
    Gpu,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
        })
    }
}

/// What to compute, and where. Every setter states its default; nothing is
/// checked until [`Agglomeration::new`](crate::Agglomeration::new), which
/// fails on values out of range and on combinations the backend cannot
/// honour (never ignoring a setting silently).
///
/// ```
/// use gpu_waterz::{Backend, Config};
/// let config = Config::new(&[0.1, 0.3, 0.5]).epsilon(0.0).merge_history(true).backend(Backend::Cpu);
/// # let _ = config;
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) thresholds: Vec<f64>,
    pub(crate) scoring: ScoringFunction,
    pub(crate) aff_threshold_low: f64,
    pub(crate) aff_threshold_high: f64,
    pub(crate) arithmetic: Option<Arithmetic>,
    pub(crate) epsilon: f64,
    pub(crate) host_finish: HostFinish,
    pub(crate) discretize_queue: u64,
    pub(crate) merge_history: bool,
    pub(crate) region_graph: bool,
    pub(crate) fragments: Option<Array3<u64>>,
    pub(crate) ground_truth: Option<Array3<u64>>,
    pub(crate) backend: Backend,
}

impl Config {
    /// A configuration that merges up to each of `thresholds` (sorted
    /// ascending at the start; one result per threshold), with waterz's
    /// defaults for everything else.
    pub fn new(thresholds: &[f64]) -> Self {
        Self {
            thresholds: thresholds.to_vec(),
            scoring: ScoringFunction::MeanAffinity,
            aff_threshold_low: 0.0001,
            aff_threshold_high: 0.9999,
            arithmetic: None,
            epsilon: 0.0,
            host_finish: HostFinish::default(),
            discretize_queue: 0,
            merge_history: false,
            region_graph: false,
            fragments: None,
            ground_truth: None,
            backend: Backend::Auto,
        }
    }

    /// The merge thresholds (no default: given to [`Config::new`]).
    pub fn thresholds(mut self, thresholds: &[f64]) -> Self {
        self.thresholds = thresholds.to_vec();
        self
    }

    /// The edge score. Default: waterz's `OneMinus<MeanAffinity>`; the GPU
    /// backend implements only that one.
    pub fn scoring(mut self, scoring: ScoringFunction) -> Self {
        self.scoring = scoring;
        self
    }

    /// The watershed's thresholds: faces above `high` join voxels
    /// unconditionally, faces below `low` never. Default: waterz's 0.0001
    /// and 0.9999. Unused when fragments are given.
    pub fn watershed_thresholds(mut self, low: f64, high: f64) -> Self {
        self.aff_threshold_low = low;
        self.aff_threshold_high = high;
        self
    }

    /// How edge statistics are accumulated. Default: the backend's own,
    /// [`Arithmetic::Waterz`] on the CPU (stock waterz bit for bit) and
    /// [`Arithmetic::Exact`] on the GPU (the only one it has). The CPU
    /// backend takes both.
    pub fn arithmetic(mut self, arithmetic: Arithmetic) -> Self {
        self.arithmetic = Some(arithmetic);
        self
    }

    /// ParHAC's ε for the GPU backend: each round merges edges within a
    /// factor `1 + ε` of the best. Default 0, which merges exactly as
    /// waterz's serial order on tie-free input. The CPU backend merges in
    /// waterz's serial order and takes only 0.
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = epsilon;
        self
    }

    /// When the GPU backend (at ε = 0) hands a threshold's last merges to
    /// the host, which merges the remaining graph serially in one step
    /// instead of thousands of rounds that merge one pair each. The result
    /// is the same (waterz's serial order on tie-free input; see
    /// `docs/parhac.md`). Default: [`HostFinish::default`];
    /// [`HostFinish::NEVER`] keeps every merge in GPU rounds. The CPU
    /// backend merges serially anyway and ignores it.
    pub fn host_finish(mut self, host_finish: HostFinish) -> Self {
        self.host_finish = host_finish;
        self
    }

    /// waterz's `discretize_queue`: 0 (the default) for its priority queue,
    /// else its bin queue with that many bins. CPU backend only.
    pub fn discretize_queue(mut self, bins: u64) -> Self {
        self.discretize_queue = bins;
        self
    }

    /// Whether each result carries the merges since the previous threshold.
    /// Default: no.
    pub fn merge_history(mut self, yes: bool) -> Self {
        self.merge_history = yes;
        self
    }

    /// Whether each result carries the remaining region graph. Default: no.
    pub fn region_graph(mut self, yes: bool) -> Self {
        self.region_graph = yes;
        self
    }

    /// Fragments to merge instead of the watershed's (any u64 ids, 0 is
    /// background), of the affinities' spatial shape. Default: none, the
    /// watershed makes them.
    pub fn fragments(mut self, fragments: Array3<u64>) -> Self {
        self.fragments = Some(fragments);
        self
    }

    /// A ground truth of the affinities' spatial shape: each result then
    /// carries waterz's metrics (VOI and Rand, label 0 ignored). Default:
    /// none.
    pub fn ground_truth(mut self, ground_truth: Array3<u64>) -> Self {
        self.ground_truth = Some(ground_truth);
        self
    }

    /// Where to run. Default: [`Backend::Auto`].
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The GPU this configuration names ([`Backend::Gpu`]), if any.
    pub fn gpu(&self) -> Option<&Gpu> {
        match &self.backend {
            Backend::Gpu(gpu) => Some(gpu),
            _ => None,
        }
    }

    /// Why the GPU backend cannot honour this configuration, if it cannot.
    pub(crate) fn gpu_unsupported(&self) -> Option<String> {
        if self.scoring != ScoringFunction::MeanAffinity {
            return Some(format!(
                "the GPU backend scores edges by their mean affinity only, not {}; use the CPU backend for other scoring functions",
                self.scoring.waterz_name()
            ));
        }
        if self.discretize_queue != 0 {
            return Some(
                "discretize_queue selects waterz's binned serial queue; the GPU backend merges exactly in parallel rounds (leave it 0, or use the CPU backend)".into(),
            );
        }
        if self.arithmetic == Some(Arithmetic::Waterz) {
            return Some(
                "the GPU backend computes exact integer statistics; waterz's float32 arithmetic is the CPU backend's (leave arithmetic unset, set Exact, or use the CPU backend)".into(),
            );
        }
        None
    }

    /// Why the CPU backend cannot honour this configuration, if it cannot.
    pub(crate) fn cpu_unsupported(&self) -> Option<String> {
        (self.epsilon != 0.0).then(|| {
            format!(
                "epsilon = {} sets ParHAC's approximation, which only the GPU backend runs; the CPU backend merges in waterz's serial order (epsilon 0)",
                self.epsilon
            )
        })
    }

    /// Checks the values that do not depend on the backend
    /// (`borrowed_fragments`: fragments come from elsewhere than the
    /// configuration, so the watershed does not run).
    pub(crate) fn check_values(&self, borrowed_fragments: bool) -> Result<()> {
        gpu_waterz_core::Thresholds::new(&self.thresholds)?;
        if !self.epsilon.is_finite() || self.epsilon < 0.0 {
            return Err(gpu_waterz_core::CoreError::Epsilon(self.epsilon).into());
        }
        if self.fragments.is_none() && !borrowed_fragments {
            gpu_waterz_core::params::check_watershed_thresholds(self.aff_threshold_low, self.aff_threshold_high)?;
        }
        if self.discretize_queue > 65_536 {
            return Err(Error::new(
                crate::ErrorKind::InvalidInput,
                format!(
                    "discretize_queue must be 0 (no bins) or a number of bins of at most 65536, not {}",
                    self.discretize_queue
                ),
            ));
        }
        Ok(())
    }
}
