//! The greyscale watershed of 2D images and 3D volumes as a cellular
//! automaton (Galilée et al.'s automaton on the lower-complete image, run
//! block-asynchronously as Quesada-Barriuso, Heras and Argüello do on GPUs).
//!
//! What is computed, and why every schedule that keeps updating until
//! nothing changes gives the same labels, is in
//! [`gpu_waterz_abi::greyscale`]. Three schedules ([`Schedule`]):
//! - **synchronous**: every cell updates once per global step from its
//!   neighbours' previous states; the definition ([`mod@reference`] is its
//!   plain whole-volume version, the oracle of the tests);
//! - **block-asynchronous**: tiles relax in local memory until they settle
//!   between global steps, with the classical first-arrival wavefront on
//!   plateaus; fast, and wrong on some plateau cells (artifacts);
//! - **artifact-free**: the same tiles with the monotone plateau rule, whose
//!   labels equal the synchronous ones.
//!
//! Backends: [`cpu`] (the tiles on rayon's threads, or one local step per
//! global step for the synchronous schedule) and [`gpu`] (one thread block
//! per tile). Both run the same tiles in the same order of global steps,
//! so their labels are equal for every schedule, artifacts included.

pub mod cpu;
pub mod gpu;
#[allow(unsafe_code)]
mod launch;
pub mod reference;

pub use gpu_waterz_abi::greyscale::f32_key;
use gpu_waterz_abi::greyscale::{self as abi, GreyRule, GREY_MAX_LOCAL_STEPS, MASKED};
use gpu_waterz_abi::Dims3;

/// Errors of the greyscale watershed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GreyscaleError {
    /// The inputs do not describe one image, or hold a reserved value.
    #[error("greyscale watershed: {0}")]
    Input(String),
    /// The GPU failed, or the image does not fit its limits.
    #[error("greyscale watershed on the GPU: {0}")]
    Gpu(#[from] gpu_waterz_runtime::RuntimeError),
}

/// The kind of a [`GreyscaleError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GreyscaleErrorKind {
    /// Bad input.
    Input,
    /// The GPU.
    Gpu,
}

impl GreyscaleError {
    /// What went wrong, for callers that branch on it.
    pub fn kind(&self) -> GreyscaleErrorKind {
        match self {
            Self::Input(_) => GreyscaleErrorKind::Input,
            Self::Gpu(_) => GreyscaleErrorKind::Gpu,
        }
    }
}

/// How the automaton's cells are updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// One update of every cell per global step: the definition.
    Synchronous,
    /// Tiles settle between global steps; first-arrival plateau distances
    /// (artifacts on some plateau cells).
    BlockAsynchronous,
    /// Tiles settle between global steps; least plateau distances (equal
    /// to the synchronous labels). The default.
    #[default]
    ArtifactFree,
}

impl Schedule {
    /// The plateau-distance rule of this schedule.
    pub fn distance_rule(self) -> GreyRule {
        match self {
            Self::BlockAsynchronous => GreyRule::DistanceFirstArrival,
            Self::Synchronous | Self::ArtifactFree => GreyRule::Distance,
        }
    }

    /// Local steps a tile takes per global step.
    pub fn max_local_steps(self) -> u32 {
        match self {
            Self::Synchronous => 1,
            Self::BlockAsynchronous | Self::ArtifactFree => GREY_MAX_LOCAL_STEPS,
        }
    }

    /// The schedule's name as the CLI and Python spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Synchronous => "synchronous",
            Self::BlockAsynchronous => "block-asynchronous",
            Self::ArtifactFree => "artifact-free",
        }
    }

    /// The schedule named `name` ([`Schedule::name`]).
    pub fn from_name(name: &str) -> Result<Self, GreyscaleError> {
        match name {
            "synchronous" => Ok(Self::Synchronous),
            "block-asynchronous" => Ok(Self::BlockAsynchronous),
            "artifact-free" => Ok(Self::ArtifactFree),
            other => Err(GreyscaleError::Input(format!(
                "unknown schedule {other:?} (synchronous, block-asynchronous or artifact-free)"
            ))),
        }
    }
}

/// Options of the greyscale watershed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    connectivity: u32,
    watershed_line: bool,
    schedule: Schedule,
}

impl Default for Config {
    /// Connectivity 1 (4 or 6 neighbours), no watershed lines, the
    /// artifact-free schedule.
    fn default() -> Self {
        Self { connectivity: 1, watershed_line: false, schedule: Schedule::ArtifactFree }
    }
}

