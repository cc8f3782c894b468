//! The ParHAC kernels (see `kernels-rs/src/parhac.rs`): one round's best
//! edges and matching, the in-place contraction of the edge slots, the
//! compaction that parks edges of nodes that cannot merge any more, and
//! segmentations from the merge forest.

use super::primitives::compact_indices;
use super::{check_len, grid_stride_config, launch};
use crate::gpu::{DeviceBuffer, Gpu, Param};
use crate::{DriverContext, Result, RuntimeError};
use gpu_waterz_abi::parhac::{RoundParams, EMPTY_KEY};

/// A region graph's edges in device memory: keys `u << 32 | v` (`u < v`),
/// contact counts and fixed-point affinity sums; the first `n_edges` of
/// each buffer are valid.
#[derive(Debug)]
pub struct DeviceEdges {
    /// Edge keys.
    pub keys: DeviceBuffer<u64>,
    /// Contact counts.
    pub counts: DeviceBuffer<u64>,
    /// Fixed-point affinity sums.
    pub sums: DeviceBuffer<u64>,
    /// The number of edges.
    pub n_edges: u64,
}

impl DeviceEdges {
    fn check(&self, kernel: &'static str) -> Result<()> {
        check_len(kernel, "keys", &self.keys, self.n_edges)?;
        check_len(kernel, "counts", &self.counts, self.n_edges)?;
        check_len(kernel, "sums", &self.sums, self.n_edges)
    }

    fn empty(gpu: &Gpu) -> Result<Self> {
        Ok(Self { keys: gpu.zeros(1)?, counts: gpu.zeros(1)?, sums: gpu.zeros(1)?, n_edges: 0 })
    }

    fn with_capacity(gpu: &Gpu, n: u64) -> Result<Self> {
        let len = n.max(1) as usize;
        Ok(Self { keys: gpu.uninit(len)?, counts: gpu.uninit(len)?, sums: gpu.uninit(len)?, n_edges: n })
    }
}

/// Per-node state of the rounds, for nodes `0..n_nodes`.
///
/// At ε = 0 the rounds may run on a renumbering of the nodes that still
/// have edges (see [`compact`] and [`finish_threshold`]): ids
/// `0..n_round_nodes` in the order of the original ids, so that every
/// comparison of ids and keys, and so every choice, is unchanged, while
/// the per-node arrays shrink to the live part of the graph and stay in
/// the GPU's cache. The renumbered nodes' merges are copied into the
/// forest of all nodes before every renumbering and at every threshold's
/// end.
#[derive(Debug)]
pub struct NodeState {
    /// The merge forest of all nodes: `parent[v] = u` once `v` merged into
    /// `u` (complete between thresholds).
    pub parent: DeviceBuffer<u32>,
    /// The tag of the last round each node merged in (0: never).
    pub touched: DeviceBuffer<u32>,
    /// The renumbered nodes, when the rounds run on a renumbering.
    renumbered: Option<Renumbered>,
    best_score: DeviceBuffer<u64>,
    best_key: DeviceBuffer<u64>,
    /// Only for ε > 0: best means, priorities and preferred keys.
    heavy: Option<(DeviceBuffer<f64>, DeviceBuffer<u64>, DeviceBuffer<u64>)>,
    n_nodes: u64,
}

/// The nodes the rounds run on after a renumbering.
#[derive(Debug)]
struct Renumbered {
    /// Merges since the renumbering, in renumbered ids.
    parent: DeviceBuffer<u32>,
    /// Merge tags since the renumbering.
    touched: DeviceBuffer<u32>,
    /// The original id of every renumbered node (increasing).
    original: DeviceBuffer<u32>,
    n: u64,
}

