//! Per-node state of the rounds: the merge forest, merge tags, best edges,
//! the scratch of (1+ε)-heavy matchings, and the renumbering of the nodes
//! that still have edges.

use super::launch::{self, Forest};
use gpu_waterz_abi::parhac::SENTINEL_BYTE;
use gpu_waterz_runtime::primitives::iota_u32;
use gpu_waterz_runtime::{DeviceBuffer, Gpu, Result};

/// Node ids through a table: node `x` becomes `ids[x]`, for `x` below the
/// table's length; every entry is below `bound`. Made only from tables
/// that hold node ids (original ids, roots), which is what lets a kernel
/// index per-node arrays of `bound` entries with the results.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeMap<'a> {
    pub(super) ids: &'a DeviceBuffer<u32>,
    pub(super) bound: u64,
}

/// The scratch of (1+ε)-heavy matchings, one entry per node.
#[derive(Debug)]
pub(super) struct Heavy {
    pub(super) best_mean: DeviceBuffer<f64>,
    pub(super) best_priority: DeviceBuffer<u64>,
    pub(super) preferred_key: DeviceBuffer<u64>,
}

/// Per-node state of the rounds, for nodes `0..n_nodes`.
///
/// At ε = 0 the rounds may run on a renumbering of the nodes that still
/// have edges (see `renumber`): ids `0..n_round_nodes` in the order of the
/// original ids, so that every comparison of ids and keys, and so every
/// choice, is unchanged, while the per-node arrays shrink to the live part
/// of the graph and stay in the GPU's cache. The renumbered nodes' merges
/// are copied into the forest of all nodes before every renumbering and at
/// every threshold's end.
///
/// Invariants: `parent` (and a renumbering's) holds one entry per node,
/// each a node id (a forest whose roots point to themselves, every merge
/// into a smaller id); the best scores and keys hold at least one entry
/// per round node; a renumbering's original ids are distinct, increasing
/// and below `n_nodes`.
#[derive(Debug)]
pub(super) struct NodeState {
    /// The merge forest of all nodes: `parent[v] = u` once `v` merged into
    /// `u` (complete between thresholds).
    pub(super) parent: DeviceBuffer<u32>,
    /// The tag of the last round each node merged in (0: never).
    pub(super) touched: DeviceBuffer<u32>,
    /// The renumbered nodes, when the rounds run on a renumbering.
    pub(super) renumbered: Option<Renumbered>,
    pub(super) best_score: DeviceBuffer<u64>,
    pub(super) best_key: DeviceBuffer<u64>,
    /// Only for ε > 0.
    pub(super) heavy: Option<Heavy>,
    pub(super) n_nodes: u64,
}

/// The per-node arrays of a round (see [`NodeState::round_nodes`]).
pub(super) struct RoundNodes<'a> {
    pub(super) forest: Forest<'a>,
    pub(super) best_score: &'a mut DeviceBuffer<u64>,
    pub(super) best_key: &'a mut DeviceBuffer<u64>,
    pub(super) heavy: Option<&'a mut Heavy>,
}

/// The nodes the rounds run on after a renumbering.
#[derive(Debug)]
pub(super) struct Renumbered {
    /// Merges since the renumbering, in renumbered ids.
    pub(super) parent: DeviceBuffer<u32>,
    /// Merge tags since the renumbering.
    pub(super) touched: DeviceBuffer<u32>,
    /// The original id of every renumbered node (increasing).
    pub(super) original: DeviceBuffer<u32>,
    pub(super) n: u64,
}

impl NodeState {
    /// Singleton regions for nodes `0..n_nodes`; `with_epsilon` allocates
    /// the scratch of (1+ε)-heavy matchings.
    pub(super) fn new(gpu: &Gpu, n_nodes: u64, with_epsilon: bool) -> Result<Self> {
        let n = n_nodes.max(1) as usize;
        let parent = iota_u32(gpu, n as u64)?;
        let heavy = if with_epsilon {
            Some(Heavy { best_mean: gpu.zeros(n)?, best_priority: gpu.zeros(n)?, preferred_key: gpu.zeros(n)? })
        } else {
            None
        };
        Ok(Self {
            parent,
            touched: gpu.zeros(n)?,
            renumbered: None,
            best_score: unset_bests(gpu, n)?,
            best_key: unset_bests(gpu, n)?,
            heavy,
            n_nodes,
        })
    }

    /// The original ids of the nodes the rounds run on, when they run on a
    /// renumbering (the edge slots' endpoints are then renumbered ids).
    pub(super) fn original_ids(&self) -> Option<NodeMap<'_>> {
        self.renumbered.as_ref().map(|r| NodeMap { ids: &r.original, bound: self.n_nodes })
    }

    /// The number of ids the rounds run on.
    pub(super) fn n_round_nodes(&self) -> u64 {
        self.renumbered.as_ref().map_or(self.n_nodes, |r| r.n)
    }

    /// The arrays a round writes, borrowed apart: the merge forest and tags
    /// of the round's ids (the renumbered nodes' when the rounds run on a
    /// renumbering), the best edges and the ε scratch.
    pub(super) fn round_nodes(&mut self) -> RoundNodes<'_> {
        let Self { parent, touched, renumbered, best_score, best_key, heavy, .. } = self;
        let forest = match renumbered {
            Some(r) => Forest { parent: &mut r.parent, touched: &mut r.touched },
            None => Forest { parent, touched },
        };
        RoundNodes { forest, best_score, best_key, heavy: heavy.as_mut() }
    }

    /// Copies the renumbered nodes' merges into the forest of all nodes
    /// and goes back to original ids (the slots' keys must be translated
    /// by the caller).
    pub(super) fn commit(&mut self, gpu: &Gpu) -> Result<()> {
        if let Some(r) = self.renumbered.take() {
            launch::commit(gpu, &r, &mut self.parent, &mut self.touched, self.n_nodes)?;
        }
        Ok(())
    }
}

/// `len` best scores or keys set to `NO_SCORE` and `EdgeKey::EMPTY` (no
/// edge; all bytes [`SENTINEL_BYTE`]), as the first round at ε = 0 needs
/// them.
pub(super) fn unset_bests(gpu: &Gpu, len: usize) -> Result<DeviceBuffer<u64>> {
    let mut buffer = gpu.uninit::<u64>(len)?;
    gpu.memset_bytes(&mut buffer, SENTINEL_BYTE)?;
    Ok(buffer)
}
