//! ParHAC on the GPU: the rounds of [`crate::cpu::Parhac`], on a region
//! graph in device memory.
//!
//! Every round runs over the current edge slots: best incident edges and
//! the matching with integer atomics of a total order (the kernels in
//! `kernels-rs/src/parhac/`), the merges into the smaller id, then the
//! contraction in place: the edges of merged nodes get their new
//! endpoints and meet their parallel edges in a hash table, where exact
//! integer sums combine them; the others stay where they are. A round
//! costs a few passes over the slots; rounds are queued in batches with
//! one synchronization (the merge counts) per batch. When holes and edges
//! of nodes that can no longer merge at this threshold (no incident edge
//! below it: their edges only ever combine into means between theirs) make
//! up a quarter of the slots, the slots are compacted and those edges
//! parked until the threshold's end, so late rounds, which merge few
//! pairs, touch few edges.
//!
//! The merges, rounds and segmentations equal the CPU ParHAC's (same
//! arithmetic and per-slot decisions, from `gpu_waterz_abi::parhac`), and
//! so, at ε = 0, waterz's serial order on tie-free input.
//!
//! The host code follows the kernels' concepts: `best` (best edges),
//! `matching`, `contract` (and the fused ε = 0 round), `history`,
//! `compact` (compaction and parking), `renumber`, `segment`; the state
//! lives in `node_state` and `slots`; every launch, and every `unsafe`
//! block of this crate, is in the private `launch` module.

mod best;
mod compact;
mod contract;
mod history;
mod host_finish;
#[allow(unsafe_code)]
mod launch;
mod matching;
mod node_state;
mod renumber;
mod segment;
mod slots;

pub use host_finish::HostFinish;
pub use segment::segment_u64;

use crate::{ParhacError, ScoredEdge};
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{edge_score, round_tag, RoundParams};
use gpu_waterz_core::CoreError;
use gpu_waterz_graph::gpu::DeviceEdges;
use gpu_waterz_runtime::{DeviceBuffer, Gpu};
use gpu_waterz_watershed::gpu::DeviceFragments;
use history::DeviceHistory;
use node_state::NodeState;
use slots::{read_counts, EdgeSlots, ParkedEdges};
use std::time::Instant;

/// Compact only when at least this many slots are in use: below it a
/// compaction costs more than the passes it saves.
const MIN_SLOTS_TO_COMPACT: u64 = 1 << 14;

/// Rounds queued between two synchronizations: one while rounds are
/// expensive (large graphs, where compactions pay off early), more as they
/// get cheap and the launch and synchronization latency dominates. A round
/// after the first without merges changes nothing, so queuing a few too
/// many is harmless.
fn batch_size(n_slots: u64) -> usize {
    match n_slots {
        0..=65_535 => 32,
        65_536..=1_048_575 => 8,
        1_048_576..=8_388_607 => 2,
        _ => 1,
    }
}

/// What happened in one GPU round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuRoundInfo {
    /// Edge slots (edges and holes) the round ran over.
    pub n_edges: u64,
    /// Pairs merged.
    pub n_merged: u64,
    /// Wall time of the round, contraction (and compaction) included, in
    /// seconds (the end of a threshold, after its last round, not included).
    pub seconds: f64,
    /// Whether this was the serial finish of a threshold on the host
    /// ([`HostFinish`]): `n_merged` pairs merged in one step.
    pub on_host: bool,
}

/// ParHAC's state on the GPU: the contracted graph and the merge forest.
#[derive(Debug)]
pub struct GpuParhac {
    gpu: Gpu,
    epsilon: f64,
    slots: EdgeSlots,
    parked: ParkedEdges,
    /// Holes in the slots, as counted so far.
    holes: u64,
    compactions: u64,
    state: NodeState,
    history: Option<DeviceHistory>,
    rounds: Vec<GpuRoundInfo>,
    merged_until: f64,
    host_finish: HostFinish,
}