impl NodeState {
    /// Singleton regions for nodes `0..n_nodes`; `with_epsilon` allocates
    /// the scratch of (1+ε)-heavy matchings.
    pub fn new(gpu: &Gpu, n_nodes: u64, with_epsilon: bool) -> Result<Self> {
        let n = n_nodes.max(1) as usize;
        let parent = super::primitives::iota_u32(gpu, n as u64)?;
        let heavy = if with_epsilon { Some((gpu.zeros(n)?, gpu.zeros(n)?, gpu.zeros(n)?)) } else { None };
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

    /// The number of nodes.
    pub fn n_nodes(&self) -> u64 {
        self.n_nodes
    }

    /// The original id of every node the rounds run on, when they run on a
    /// renumbering (the edge slots' endpoints are then renumbered ids).
    pub fn original_ids(&self) -> Option<&DeviceBuffer<u32>> {
        self.renumbered.as_ref().map(|r| &r.original)
    }

    /// The merge forest and tags the rounds write.
    fn round_forest(&self) -> (&DeviceBuffer<u32>, &DeviceBuffer<u32>) {
        match &self.renumbered {
            Some(r) => (&r.parent, &r.touched),
            None => (&self.parent, &self.touched),
        }
    }

    /// The number of ids the rounds run on.
    fn n_round_nodes(&self) -> u64 {
        self.renumbered.as_ref().map_or(self.n_nodes, |r| r.n)
    }

    /// Copies the renumbered nodes' merges into the forest of all nodes
    /// and goes back to original ids (the slots' keys must be translated
    /// by the caller).
    fn commit(&mut self, gpu: &Gpu) -> Result<()> {
        if let Some(r) = self.renumbered.take() {
            if r.n > 0 {
                // SAFETY: the renumbered arrays hold `r.n` entries; the
                // original ids are distinct node ids below `n_nodes`, the
                // length of the full arrays.
                launch!(
                    gpu,
                    "ph_commit",
                    grid_stride_config(gpu, r.n)?,
                    &r.parent.inner,
                    &r.touched.inner,
                    &r.original.inner,
                    &r.n,
                    &self.parent.inner,
                    &self.touched.inner
                );
            }
        }
        Ok(())
    }
}

/// Renumbers the nodes with edges in the slots (at ε = 0 only; see
/// [`NodeState`]): their ids become `0..m` in increasing order, the slots'
/// keys are translated in place, and the per-node arrays shrink to `m`.
/// Merges made on the previous numbering are committed first.
fn renumber(gpu: &Gpu, slots: &mut EdgeSlots, state: &mut NodeState) -> Result<()> {
    if state.heavy.is_some() {
        // (1+ε)-heavy matchings hash node ids into priorities: they keep
        // the original ids.
        return Ok(());
    }
    let n_current = state.n_round_nodes();
    let n_slots = slots.n_slots();
    let flags = gpu.zeros::<u32>(n_current.max(1) as usize)?;
    if n_slots > 0 {
        // SAFETY: the slots' endpoints are ids below `n_current`, the length
        // of `flags`.
        launch!(
            gpu,
            "ph_mark_endpoints",
            grid_stride_config(gpu, n_slots)?,
            &slots.edges.keys.inner,
            &n_slots,
            &flags.inner
        );
    }
    let (old_of_new, m) = compact_indices(gpu, &flags, n_current)?;
    drop(flags);
    let new_of_old = gpu.uninit::<u32>(n_current.max(1) as usize)?;
    if m > 0 {
        // SAFETY: `old_of_new` holds `m` distinct ids below `n_current`.
        launch!(gpu, "ph_scatter_ids", grid_stride_config(gpu, m)?, &old_of_new.inner, &m, &new_of_old.inner);
    }
    if n_slots > 0 {
        // SAFETY: every endpoint was marked, so its new id is set.
        launch!(
            gpu,
            "ph_translate_keys",
            grid_stride_config(gpu, n_slots)?,
            &slots.edges.keys.inner,
            &n_slots,
            &new_of_old.inner
        );
    }
    let original = match &state.renumbered {
        Some(r) => segment(gpu, &old_of_new, m, &r.original)?,
        None => old_of_new,
    };
    state.commit(gpu)?;
    let len = m.max(1) as usize;
    state.renumbered = Some(Renumbered {
        parent: super::primitives::iota_u32(gpu, len as u64)?,
        touched: gpu.zeros(len)?,
        original,
        n: m,
    });
    state.best_score = unset_bests(gpu, len)?;
    state.best_key = unset_bests(gpu, len)?;
    Ok(())
}

/// `len` best scores or keys set to `u64::MAX` (no edge), as the first
/// round at ε = 0 needs them.
fn unset_bests(gpu: &Gpu, len: usize) -> Result<DeviceBuffer<u64>> {
    let mut buffer = gpu.uninit::<u64>(len)?;
    gpu.memset_bytes(&mut buffer, 0xFF)?;
    Ok(buffer)
}

/// The current graph as edge slots, with the scratch of the rounds: the
/// first `n_slots` slots hold edges or holes ([`EMPTY_KEY`]).
#[derive(Debug)]
pub struct EdgeSlots {
    edges: DeviceEdges,
    slot_of: DeviceBuffer<u32>,
    matched: DeviceBuffer<u32>,
    /// Slots with an endpoint that cannot merge at this threshold, as the
    /// last round at ε = 0 found them.
    park_flags: DeviceBuffer<u32>,
    eligible: Option<DeviceBuffer<u32>>,
    table_keys: DeviceBuffer<u64>,
    table_rep: DeviceBuffer<u32>,
    table_mask: u64,
    /// Whether the last contraction's table entries are still to be
    /// emptied (see [`match_and_contract`]).
    table_dirty: bool,
    /// Merges and parkable edges of the round, holes made by contractions.
    counters: DeviceBuffer<u64>,
}

/// The most rounds [`match_round`] and [`contract`] may queue before
/// [`read_counts`] collects their counts.
pub const MAX_BATCH: usize = 64;

/// What a round's matching found and what its contraction removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundCounts {
    /// Pairs merged.
    pub n_merged: u64,
    /// Edges with an endpoint that can no longer merge at this threshold.
    pub n_parkable: u64,
    /// Holes made by the round's contraction.
    pub n_removed: u64,
}