impl Config {
    /// The defaults ([`Config::default`]).
    pub fn new() -> Self {
        Self::default()
    }
    /// Neighbours: at most this many non-zero offset coordinates (1 to 3;
    /// in 2D, 1 gives 4 neighbours and 2 or 3 give 8).
    pub fn connectivity(mut self, connectivity: u32) -> Self {
        self.connectivity = connectivity;
        self
    }
    /// Whether to set watershed lines to 0.
    pub fn watershed_line(mut self, yes: bool) -> Self {
        self.watershed_line = yes;
        self
    }
    /// The update schedule.
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }
    /// The connectivity.
    pub fn get_connectivity(&self) -> u32 {
        self.connectivity
    }
    /// Whether lines are drawn.
    pub fn get_watershed_line(&self) -> bool {
        self.watershed_line
    }
    /// The schedule.
    pub fn get_schedule(&self) -> Schedule {
        self.schedule
    }
}

/// The inputs: an image of `u32` keys ([`abi::f32_key`] for floats; the
/// key [`MASKED`] is reserved), optional markers (0: unmarked) and an
/// optional mask (0: outside), all in C order of `dims` (`z = 1` for 2D).
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    /// Grey levels as keys.
    pub keys: &'a [u32],
    /// The extent.
    pub dims: Dims3,
    /// Markers, or `None` for the regional minima.
    pub markers: Option<&'a [u32]>,
    /// Mask, or `None` for every cell.
    pub mask: Option<&'a [u8]>,
}

impl Image<'_> {
    /// Checks lengths, the size limit and `config`, and
    /// that no key is the reserved [`MASKED`]; returns the cell count.
    pub fn check(&self, config: &Config) -> Result<u64, GreyscaleError> {
        let n = self.check_extent(config)?;
        if let Some(i) = gpu_waterz_core::parallel::first_position(self.keys, |&k| k == MASKED) {
            return Err(GreyscaleError::Input(format!("key {MASKED:#x} at index {i} is reserved")));
        }
        Ok(n)
    }

    /// The extent checks of [`Image::check`] alone (no key scan).
    pub(crate) fn check_extent(&self, config: &Config) -> Result<u64, GreyscaleError> {
        check_extent(self.dims, config, self.keys.len(), self.markers.map(<[u32]>::len), self.mask.map(<[u8]>::len))
    }
}

/// Checks the extent (below `u32::MAX` cells: minima are labelled by an
/// index + 1), the connectivity, and that keys, markers and mask hold one
/// value per cell; returns the cell count. Host and device images share it.
pub(crate) fn check_extent(
    dims: Dims3,
    config: &Config,
    keys: usize,
    markers: Option<usize>,
    mask: Option<usize>,
) -> Result<u64, GreyscaleError> {
    let n = dims.checked_voxels().ok_or_else(|| GreyscaleError::Input(format!("the shape {dims:?} overflows")))?;
    if n >= u32::MAX as u64 {
        return Err(GreyscaleError::Input(format!("{n} cells; at most {} are supported", u32::MAX - 1)));
    }
    if !(1..=3).contains(&config.connectivity) {
        return Err(GreyscaleError::Input(format!("connectivity {} (1, 2 or 3)", config.connectivity)));
    }
    for (what, len) in [("the keys", Some(keys)), ("the markers", markers), ("the mask", mask)] {
        if let Some(len) = len.filter(|&l| l as u64 != n) {
            return Err(GreyscaleError::Input(format!("{what} hold {len} values for {n} cells of {dims:?}")));
        }
    }
    Ok(n)
}

/// Global steps (synchronisations) each phase took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Steps {
    /// Step 1, the reconstruction under the markers (0 without markers).
    pub level: u64,
    /// Step 2, the plateau distances.
    pub distance: u64,
    /// Step 3, the minima (0 with markers).
    pub minimum: u64,
    /// Step 4, the labels down the descent.
    pub label: u64,
}

impl Steps {
    /// All phases together.
    pub fn total(&self) -> u64 {
        self.level + self.distance + self.minimum + self.label
    }
}

/// Labels (0: masked, unreached or a watershed line) and the steps taken.
#[derive(Clone, Debug)]
pub struct Segmentation {
    /// One label per cell, C order.
    pub labels: Vec<u32>,
    /// Global steps per phase.
    pub steps: Steps,
    /// Number of regional minima (0 with markers).
    pub n_minima: u64,
}

/// The read-only arrays a rule may read, besides its companion and state.
#[derive(Clone, Copy)]
pub(crate) struct Cells<'a> {
    pub dims: Dims3,
    pub connectivity: u32,
    pub keys: &'a [u32],
    pub kinds: &'a [u8],
    /// Empty before the descent is known (read by [`GreyRule::Label`] only).
    pub parents: &'a [u8],
}

impl Cells<'_> {
    /// The parent code of cell `i` ([`abi::PARENT_NONE`] before the descent).
    #[inline]
    pub fn parent(&self, i: usize) -> u8 {
        self.parents.get(i).copied().unwrap_or(abi::PARENT_NONE)
    }
}