impl GpuParhac {
    /// Starts from `edges` over their nodes `0..n_nodes` (fragment ids; 0
    /// is the background and has no edges), merging with `epsilon`; keeps
    /// the merge history on the device when `with_history`. The arguments
    /// are checked before anything reaches the device.
    pub fn new(gpu: &Gpu, edges: DeviceEdges, epsilon: f64, with_history: bool) -> Result<Self, ParhacError> {
        if !epsilon.is_finite() || epsilon < 0.0 {
            return Err(CoreError::Epsilon(epsilon).into());
        }
        edges.check_device(gpu).map_err(|e| {
            ParhacError::Runtime(gpu_waterz_runtime::RuntimeError::InvalidLaunch {
                kernel: "GpuParhac::new",
                reason: e.to_string(),
            })
        })?;
        let n_nodes = edges.n_nodes();
        if n_nodes > u32::MAX as u64 {
            return Err(ParhacError::TooManyNodes { n_nodes });
        }
        if edges.n_edges() >= u32::MAX as u64 {
            return Err(ParhacError::TooManyEdges { n_edges: edges.n_edges() });
        }
        let state = NodeState::new(gpu, n_nodes, epsilon > 0.0)?;
        let history = if with_history { Some(DeviceHistory::new(gpu)?) } else { None };
        Ok(Self {
            gpu: gpu.clone(),
            epsilon,
            slots: EdgeSlots::new(gpu, edges, epsilon > 0.0)?,
            parked: ParkedEdges::new(gpu, n_nodes)?,
            holes: 0,
            compactions: 0,
            state,
            history,
            rounds: Vec::new(),
            merged_until: f64::NEG_INFINITY,
            host_finish: HostFinish::default(),
        })
    }

    /// Sets when a threshold's last merges go to the host (ε = 0 only).
    /// Default: [`HostFinish::default`]; [`HostFinish::NEVER`] keeps every
    /// merge in GPU rounds.
    pub fn with_host_finish(mut self, host_finish: HostFinish) -> Self {
        self.host_finish = host_finish;
        self
    }

    /// The rounds run so far.
    pub fn rounds(&self) -> &[GpuRoundInfo] {
        &self.rounds
    }

    /// The compactions of the edge slots so far.
    pub fn n_compactions(&self) -> u64 {
        self.compactions
    }

    /// The number of edges of the current graph (between thresholds).
    pub fn n_edges(&self) -> u64 {
        self.slots.n_slots()
    }

    /// The number of nodes (fragments and the background).
    pub fn n_nodes(&self) -> u64 {
        self.state.n_nodes
    }

    /// Runs rounds until no edge scores below `threshold` (compared in
    /// float32, as waterz); returns the number of merges. A threshold at or
    /// below the last one does nothing.
    pub fn merge_until(&mut self, threshold: f32) -> Result<u64, ParhacError> {
        let t = threshold as f64;
        if t <= self.merged_until {
            return Ok(0);
        }
        self.merged_until = t;
        let gpu = &self.gpu;
        let mut total = 0;
        let first_tag = (self.rounds.len() + 1) as u32;
        let mut last_merged = None;
        loop {
            let start = Instant::now();
            let first_round = self.rounds.len() as u64;
            let n_slots = self.slots.n_slots();
            if self.epsilon == 0.0 && last_merged.is_none() && self.host_finish.hands_off(n_slots, None) {
                // A small graph: no rounds at all.
                return Ok(total + self.finish_on_host(threshold, first_tag, false, start)?);
            }
            let batch = if self.history.is_some() { 1 } else { batch_size(n_slots) };
            for i in 0..batch {
                let params = RoundParams::new(n_slots, t, self.epsilon, first_round + i as u64);
                if self.epsilon == 0.0 && self.history.is_none() {
                    contract::match_and_contract(gpu, &mut self.slots, params, &mut self.state, i)?;
                    continue;
                }
                matching::match_round(gpu, &mut self.slots, params, &mut self.state, i)?;
                if let Some(h) = &mut self.history {
                    h.record(gpu, &self.slots, &self.state)?;
                }
                contract::contract(gpu, &mut self.slots, params, &mut self.state, i)?;
            }
            let counts = read_counts(gpu, &mut self.slots, batch)?;
            let seconds = start.elapsed().as_secs_f64() / batch as f64;
            for (i, c) in counts.iter().enumerate() {
                tracing::trace!(
                    round = first_round + i as u64,
                    n_slots,
                    n_merged = c.n_merged,
                    seconds,
                    "ParHAC round"
                );
                self.rounds.push(GpuRoundInfo { n_edges: n_slots, n_merged: c.n_merged, seconds, on_host: false });
                self.holes += c.n_removed;
                if c.n_merged == 0 {
                    // No edge is below the threshold: the batch's later
                    // rounds changed nothing, and do not count.
                    compact::finish_threshold(gpu, &mut self.slots, &mut self.parked, &mut self.state, first_tag)?;
                    self.holes = 0;
                    tracing::debug!(
                        threshold,
                        rounds = self.rounds.len(),
                        merged = total,
                        n_edges = self.slots.n_slots(),
                        "ParHAC threshold done"
                    );
                    return Ok(total);
                }
                total += c.n_merged;
            }
            last_merged = counts.last().map(|c| c.n_merged);
            if self.epsilon == 0.0 && self.host_finish.hands_off(n_slots, last_merged) {
                return Ok(total + self.finish_on_host(threshold, first_tag, true, Instant::now())?);
            }
            let parkable = counts.last().map_or(0, |c| c.n_parkable);
            if n_slots >= MIN_SLOTS_TO_COMPACT && 4 * (self.holes + parkable) > n_slots {
                compact::compact(gpu, &mut self.slots, &mut self.state, &mut self.parked)?;
                self.holes = 0;
                self.compactions += 1;
            }
        }
    }