/// Edges set aside during a threshold: an endpoint can no longer merge,
/// so they wait, with their keys as they were, for the threshold's end.
/// The buffers grow to the graph's size once and are reused.
#[derive(Debug)]
pub struct ParkedEdges {
    /// The first `n_edges` are parked edges; the buffers hold `capacity`.
    edges: DeviceEdges,
    capacity: u64,
}

impl ParkedEdges {
    /// No edges.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Self { edges: DeviceEdges::empty(gpu)?, capacity: 1 })
    }

    /// The number of parked edges.
    pub fn len(&self) -> u64 {
        self.edges.n_edges
    }

    /// Whether no edge is parked.
    pub fn is_empty(&self) -> bool {
        self.edges.n_edges == 0
    }

    /// Room for `needed` edges, keeping the parked ones; grows to at least
    /// `hint` (the graph's size, which parked edges never exceed).
    fn reserve(&mut self, gpu: &Gpu, needed: u64, hint: u64) -> Result<()> {
        if needed <= self.capacity {
            return Ok(());
        }
        let capacity = needed.max(hint);
        let len = self.edges.n_edges;
        self.edges.keys = grow(gpu, &self.edges.keys, len, capacity as usize)?;
        self.edges.counts = grow(gpu, &self.edges.counts, len, capacity as usize)?;
        self.edges.sums = grow(gpu, &self.edges.sums, len, capacity as usize)?;
        self.capacity = capacity;
        Ok(())
    }
}

impl EdgeSlots {
    /// Takes `edges` (without holes) as the slots; the hash table holds
    /// twice as many slots as edges. `with_epsilon` allocates the
    /// eligibility flags of (1+ε)-heavy matchings.
    pub fn new(gpu: &Gpu, edges: DeviceEdges, with_epsilon: bool) -> Result<Self> {
        edges.check("ph_best_score")?;
        if edges.n_edges >= u32::MAX as u64 {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ParHAC",
                reason: format!("{} edges: slot indices are u32", edges.n_edges),
            });
        }
        let capacity = edges.n_edges.max(1) as usize;
        let (table_keys, table_rep) = empty_table(gpu, table_len_for(edges.n_edges))?;
        let table_len = table_keys.len();
        Ok(Self {
            edges,
            slot_of: gpu.uninit(capacity)?,
            matched: gpu.uninit(capacity)?,
            park_flags: gpu.uninit(capacity)?,
            eligible: if with_epsilon { Some(gpu.uninit(capacity)?) } else { None },
            table_keys,
            table_rep,
            table_mask: table_len as u64 - 1,
            table_dirty: false,
            counters: gpu.zeros(3 * MAX_BATCH)?,
        })
    }

    /// The number of slots in use (edges and holes).
    pub fn n_slots(&self) -> u64 {
        self.edges.n_edges
    }

    /// The edge slots (keys, counts, sums).
    pub fn edges(&self) -> &DeviceEdges {
        &self.edges
    }
}

/// The hash-table size for deduplicating `n` edges: a power of two, at
/// least twice `n`.
fn table_len_for(n: u64) -> usize {
    (2 * n.max(1) as usize).next_power_of_two().max(1024)
}

/// An empty hash table of `len` entries: every key `EMPTY_KEY`, every
/// representative `u32::MAX` (all bytes 0xFF).
fn empty_table(gpu: &Gpu, len: usize) -> Result<(DeviceBuffer<u64>, DeviceBuffer<u32>)> {
    let mut table_keys = gpu.uninit::<u64>(len)?;
    gpu.memset_bytes(&mut table_keys, 0xFF)?;
    let mut table_rep = gpu.uninit::<u32>(len)?;
    gpu.memset_bytes(&mut table_rep, 0xFF)?;
    Ok((table_keys, table_rep))
}
const _: () = assert!(EMPTY_KEY == u64::MAX);

impl EdgeSlots {
    /// Fits the hash table to deduplicating `n` edges: the table is
    /// allocated once for the initial graph (edges only ever become fewer),
    /// and only its first `len` entries are used, a power of two at least
    /// twice `n`, so that as the graph contracts the table's random accesses
    /// stay in the GPU's cache. The table must be clean (every entry empty,
    /// as it is whenever no contraction's entries are pending).
    fn fit_table(&mut self, n: u64) -> Result<()> {
        if self.table_dirty {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ph_relabel_insert",
                reason: "the hash table is resized while entries are pending".into(),
            });
        }
        let len = table_len_for(n);
        if len > self.table_keys.len() {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ph_relabel_insert",
                reason: format!("{n} edges exceed the capacity the slots were made for"),
            });
        }
        self.table_mask = len as u64 - 1;
        Ok(())
    }
}