/// The value of `values` at the neighbour of cell `index` in direction
/// `dir`, `outside` beyond the volume.
#[inline]
pub(crate) fn value_at<T: Copy>(dims: Dims3, index: usize, values: &[T], outside: T, dir: usize) -> T {
    abi::neighbour_index(dims, index as u64, dir).map_or(outside, |q| values[q as usize])
}

/// Relaxes `state` under `rule` until no cell changes; returns the global
/// steps taken. `companion` is the rule's read-only array (levels), if it
/// reads one.
pub(crate) type RelaxFn<'f> = dyn FnMut(Cells<'_>, GreyRule, Option<&[u32]>, &mut Vec<u32>) -> u64 + 'f;

/// The five steps on the host, with `relax` running the automaton.
pub(crate) fn run_on_host(
    image: &Image<'_>,
    config: &Config,
    relax: &mut RelaxFn<'_>,
) -> Result<Segmentation, GreyscaleError> {
    use abi::{INFINITE, PARENT_TERMINAL};
    use rayon::prelude::*;
    let n = image.check(config)? as usize;
    let dims = image.dims;
    let connectivity = config.connectivity;
    let has_markers = image.markers.is_some();
    let kinds = start::kinds(image);
    let mut level = start::level(image, &kinds);
    let mut steps = Steps::default();
    let mut cells = Cells { dims, connectivity, keys: image.keys, kinds: &kinds, parents: &[] };
    if has_markers {
        steps.level = relax(cells, GreyRule::Level, None, &mut level);
    }
    let mut distance: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| {
            let at = |dir| value_at(dims, i, &level, MASKED, dir);
            if abi::is_distance_source(kinds[i], level[i], connectivity, at) {
                0
            } else {
                INFINITE
            }
        })
        .collect();
    steps.distance = relax(cells, config.schedule.distance_rule(), Some(&level), &mut distance);
    let parents: Vec<u8> = (0..n)
        .into_par_iter()
        .map(|i| {
            let at = |dir| (value_at(dims, i, &level, MASKED, dir), value_at(dims, i, &distance, INFINITE, dir));
            abi::parent_direction(kinds[i], level[i], distance[i], has_markers, connectivity, at)
        })
        .collect();
    let mut labels: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| match image.markers {
            Some(m) if parents[i] == PARENT_TERMINAL => m[i],
            None if parents[i] == PARENT_TERMINAL => i as u32 + 1,
            _ => 0,
        })
        .collect();
    cells.parents = &parents;
    let mut n_minima = 0;
    if !has_markers {
        steps.minimum = relax(cells, GreyRule::Minimum, Some(&level), &mut labels);
        // Number the minima 1.. in the order of their first cells.
        let mut rank = vec![0u32; n];
        for i in 0..n {
            if parents[i] == PARENT_TERMINAL && labels[i] == i as u32 + 1 {
                n_minima += 1;
                rank[i] = n_minima as u32;
            }
        }
        labels.par_iter_mut().zip(&parents).for_each(|(l, &p)| {
            if p == PARENT_TERMINAL {
                *l = rank[*l as usize - 1];
            }
        });
    }
    steps.label = relax(cells, GreyRule::Label, None, &mut labels);
    if config.watershed_line {
        labels = (0..n)
            .into_par_iter()
            .map(|i| {
                let at = |dir| {
                    (
                        value_at(dims, i, &level, MASKED, dir),
                        value_at(dims, i, &distance, INFINITE, dir),
                        value_at(dims, i, &labels, 0, dir),
                    )
                };
                if abi::is_line_cell(parents[i], level[i], distance[i], labels[i], connectivity, at) {
                    0
                } else {
                    labels[i]
                }
            })
            .collect();
    }
    Ok(Segmentation { labels, steps, n_minima })
}

/// The cells' kinds and starting levels, as every backend makes them.
pub(crate) mod start {
    use super::*;
    use gpu_waterz_abi::greyscale::{KIND_FREE, KIND_MARKER, KIND_MASKED};

    /// The cells' kinds.
    pub fn kinds(image: &Image<'_>) -> Vec<u8> {
        (0..image.keys.len())
            .map(|i| {
                if image.mask.is_some_and(|m| m[i] == 0) {
                    KIND_MASKED
                } else if image.markers.is_some_and(|m| m[i] != 0) {
                    KIND_MARKER
                } else {
                    KIND_FREE
                }
            })
            .collect()
    }

    /// The starting level: with markers, the key at markers and
    /// [`MASKED`] elsewhere; without, the key inside the mask.
    pub fn level(image: &Image<'_>, kinds: &[u8]) -> Vec<u32> {
        let has_markers = image.markers.is_some();
        image
            .keys
            .iter()
            .zip(kinds)
            .map(|(&k, &kind)| match kind {
                KIND_MASKED => MASKED,
                KIND_MARKER => k,
                _ if has_markers => MASKED,
                _ => k,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