    /// Ends the threshold that started with the round tagged `first_tag`
    /// on the host ([`HostFinish`]), right after a round when
    /// `after_round` (the slots are compacted first, so that the host takes
    /// only edges whose nodes can still merge: the last round's park flags
    /// name the others) or before any; returns the merges. `start` is when
    /// this step began, for its entry in [`Self::rounds`].
    fn finish_on_host(
        &mut self,
        threshold: f32,
        first_tag: u32,
        after_round: bool,
        start: Instant,
    ) -> Result<u64, ParhacError> {
        let gpu = &self.gpu;
        let n_slots = self.slots.n_slots();
        if after_round && n_slots >= MIN_SLOTS_TO_COMPACT {
            compact::compact(gpu, &mut self.slots, &mut self.state, &mut self.parked)?;
            self.compactions += 1;
        }
        let tag = round_tag(self.rounds.len() as u64);
        let merged =
            host_finish::finish_on_host(gpu, &mut self.slots, &mut self.state, self.history.as_mut(), threshold, tag)?;
        compact::finish_threshold(gpu, &mut self.slots, &mut self.parked, &mut self.state, first_tag)?;
        self.holes = 0;
        let seconds = start.elapsed().as_secs_f64();
        self.rounds.push(GpuRoundInfo { n_edges: n_slots, n_merged: merged, seconds, on_host: true });
        tracing::debug!(
            threshold,
            rounds = self.rounds.len(),
            on_host = merged,
            n_slots,
            seconds,
            n_edges = self.slots.n_slots(),
            "ParHAC threshold finished on the host"
        );
        Ok(merged)
    }

    /// The merges recorded since merge `start` (0: all), as waterz lists
    /// them: `b` merged into `a`, which stays the region's id (`c = a`).
    /// Within a round they are in `(a, b)` order, as the CPU ParHAC's.
    pub fn history_since(&self, start: u64) -> Result<Vec<crate::Merge>, ParhacError> {
        let Some(h) = &self.history else {
            return Err(ParhacError::NoHistory);
        };
        Ok(h.since(&self.gpu, start)?)
    }

    /// The number of merges recorded so far.
    pub fn history_len(&self) -> u64 {
        self.history.as_ref().map_or(0, |h| h.len())
    }

    /// The region of every node (the smallest node id of its region), on
    /// the device.
    pub fn roots(&self) -> Result<DeviceBuffer<u32>, ParhacError> {
        Ok(segment::find_roots(&self.gpu, &self.state)?)
    }

    /// The current segmentation of `fragments`, whose fragments must be
    /// nodes of the graph (`n_fragments < n_nodes`, else this fails before
    /// anything is launched), on the device: every voxel's region.
    pub fn segmentation(&self, fragments: &DeviceFragments) -> Result<DeviceBuffer<u32>, ParhacError> {
        segment::check_fragments(fragments, self.state.n_nodes)?;
        self.gpu.check_device(fragments.labels(), "the fragments")?;
        let roots = self.roots()?;
        let labels = fragments.labels();
        Ok(launch::segment(&self.gpu, labels, labels.len() as u64, &roots)?)
    }

    /// The current region graph, downloaded: edges between regions (by
    /// their ids) with their scores, sorted by `(u, v)`.
    pub fn region_graph(&self) -> Result<Vec<ScoredEdge>, ParhacError> {
        let edges = &self.slots.edges;
        let n = edges.len as usize;
        let keys = self.gpu.download(&edges.keys)?;
        let counts = self.gpu.download(&edges.counts)?;
        let sums = self.gpu.download(&edges.sums)?;
        // At ε = 0 the slots hold renumbered ids (see `NodeState`).
        let original = match self.state.original_ids() {
            Some(map) => Some(self.gpu.download(map.ids)?),
            None => None,
        };
        let id = |x: u64| original.as_ref().map_or(x, |o| o[x as usize] as u64);
        let mut edges: Vec<ScoredEdge> = (0..n)
            .map(|e| (EdgeKey::from_bits(keys[e]), e))
            .filter(|(key, _)| !key.is_empty())
            .map(|(key, e)| ScoredEdge { u: id(key.u()), v: id(key.v()), score: edge_score(counts[e], sums[e]) })
            .collect();
        edges.sort_by_key(|e| (e.u, e.v));
        Ok(edges)
    }
}