/// Queues one round's matching (no synchronization): finds every node's
/// best edge below `params.threshold` (`params.n_edges` must be the slot
/// count), picks a matching among the (1+ε)-heavy edges (mutual best edges
/// when `state` has no ε scratch), records the merges in `state`, flags the
/// matched slots, and counts into the batch's entry `batch_index` (below
/// [`MAX_BATCH`]; see [`read_counts`]).
pub fn match_round(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    params: RoundParams,
    state: &mut NodeState,
    batch_index: usize,
) -> Result<()> {
    let n = check_round(slots, params, batch_index)?;
    if n > 0 {
        best_edges(gpu, slots, params, state)?;
        let cfg = grid_stride_config(gpu, n)?;
        let p = Param(params);
        let e = &slots.edges;
        let (keys, counts, sums) = (&e.keys.inner, &e.counts.inner, &e.sums.inner);
        let counters = slots.counters.inner.slice(3 * batch_index..3 * batch_index + 3);
        let counters = &counters;
        // SAFETY (this and the launches below): the slots hold `n` edges or
        // holes whose endpoints are below the number of round ids, the
        // length of every per-node buffer; `matched`, `eligible` and
        // `slot_of` hold one u32 per slot; `counters` three u64s; the best
        // edges of the round are complete.
        let (parent, touched) = match &state.renumbered {
            Some(r) => (&r.parent.inner, &r.touched.inner),
            None => (&state.parent.inner, &state.touched.inner),
        };
        let matched = &slots.matched.inner;
        match (&mut state.heavy, &slots.eligible) {
            (Some((best_mean, best_priority, preferred_key)), Some(eligible)) => {
                // SAFETY: as above.
                launch!(
                    gpu,
                    "ph_reset_endpoints",
                    cfg,
                    keys,
                    &n,
                    &best_priority.inner,
                    &0u64,
                    &preferred_key.inner,
                    &u64::MAX
                );
                // SAFETY: as above; `best_mean` holds one f64 per node.
                launch!(
                    gpu,
                    "ph_best_mean",
                    cfg,
                    keys,
                    counts,
                    sums,
                    &p,
                    &state.best_score.inner,
                    &state.best_key.inner,
                    &best_mean.inner
                );
                // SAFETY: as above; the priorities were reset to 0.
                launch!(
                    gpu,
                    "ph_eligible",
                    cfg,
                    keys,
                    counts,
                    sums,
                    &p,
                    &state.best_score.inner,
                    &best_mean.inner,
                    &eligible.inner,
                    &best_priority.inner,
                    counters
                );
                // SAFETY: as above; the preferred keys were reset.
                launch!(
                    gpu,
                    "ph_preferred_key",
                    cfg,
                    keys,
                    &p,
                    &eligible.inner,
                    &best_priority.inner,
                    &preferred_key.inner
                );
                // SAFETY: as above.
                launch!(
                    gpu,
                    "ph_match_preferred",
                    cfg,
                    keys,
                    &p,
                    &eligible.inner,
                    &best_priority.inner,
                    &preferred_key.inner,
                    parent,
                    touched,
                    matched,
                    counters
                );
            }
            (None, _) => {
                // SAFETY: as above.
                launch!(
                    gpu,
                    "ph_match_mutual",
                    cfg,
                    keys,
                    counts,
                    sums,
                    &p,
                    &state.best_score.inner,
                    &state.best_key.inner,
                    parent,
                    touched,
                    matched,
                    &slots.park_flags.inner,
                    counters
                );
            }
            (Some(_), None) => {
                return Err(RuntimeError::InvalidLaunch {
                    kernel: "ph_eligible",
                    reason: "the edge slots were made without ε scratch".into(),
                })
            }
        }
    }
    Ok(())
}

/// Checks a round's batch index and slot count; returns the slot count.
fn check_round(slots: &EdgeSlots, params: RoundParams, batch_index: usize) -> Result<u64> {
    let n = slots.n_slots();
    if batch_index >= MAX_BATCH {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "ph_match_mutual",
            reason: format!("batch index {batch_index} is not below {MAX_BATCH}"),
        });
    }
    if params.n_edges != n {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "ph_best_score",
            reason: format!("the round covers {} slots, the graph has {n}", params.n_edges),
        });
    }
    Ok(n)
}

/// Queues a round's best edges (`n_slots > 0`): best scores, then best
/// keys; the first also empties the hash table the last contraction left.
fn best_edges(gpu: &Gpu, slots: &mut EdgeSlots, params: RoundParams, state: &NodeState) -> Result<()> {
    let n = slots.n_slots();
    let cfg = grid_stride_config(gpu, n)?;
    let p = Param(params);
    let e = &slots.edges;
    let (keys, counts, sums) = (&e.keys.inner, &e.counts.inner, &e.sums.inner);
    let clear = std::mem::take(&mut slots.table_dirty) as u32;
    // SAFETY (this and the launches below): the slots hold `n` edges or
    // holes whose endpoints are below the number of round ids, the length
    // of every per-node buffer; `slot_of` holds the last contraction's
    // table slots for these `n` slots when `clear` is set.
    if state.heavy.is_some() {
        // (1+ε)-heavy rounds reset here; at ε = 0 the previous contraction
        // (`ph_resolve`) did.
        launch!(
            gpu,
            "ph_reset_endpoints",
            cfg,
            keys,
            &n,
            &state.best_score.inner,
            &u64::MAX,
            &state.best_key.inner,
            &u64::MAX
        );
    }
    // SAFETY: as above; the endpoints' best scores were reset.
    launch!(
        gpu,
        "ph_best_score",
        cfg,
        keys,
        counts,
        sums,
        &p,
        &state.best_score.inner,
        &clear,
        &slots.slot_of.inner,
        &slots.table_keys.inner,
        &slots.table_rep.inner
    );
    // SAFETY: as above; the endpoints' best keys were reset.
    launch!(gpu, "ph_best_key", cfg, keys, counts, sums, &p, &state.best_score.inner, &state.best_key.inner);
    Ok(())
}

/// Queues one whole round at ε = 0 without merge history (no
/// synchronization): best edges, then the matching and the first step of
/// the contraction in one launch (`ph_match_contract`), then the second
/// step, which also resets the next round's best edges (`ph_resolve`).
/// The same merges and contraction as [`match_round`] then [`contract`],
/// in four launches instead of seven; the table is emptied by the next
/// round's first launch.
pub fn match_and_contract(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    params: RoundParams,
    state: &mut NodeState,
    batch_index: usize,
) -> Result<()> {
    if state.heavy.is_some() {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "ph_match_contract",
            reason: "(1+ε)-heavy matchings take match_round and contract".into(),
        });
    }
    let n = check_round(slots, params, batch_index)?;
    if n == 0 {
        return Ok(());
    }
    best_edges(gpu, slots, params, state)?;
    let cfg = grid_stride_config(gpu, n)?;
    let p = Param(params);
    let counters = slots.counters.inner.slice(3 * batch_index..3 * batch_index + 3);
    let (parent, touched) = state.round_forest();
    let e = &slots.edges;
    // SAFETY: the slots hold `n` edges or holes whose endpoints are below
    // the number of round ids, the length of every per-node buffer; the
    // round's best keys are complete; the table holds `table_mask + 1`
    // empty entries (emptied by `best_edges`), at least twice the slots;
    // `slot_of` and `park_flags` hold one u32 per slot; `counters` three
    // u64s.
    launch!(
        gpu,
        "ph_match_contract",
        cfg,
        &e.keys.inner,
        &p,
        &state.best_key.inner,
        &parent.inner,
        &touched.inner,
        &slots.park_flags.inner,
        &slots.table_keys.inner,
        &slots.table_rep.inner,
        &slots.table_mask,
        &slots.slot_of.inner,
        &counters
    );
    resolve(gpu, slots, state, state.n_round_nodes(), &counters)?;
    slots.table_dirty = true;
    Ok(())
}

/// Queues the contraction's second step (`ph_resolve`) after its first
/// (`ph_match_contract` or `ph_relabel_insert`) over all slots, resetting
/// the best edges of round ids `0..n_reset`.
fn resolve(
    gpu: &Gpu,
    slots: &EdgeSlots,
    state: &NodeState,
    n_reset: u64,
    counters: &cudarc::driver::CudaView<'_, u64>,
) -> Result<()> {
    let n = slots.n_slots();
    let e = &slots.edges;
    // SAFETY: the slots hold `n` edges or holes; `slot_of` holds the first
    // step's table slot (or u32::MAX) for each, and the representatives in
    // `table_rep` are slot indices; `best_score` and `best_key` hold at
    // least `n_reset` u64s; `counters` three u64s.
    launch!(
        gpu,
        "ph_resolve",
        grid_stride_config(gpu, n)?,
        &e.keys.inner,
        &e.counts.inner,
        &e.sums.inner,
        &n,
        &slots.table_rep.inner,
        &slots.slot_of.inner,
        &n_reset,
        &state.best_score.inner,
        &state.best_key.inner,
        counters
    );
    Ok(())
}

/// Empties the hash-table entries the last [`match_and_contract`] used,
/// before the slots change or are deduplicated otherwise.
fn clear_table(gpu: &Gpu, slots: &mut EdgeSlots) -> Result<()> {
    let n = slots.n_slots();
    if std::mem::take(&mut slots.table_dirty) && n > 0 {
        // SAFETY: `slot_of` holds the last contraction's table slots for
        // these `n` slots; the table slots are below its length.
        launch!(
            gpu,
            "ph_clear_table",
            grid_stride_config(gpu, n)?,
            &slots.slot_of.inner,
            &n,
            &slots.table_keys.inner,
            &slots.table_rep.inner
        );
    }
    Ok(())
}

/// The counts of the first `k` rounds queued since the last call
/// (downloaded, so this synchronizes), then resets them.
pub fn read_counts(gpu: &Gpu, slots: &mut EdgeSlots, k: usize) -> Result<Vec<RoundCounts>> {
    let c = gpu.download(&slots.counters)?;
    gpu.memset_zero(&mut slots.counters)?;
    let rounds = c.chunks(3).take(k.min(MAX_BATCH));
    Ok(rounds.map(|c| RoundCounts { n_merged: c[0], n_parkable: c[1], n_removed: c[2] }).collect())
}

/// Appends the matched slots' merges to the history at `offset`: keys
/// `u << 32 | v` (`v` merged into `u`, original ids) and scores. The history buffers grow
/// as needed. Returns the number written.
pub fn record_merges(
    gpu: &Gpu,
    slots: &EdgeSlots,
    state: &NodeState,
    offset: u64,
    history_keys: &mut DeviceBuffer<u64>,
    history_scores: &mut DeviceBuffer<f64>,
) -> Result<u64> {
    let (indices, n) = compact_indices(gpu, &slots.matched, slots.n_slots())?;
    let needed = (offset + n) as usize;
    if history_keys.len() < needed {
        let capacity = needed.max(2 * history_keys.len());
        *history_keys = grow(gpu, history_keys, offset, capacity)?;
        *history_scores = grow(gpu, history_scores, offset, capacity)?;
    }
    if n > 0 {
        let e = &slots.edges;
        let (relabel, original) = match state.original_ids() {
            Some(o) => (1u32, &o.inner),
            None => (0u32, &indices.inner),
        };
        // SAFETY: `indices` holds `n` slots of edges below `n_slots`; the
        // history holds at least `offset + n` elements; renumbered
        // endpoints index `original`.
        launch!(
            gpu,
            "ph_history",
            grid_stride_config(gpu, n)?,
            &e.keys.inner,
            &e.counts.inner,
            &e.sums.inner,
            &indices.inner,
            &n,
            &relabel,
            original,
            &offset,
            &history_keys.inner,
            &history_scores.inner
        );
    }
    Ok(n)
}

/// A buffer of `capacity` elements starting with the first `len` of `old`.
fn grow<T: crate::DeviceElement>(
    gpu: &Gpu,
    old: &DeviceBuffer<T>,
    len: u64,
    capacity: usize,
) -> Result<DeviceBuffer<T>> {
    let mut new = gpu.zeros::<T>(capacity.max(1))?;
    if len > 0 {
        let src = old.inner.slice(..len as usize);
        let mut dst = new.inner.slice_mut(..len as usize);
        gpu.stream().memcpy_dtod(&src, &mut dst).context(|| "growing a buffer".into())?;
    }
    Ok(new)
}

/// Runs the hash-table deduplication over the slots: with `all`, every
/// edge with its key; otherwise the edges touched by the round `params.tag`
/// with their new keys. Parallel edges end up as one edge with the sum of
/// their statistics; the others become holes (counted).
fn deduplicate(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    params: RoundParams,
    state: &NodeState,
    all: bool,
    batch_index: usize,
) -> Result<()> {
    clear_table(gpu, slots)?;
    let n = slots.n_slots();
    if n == 0 {
        return Ok(());
    }
    if batch_index >= MAX_BATCH {
        return Err(RuntimeError::InvalidLaunch {
            kernel: "ph_relabel_insert",
            reason: format!("batch index {batch_index} is not below {MAX_BATCH}"),
        });
    }
    let counters = slots.counters.inner.slice(3 * batch_index..3 * batch_index + 3);
    let cfg = grid_stride_config(gpu, n)?;
    let p = Param(RoundParams { n_edges: n, ..params });
    let (round_parent, round_touched) = state.round_forest();
    // At ε = 0 a round's contraction resets the next round's best edges
    // (the per-node arrays cover the round's ids; not at a threshold's end,
    // which works on original ids).
    let n_reset = if !all && state.heavy.is_none() { state.n_round_nodes() } else { 0 };
    let e = &slots.edges;
    let all = all as u32;
    // SAFETY: the slots hold `n` edges or holes whose endpoints index the
    // per-node buffers; the table holds `table_mask + 1` empty slots, at
    // least twice the number of edges; `slot_of` holds one u32 per slot;
    // `counters` three u64s.
    launch!(
        gpu,
        "ph_relabel_insert",
        cfg,
        &e.keys.inner,
        &p,
        &round_parent.inner,
        &round_touched.inner,
        &all,
        &slots.table_keys.inner,
        &slots.table_rep.inner,
        &slots.table_mask,
        &slots.slot_of.inner,
        &counters
    );
    resolve(gpu, slots, state, n_reset, &counters)?;
    // SAFETY: as above; empties exactly the table slots used.
    launch!(gpu, "ph_clear_table", cfg, &slots.slot_of.inner, &n, &slots.table_keys.inner, &slots.table_rep.inner);
    Ok(())
}

/// Queues the in-place contraction after a round (no synchronization):
/// edges touched by the round `params.tag` get their new endpoints,
/// parallel edges merge (exact integer sums), edges inside merged pairs
/// become holes, counted into the batch's entry `batch_index`.
pub fn contract(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    params: RoundParams,
    state: &NodeState,
    batch_index: usize,
) -> Result<()> {
    deduplicate(gpu, slots, params, state, false, batch_index)
}

/// Compacts the slots: edges whose endpoints can both still merge at this
/// threshold (per this round's best scores) stay, in order; edges with an
/// endpoint that cannot are appended to `parked`; holes go. Resets the
/// counts. Synchronizes.
pub fn compact(gpu: &Gpu, slots: &mut EdgeSlots, state: &mut NodeState, parked: &mut ParkedEdges) -> Result<()> {
    clear_table(gpu, slots)?;
    let n = slots.n_slots();
    let active = gpu.uninit::<u32>(n.max(1) as usize)?;
    let parked_flags = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        // At ε = 0 the last round's best scores were reset by its
        // contraction; its matching recorded the parkable slots.
        let use_flags = state.heavy.is_none() as u32;
        // SAFETY: the slots' endpoints index `best_score`; the flags hold
        // one u32 per slot, `park_flags` written by the last round.
        launch!(
            gpu,
            "ph_classify",
            grid_stride_config(gpu, n)?,
            &slots.edges.keys.inner,
            &n,
            &use_flags,
            &slots.park_flags.inner,
            &state.best_score.inner,
            &active.inner,
            &parked_flags.inner
        );
    }
    let (active_idx, n_active) = compact_indices(gpu, &active, n)?;
    let (parked_idx, n_parked) = compact_indices(gpu, &parked_flags, n)?;
    let kept = DeviceEdges::with_capacity(gpu, n_active)?;
    gather(gpu, &slots.edges, &active_idx, n_active, None, &kept, 0)?;
    if n_parked > 0 {
        let old = parked.len();
        parked.reserve(gpu, old + n_parked, slots.slot_of.len() as u64)?;
        // Parked edges keep original ids: the numbering changes below.
        gather(gpu, &slots.edges, &parked_idx, n_parked, state.original_ids(), &parked.edges, old)?;
        parked.edges.n_edges = old + n_parked;
    }
    slots.edges = kept;
    slots.fit_table(n_active)?;
    renumber(gpu, slots, state)?;
    gpu.memset_zero(&mut slots.counters)?;
    Ok(())
}

/// Copies the edges `indices[0..n]` of `src` into `dst` at `offset`,
/// relabelling their keys through `roots` when given.
fn gather(
    gpu: &Gpu,
    src: &DeviceEdges,
    indices: &DeviceBuffer<u32>,
    n: u64,
    roots: Option<&DeviceBuffer<u32>>,
    dst: &DeviceEdges,
    offset: u64,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    check_len("ph_gather_edges", "indices", indices, n)?;
    check_len("ph_gather_edges", "destination", &dst.keys, offset + n)?;
    let n_bad = gpu.zeros::<u32>(1)?;
    let (relabel, roots_buffer) = match roots {
        Some(r) => (1u32, &r.inner),
        None => (0u32, &indices.inner),
    };
    // SAFETY: `indices` holds `n` slot indices of `src`'s edges; `roots`,
    // when used, holds one region per node (the endpoints are node ids);
    // `dst` holds `offset + n` elements and is a different allocation.
    launch!(
        gpu,
        "ph_gather_edges",
        grid_stride_config(gpu, n)?,
        &src.keys.inner,
        &src.counts.inner,
        &src.sums.inner,
        &indices.inner,
        &n,
        &relabel,
        roots_buffer,
        &offset,
        &dst.keys.inner,
        &dst.counts.inner,
        &dst.sums.inner,
        &n_bad.inner
    );
    if roots.is_some() {
        check_no_bad(gpu, &n_bad, "ph_gather_edges", 0)?;
    }
    Ok(())
}

/// The edges (non-empty slots) of `edges`, compacted in order; their
/// endpoints go through `map` when given.
fn live_edges(gpu: &Gpu, edges: &DeviceEdges, map: Option<&DeviceBuffer<u32>>) -> Result<DeviceEdges> {
    let n = edges.n_edges;
    let live = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        // SAFETY: the keys hold `n` u64s, `live` `n` u32s.
        launch!(gpu, "ph_live_flags", grid_stride_config(gpu, n)?, &edges.keys.inner, &n, &live.inner);
    }
    let (live_idx, n_live) = compact_indices(gpu, &live, n)?;
    let out = DeviceEdges::with_capacity(gpu, n_live)?;
    gather(gpu, edges, &live_idx, n_live, map, &out, 0)?;
    Ok(out)
}

/// Ends a threshold whose first round had tag `first_tag`: the merges are
/// committed to the forest of all nodes, the slots' edges and the parked
/// ones (their endpoints through the regions' roots) become one graph
/// without holes or parallel edges, in no particular order: the slots' new
/// content, renumbered at ε = 0. Resets the counts. Synchronizes.
pub fn finish_threshold(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    parked: &mut ParkedEdges,
    state: &mut NodeState,
    first_tag: u32,
) -> Result<()> {
    clear_table(gpu, slots)?;
    let live = live_edges(gpu, &slots.edges, state.original_ids())?;
    state.commit(gpu)?;
    let n_parked = parked.len();
    if n_parked > 0 {
        let roots = find_roots(gpu, state)?;
        let (n_live, total) = (live.n_edges, live.n_edges + n_parked);
        slots.fit_table(total)?;
        if (slots.slot_of.len() as u64) < total {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ph_relabel_insert",
                reason: format!("{total} edges exceed the capacity the slots were made for"),
            });
        }
        let merged = DeviceEdges::with_capacity(gpu, total)?;
        let all = super::primitives::iota_u32(gpu, n_live.max(n_parked))?;
        gather(gpu, &live, &all, n_live, None, &merged, 0)?;
        gather(gpu, &parked.edges, &all, n_parked, Some(&roots), &merged, n_live)?;
        parked.edges.n_edges = 0;
        // Parallel edges between the two parts merge in the hash table.
        slots.edges = merged;
        let params = RoundParams { n_edges: total, threshold: 0.0, factor: 1.0, round: 0, tag: first_tag, pad: 0 };
        deduplicate(gpu, slots, params, state, true, 0)?;
        slots.edges = live_edges(gpu, &slots.edges, None)?;
    } else {
        slots.edges = live;
    }
    slots.fit_table(slots.n_slots())?;
    renumber(gpu, slots, state)?;
    gpu.memset_zero(&mut slots.counters)?;
    Ok(())
}

/// The region of every node (the root of its merge tree).
pub fn find_roots(gpu: &Gpu, state: &NodeState) -> Result<DeviceBuffer<u32>> {
    let n = state.n_nodes;
    let roots = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        // SAFETY: `parent` holds `n` node ids forming a forest; `roots` `n` u32s.
        launch!(gpu, "ph_find_roots", grid_stride_config(gpu, n)?, &state.parent.inner, &n, &roots.inner);
    }
    Ok(roots)
}

/// The segmentation of the first `n` `labels`: each replaced by
/// `roots[label]`. A label outside `roots` is an error (checked on the
/// device; this synchronizes).
pub fn segment(gpu: &Gpu, labels: &DeviceBuffer<u32>, n: u64, roots: &DeviceBuffer<u32>) -> Result<DeviceBuffer<u32>> {
    check_len("ph_segment", "labels", labels, n)?;
    let out = gpu.uninit::<u32>(n.max(1) as usize)?;
    let n_roots = roots.len() as u64;
    let n_bad = gpu.zeros::<u32>(1)?;
    if n > 0 {
        // SAFETY: `labels` holds `n` u32s, `out` as many; the kernel checks
        // every label against `n_roots`, the length of `roots`; `n_bad` is
        // one zeroed u32.
        launch!(
            gpu,
            "ph_segment",
            grid_stride_config(gpu, n)?,
            &labels.inner,
            &n,
            &roots.inner,
            &n_roots,
            &out.inner,
            &n_bad.inner
        );
    }
    check_no_bad(gpu, &n_bad, "ph_segment", n_roots)?;
    Ok(out)
}

/// The segmentation of the first `n` `labels` in u64 ids: each label `k`
/// replaced by `table[k]`. A label outside `table` is an error (checked on
/// the device; this synchronizes).
pub fn segment_u64(
    gpu: &Gpu,
    labels: &DeviceBuffer<u32>,
    n: u64,
    table: &DeviceBuffer<u64>,
) -> Result<DeviceBuffer<u64>> {
    check_len("ph_segment_u64", "labels", labels, n)?;
    let out = gpu.uninit::<u64>(n.max(1) as usize)?;
    let n_table = table.len() as u64;
    let n_bad = gpu.zeros::<u32>(1)?;
    if n > 0 {
        // SAFETY: `labels` holds `n` u32s, `out` `n` u64s; the kernel checks
        // every label against `n_table`, the length of `table`; `n_bad` is
        // one zeroed u32.
        launch!(
            gpu,
            "ph_segment_u64",
            grid_stride_config(gpu, n)?,
            &labels.inner,
            &n,
            &table.inner,
            &n_table,
            &out.inner,
            &n_bad.inner
        );
    }
    check_no_bad(gpu, &n_bad, "ph_segment_u64", n_table)?;
    Ok(out)
}

fn check_no_bad(gpu: &Gpu, n_bad: &DeviceBuffer<u32>, kernel: &'static str, n_table: u64) -> Result<()> {
    let bad = gpu.download(n_bad)?[0];
    if bad > 0 {
        return Err(crate::RuntimeError::InvalidLaunch {
            kernel,
            reason: format!("{bad} voxels hold fragment ids outside the {n_table} nodes of the graph"),
        });
    }
    Ok(())
}
