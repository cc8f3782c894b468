//! Every launch of the ParHAC kernels (`kernels-rs/src/parhac/`), and the
//! only `unsafe` code of this crate.
//!
//! Each function here is safe: it checks what its kernel's `# Safety`
//! section asks for that a length or a count can show (buffer lengths,
//! slot counts, the hash table's size and state, the batch's counters), and
//! receives the rest from a type of this crate that carries it:
//! - [`EdgeArrays`]: every endpoint in its slots is below its `node_bound`,
//!   so per-node arrays of that length may be indexed with them (checked
//!   here for every per-node array a kernel indexes);
//! - [`HashTable`]: whether a contraction's entries are pending, and over
//!   how many slots (tracked here, where the contractions are launched);
//! - [`NodeMap`]: a table of node ids, each below its `bound`;
//! - [`SlotIndices`]: slot indices below a known bound, made here only
//!   (from the runtime's compaction or an identity sequence);
//! - [`NodeState`](super::node_state::NodeState)'s merge forests, whose
//!   parents are node ids, and its best keys, which are `EdgeKey::EMPTY` or
//!   keys of edges between round nodes.

use super::node_state::{NodeMap, Renumbered};
use super::slots::{EdgeArrays, HashTable, MAX_BATCH};
use gpu_waterz_abi::parhac::{
    hash_table_len, EndpointMap, ParkSource, PhBestKeyArgs, PhBestMeanArgs, PhBestScoreArgs, PhClassifyArgs,
    PhClearTableArgs, PhCommitArgs, PhEligibleArgs, PhFindRootsArgs, PhGatherEdgesArgs, PhHistoryArgs, PhLiveFlagsArgs,
    PhMarkEndpointsArgs, PhMatchContractArgs, PhMatchMutualArgs, PhMatchPreferredArgs, PhPreferredKeyArgs,
    PhRelabelInsertArgs, PhResetEndpointsArgs, PhResolveArgs, PhScatterIdsArgs, PhSegmentArgs, PhSegmentU64Args,
    PhTranslateKeysArgs, Rekeying, RoundCounts, RoundParams, TableState, ROUND_COUNTS_LEN,
};
use gpu_waterz_runtime::primitives::{compact_indices, iota_u32};
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, Result, RuntimeError, BLOCK};

const _: () = assert!(BLOCK.is_multiple_of(32), "warp-uniform kernels need whole warps");

fn invalid(kernel: &'static str, reason: String) -> RuntimeError {
    RuntimeError::InvalidLaunch { kernel, reason }
}

/// Checks that the three slot buffers hold the slots in use; returns
/// their number.
fn check_slots(kernel: &'static str, edges: &EdgeArrays) -> Result<u64> {
    check_len(kernel, "the slot keys", &edges.keys, edges.len)?;
    check_len(kernel, "the slot counts", &edges.counts, edges.len)?;
    check_len(kernel, "the slot sums", &edges.sums, edges.len)?;
    Ok(edges.len)
}

/// Checks that a per-node array can be indexed with every endpoint.
fn check_nodes<T>(kernel: &'static str, what: &str, buffer: &DeviceBuffer<T>, edges: &EdgeArrays) -> Result<()> {
    check_len(kernel, what, buffer, edges.node_bound)
}

/// Checks a round's parameters against the slots; returns their number.
fn check_round(kernel: &'static str, params: &RoundParams, edges: &EdgeArrays) -> Result<u64> {
    let n = check_slots(kernel, edges)?;
    if params.n_edges != n {
        return Err(invalid(kernel, format!("the round covers {} slots, the graph has {n}", params.n_edges)));
    }
    Ok(n)
}

/// The counts of round `batch` of a batch.
fn round_counts(kernel: &'static str, counters: &mut DeviceBuffer<u64>, batch: usize) -> Result<*mut RoundCounts> {
    if batch >= MAX_BATCH {
        return Err(invalid(kernel, format!("batch index {batch} is not below {MAX_BATCH}")));
    }
    check_len(kernel, "the round counters", counters, (ROUND_COUNTS_LEN * (batch + 1)) as u64)?;
    Ok(counters.as_mut_ptr().wrapping_add(ROUND_COUNTS_LEN * batch).cast::<RoundCounts>())
}

/// Checks that the table is empty and large enough to deduplicate `n`
/// slots (at least twice as many entries, so that probing ends), and that
/// `slot_of` covers the slots.
fn check_empty_table(kernel: &'static str, table: &HashTable, n: u64) -> Result<()> {
    if table.pending.is_some() {
        return Err(invalid(kernel, "the hash table still holds the last contraction's entries".into()));
    }
    let len = table.mask.wrapping_add(1);
    if !len.is_power_of_two() || len < hash_table_len(n) {
        return Err(invalid(kernel, format!("a table of {len} entries for {n} slots")));
    }
    check_len(kernel, "the table keys", &table.keys, len)?;
    check_len(kernel, "the table representatives", &table.rep, len)?;
    check_len(kernel, "slot_of", &table.slot_of, n)
}

/// Checks that the table holds the entries of a contraction over `n`
/// slots.
fn check_pending_table(kernel: &'static str, table: &HashTable, n: u64) -> Result<()> {
    if table.pending != Some(n) {
        return Err(invalid(kernel, format!("no contraction over {n} slots is pending ({:?})", table.pending)));
    }
    check_len(kernel, "slot_of", &table.slot_of, n)
}

/// Slot indices, the first `n` of `indices`, each below `bound`.
#[derive(Debug)]
pub(super) struct SlotIndices {
    indices: DeviceBuffer<u32>,
    n: u64,
    /// `None`: index `i` is `i` (so the first `k` are below `k`).
    bound: Option<u64>,
}

impl SlotIndices {
    /// The number of indices.
    pub(super) fn len(&self) -> u64 {
        self.n
    }

    /// A bound of the first `k` indices.
    fn bound_of_first(&self, k: u64) -> u64 {
        self.bound.unwrap_or(k)
    }
}

/// The slots `i < n` whose flag is set, in order (the runtime's
/// compaction: every index is below `n`).
pub(super) fn flagged_slots(gpu: &Gpu, flags: &DeviceBuffer<u32>, n: u64) -> Result<SlotIndices> {
    let (indices, count) = compact_indices(gpu, flags, n)?;
    Ok(SlotIndices { indices, n: count, bound: Some(n) })
}

/// The slots `0..n`, in order.
pub(super) fn all_slots(gpu: &Gpu, n: u64) -> Result<SlotIndices> {
    Ok(SlotIndices { indices: iota_u32(gpu, n)?, n, bound: None })
}

/// `ph_reset_endpoints`: `a[x] = a_value`, `b[x] = b_value` at both
/// endpoints of every edge.
pub(super) fn reset_endpoints(
    gpu: &Gpu,
    edges: &EdgeArrays,
    a: &mut DeviceBuffer<u64>,
    a_value: u64,
    b: &mut DeviceBuffer<u64>,
    b_value: u64,
) -> Result<()> {
    const K: &str = "ph_reset_endpoints";
    let n = check_slots(K, edges)?;
    check_nodes(K, "a", a, edges)?;
    check_nodes(K, "b", b, edges)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhResetEndpointsArgs {
        keys: edges.keys.as_ptr(),
        n_slots: n,
        a: a.as_mut_ptr(),
        a_value,
        b: b.as_mut_ptr(),
        b_value,
    };
    // SAFETY: the keys hold `n` slots (checked) whose endpoints are below
    // the slots' node bound, the length of `a` and `b` (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `ph_best_score`: every node's lowest candidate score; first empties the
/// table entries a fused round left pending over the same slots.
pub(super) fn best_score(
    gpu: &Gpu,
    edges: &EdgeArrays,
    params: RoundParams,
    best_score: &mut DeviceBuffer<u64>,
    table: &mut HashTable,
) -> Result<()> {
    const K: &str = "ph_best_score";
    let n = check_round(K, &params, edges)?;
    check_nodes(K, "best_score", best_score, edges)?;
    let state = match table.pending {
        None => TableState::Clean,
        Some(_) => {
            check_pending_table(K, table, n)?;
            TableState::Pending
        }
    };
    if n == 0 {
        return Ok(());
    }
    let args = PhBestScoreArgs {
        keys: edges.keys.as_ptr(),
        counts: edges.counts.as_ptr(),
        sums: edges.sums.as_ptr(),
        params,
        best_score: best_score.as_mut_ptr(),
        table: state,
        slot_of: table.slot_of.as_ptr(),
        table_keys: table.keys.as_mut_ptr(),
        table_rep: table.rep.as_mut_ptr(),
    };
    // SAFETY: the slots hold `n` edges or holes (checked) whose endpoints
    // index `best_score` (checked against the node bound); when entries are
    // pending, `slot_of` holds the table entries (below the table's length)
    // that the contraction over these `n` slots used (checked: `pending`).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    table.pending = None;
    Ok(())
}

/// `ph_best_key`: breaks the best scores' ties by the smallest key.
pub(super) fn best_key(
    gpu: &Gpu,
    edges: &EdgeArrays,
    params: RoundParams,
    best_score: &DeviceBuffer<u64>,
    best_key: &mut DeviceBuffer<u64>,
) -> Result<()> {
    const K: &str = "ph_best_key";
    let n = check_round(K, &params, edges)?;
    check_nodes(K, "best_score", best_score, edges)?;
    check_nodes(K, "best_key", best_key, edges)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhBestKeyArgs {
        keys: edges.keys.as_ptr(),
        counts: edges.counts.as_ptr(),
        sums: edges.sums.as_ptr(),
        params,
        best_score: best_score.as_ptr(),
        best_key: best_key.as_mut_ptr(),
    };
    // SAFETY: the slots hold `n` edges or holes (checked) whose endpoints
    // index both per-node arrays (checked against the node bound).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// The merge forest and merge tags a matching writes, one per round node.
pub(super) struct Forest<'a> {
    pub(super) parent: &'a mut DeviceBuffer<u32>,
    pub(super) touched: &'a mut DeviceBuffer<u32>,
}

/// `ph_match_mutual`: the ε = 0 matching; flags matched and parkable
/// slots and counts into round `batch`'s counters.
#[allow(clippy::too_many_arguments)]
pub(super) fn match_mutual(
    gpu: &Gpu,
    edges: &EdgeArrays,
    params: RoundParams,
    best_score: &DeviceBuffer<u64>,
    best_key: &DeviceBuffer<u64>,
    forest: Forest<'_>,
    matched: &mut DeviceBuffer<u32>,
    park_flags: &mut DeviceBuffer<u32>,
    counters: &mut DeviceBuffer<u64>,
    batch: usize,
) -> Result<()> {
    const K: &str = "ph_match_mutual";
    let n = check_round(K, &params, edges)?;
    check_nodes(K, "best_score", best_score, edges)?;
    check_nodes(K, "best_key", best_key, edges)?;
    check_nodes(K, "parent", forest.parent, edges)?;
    check_nodes(K, "touched", forest.touched, edges)?;
    check_len(K, "matched", matched, n)?;
    check_len(K, "park_flags", park_flags, n)?;
    let counters = round_counts(K, counters, batch)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhMatchMutualArgs {
        keys: edges.keys.as_ptr(),
        counts: edges.counts.as_ptr(),
        sums: edges.sums.as_ptr(),
        params,
        best_score: best_score.as_ptr(),
        best_key: best_key.as_ptr(),
        parent: forest.parent.as_mut_ptr(),
        touched: forest.touched.as_mut_ptr(),
        matched: matched.as_mut_ptr(),
        park_flags: park_flags.as_mut_ptr(),
        counters,
    };
    // SAFETY: the slots hold `n` edges or holes (checked) whose endpoints
    // index the four per-node arrays (checked against the node bound);
    // the flags hold one u32 per slot and `counters` one `RoundCounts`
    // (checked); the launch is grid-stride over whole warps.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `ph_best_mean`: the mean of every node's best edge (ε > 0).
pub(super) fn best_mean(
    gpu: &Gpu,
    edges: &EdgeArrays,
    params: RoundParams,
    best_score: &DeviceBuffer<u64>,
    best_key: &DeviceBuffer<u64>,
    best_mean: &mut DeviceBuffer<f64>,
) -> Result<()> {
    const K: &str = "ph_best_mean";
    let n = check_round(K, &params, edges)?;
    check_nodes(K, "best_score", best_score, edges)?;
    check_nodes(K, "best_key", best_key, edges)?;
    check_nodes(K, "best_mean", best_mean, edges)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhBestMeanArgs {
        keys: edges.keys.as_ptr(),
        counts: edges.counts.as_ptr(),
        sums: edges.sums.as_ptr(),
        params,
        best_score: best_score.as_ptr(),
        best_key: best_key.as_ptr(),
        best_mean: best_mean.as_mut_ptr(),
    };
    // SAFETY: the slots hold `n` edges or holes (checked) whose endpoints
    // index the three per-node arrays (checked against the node bound).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// The per-node arrays of a (1+ε)-heavy matching.
pub(super) struct HeavyArrays<'a> {
    pub(super) best_score: &'a DeviceBuffer<u64>,
    pub(super) best_mean: &'a DeviceBuffer<f64>,
    pub(super) best_priority: &'a mut DeviceBuffer<u64>,
    pub(super) preferred_key: &'a mut DeviceBuffer<u64>,
}

/// The ε > 0 matching after [`best_mean`]: `ph_eligible` flags the
/// (1+ε)-heavy edges in `eligible`, `ph_preferred_key` and
/// `ph_match_preferred` (which read those flags: one wrapper, so that the
/// flags they follow to edges are this round's) merge the edges both
/// endpoints prefer, flagged in `matched`; counts into round `batch`'s
/// counters. The priorities and preferred keys were reset at the
/// endpoints.
#[allow(clippy::too_many_arguments)]
pub(super) fn heavy_matching(
    gpu: &Gpu,
    edges: &EdgeArrays,
    params: RoundParams,
    heavy: HeavyArrays<'_>,
    eligible: &mut DeviceBuffer<u32>,
    forest: Forest<'_>,
    matched: &mut DeviceBuffer<u32>,
    counters: &mut DeviceBuffer<u64>,
    batch: usize,
) -> Result<()> {
    const K: &str = "ph_eligible";
    let n = check_round(K, &params, edges)?;
    let HeavyArrays { best_score, best_mean, best_priority, preferred_key } = heavy;
    check_nodes(K, "best_score", best_score, edges)?;
    check_nodes(K, "best_mean", best_mean, edges)?;
    check_nodes(K, "best_priority", best_priority, edges)?;
    check_nodes(K, "preferred_key", preferred_key, edges)?;
    check_nodes(K, "parent", forest.parent, edges)?;
    check_nodes(K, "touched", forest.touched, edges)?;
    check_len(K, "eligible", eligible, n)?;
    check_len(K, "matched", matched, n)?;
    let counters = round_counts(K, counters, batch)?;
    if n == 0 {
        return Ok(());
    }
    let cfg = gpu.grid_stride_config(n);
    let args = PhEligibleArgs {
        keys: edges.keys.as_ptr(),
        counts: edges.counts.as_ptr(),
        sums: edges.sums.as_ptr(),
        params,
        best_score: best_score.as_ptr(),
        best_mean: best_mean.as_ptr(),
        eligible: eligible.as_mut_ptr(),
        best_priority: best_priority.as_mut_ptr(),
        counters,
    };
    // SAFETY: the slots hold `n` edges or holes (checked) whose endpoints
    // index the per-node arrays (checked against the node bound);
    // `eligible` holds one u32 per slot, `counters` one `RoundCounts`
    // (checked); the launch is grid-stride over whole warps.
    unsafe { gpu.launch(cfg, args) }?;
    let args = PhPreferredKeyArgs {
        keys: edges.keys.as_ptr(),
        params,
        eligible: eligible.as_ptr(),
        best_priority: best_priority.as_ptr(),
        preferred_key: preferred_key.as_mut_ptr(),
    };
    // SAFETY: as above; `ph_eligible` just flagged edges only (no holes)
    // in all `n` slots, so the slots this kernel follows hold edges.
    unsafe { gpu.launch(cfg, args) }?;
    let args = PhMatchPreferredArgs {
        keys: edges.keys.as_ptr(),
        params,
        eligible: eligible.as_ptr(),
        best_priority: best_priority.as_ptr(),
        preferred_key: preferred_key.as_ptr(),
        parent: forest.parent.as_mut_ptr(),
        touched: forest.touched.as_mut_ptr(),
        matched: matched.as_mut_ptr(),
        counters,
    };
    // SAFETY: as above; `matched` holds one u32 per slot (checked).
    unsafe { gpu.launch(cfg, args) }
}

/// `ph_history`: the merges of the slots `indices` at `offset` of the
/// history, their endpoints through `original` when given.
pub(super) fn history(
    gpu: &Gpu,
    edges: &EdgeArrays,
    indices: &SlotIndices,
    original: Option<NodeMap<'_>>,
    offset: u64,
    out_keys: &mut DeviceBuffer<u64>,
    out_scores: &mut DeviceBuffer<f64>,
) -> Result<()> {
    const K: &str = "ph_history";
    let n_slots = check_slots(K, edges)?;
    let n = indices.len();
    check_len(K, "indices", &indices.indices, n)?;
    if indices.bound_of_first(n) > n_slots {
        return Err(invalid(K, format!("slot indices up to {} for {n_slots} slots", indices.bound_of_first(n))));
    }
    let end = offset.checked_add(n).ok_or_else(|| invalid(K, "the history's end overflows".into()))?;
    check_len(K, "the history keys", out_keys, end)?;
    check_len(K, "the history scores", out_scores, end)?;
    let (endpoints, map) = match original {
        Some(m) => {
            check_nodes(K, "original", m.ids, edges)?;
            (EndpointMap::Lookup, m.ids.as_ptr())
        }
        None => (EndpointMap::Identity, std::ptr::null()),
    };
    if n == 0 {
        return Ok(());
    }
    let args = PhHistoryArgs {
        keys: edges.keys.as_ptr(),
        counts: edges.counts.as_ptr(),
        sums: edges.sums.as_ptr(),
        indices: indices.indices.as_ptr(),
        n,
        endpoints,
        original: map,
        offset,
        out_keys: out_keys.as_mut_ptr(),
        out_scores: out_scores.as_mut_ptr(),
    };
    // SAFETY: `indices` holds `n` slot indices below the slot count
    // (checked); the history holds `offset + n` elements (checked); with a
    // map, the endpoints (below the node bound) index it (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `ph_relabel_insert`, a contraction's first step: the edges at nodes
/// tagged `tag` get their new keys (or, with [`Rekeying::SinceTag`], the
/// edges at nodes tagged since `tag` keep theirs) and meet their parallel
/// edges in the table, which then holds the contraction's entries.
#[allow(clippy::too_many_arguments)]
pub(super) fn relabel_insert(
    gpu: &Gpu,
    edges: &mut EdgeArrays,
    tag: u32,
    rekeying: Rekeying,
    parent: &DeviceBuffer<u32>,
    touched: &DeviceBuffer<u32>,
    table: &mut HashTable,
    counters: &mut DeviceBuffer<u64>,
    batch: usize,
) -> Result<()> {
    const K: &str = "ph_relabel_insert";
    let n = check_slots(K, edges)?;
    check_nodes(K, "parent", parent, edges)?;
    check_nodes(K, "touched", touched, edges)?;
    if rekeying == Rekeying::RoundMerges && parent.len() as u64 > edges.node_bound.max(1) {
        // New endpoints are parents, ids below the forest's length.
        return Err(invalid(K, format!("a forest of {} nodes for a bound of {}", parent.len(), edges.node_bound)));
    }
    check_empty_table(K, table, n)?;
    let counters = round_counts(K, counters, batch)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhRelabelInsertArgs {
        keys: edges.keys.as_mut_ptr(),
        n_slots: n,
        tag,
        rekeying,
        parent: parent.as_ptr(),
        touched: touched.as_ptr(),
        table_keys: table.keys.as_mut_ptr(),
        table_rep: table.rep.as_mut_ptr(),
        mask: table.mask,
        slot_of: table.slot_of.as_mut_ptr(),
        counters,
    };
    // The new endpoints are parents, node ids below the forest's length,
    // which is at most the node bound (checked), so the bound still holds.
    // SAFETY: the slots hold `n` edges or holes whose endpoints index
    // `parent` and `touched`; the table is empty with at least twice `n`
    // entries; `slot_of` and `counters` fit the slots and the batch (all
    // checked above); the launch is grid-stride over whole warps.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    table.pending = Some(n);
    Ok(())
}

/// `ph_match_contract`: the fused ε = 0 matching and contraction's first
/// step, after this round's best edges; the table then holds the
/// contraction's entries.
#[allow(clippy::too_many_arguments)]
pub(super) fn match_contract(
    gpu: &Gpu,
    edges: &mut EdgeArrays,
    params: RoundParams,
    best_key: &DeviceBuffer<u64>,
    forest: Forest<'_>,
    park_flags: &mut DeviceBuffer<u32>,
    table: &mut HashTable,
    counters: &mut DeviceBuffer<u64>,
    batch: usize,
) -> Result<()> {
    const K: &str = "ph_match_contract";
    let n = check_round(K, &params, edges)?;
    check_nodes(K, "best_key", best_key, edges)?;
    check_nodes(K, "parent", forest.parent, edges)?;
    check_nodes(K, "touched", forest.touched, edges)?;
    check_len(K, "park_flags", park_flags, n)?;
    check_empty_table(K, table, n)?;
    let counters = round_counts(K, counters, batch)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhMatchContractArgs {
        keys: edges.keys.as_mut_ptr(),
        params,
        best_key: best_key.as_ptr(),
        parent: forest.parent.as_mut_ptr(),
        touched: forest.touched.as_mut_ptr(),
        park_flags: park_flags.as_mut_ptr(),
        table_keys: table.keys.as_mut_ptr(),
        table_rep: table.rep.as_mut_ptr(),
        mask: table.mask,
        slot_of: table.slot_of.as_mut_ptr(),
        counters,
    };
    // Best keys are `EdgeKey::EMPTY` or keys of edges between round nodes
    // (the node state's invariant), so their endpoints index `best_key`
    // too, and the new endpoints, taken from them, keep the bound.
    // SAFETY: the slots' endpoints index the per-node arrays; the table is
    // empty with at least twice `n` entries; `park_flags`, `slot_of` and
    // `counters` fit the slots and the batch (all checked above); the
    // launch is grid-stride over whole warps.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    table.pending = Some(n);
    Ok(())
}

/// `ph_resolve`, a contraction's second step (after [`relabel_insert`] or
/// [`match_contract`] over the same slots): parallel edges combine; the
/// best scores and keys of nodes `0..n_reset` are reset.
#[allow(clippy::too_many_arguments)]
pub(super) fn resolve(
    gpu: &Gpu,
    edges: &mut EdgeArrays,
    table: &HashTable,
    n_reset: u64,
    best_score: &mut DeviceBuffer<u64>,
    best_key: &mut DeviceBuffer<u64>,
    counters: &mut DeviceBuffer<u64>,
    batch: usize,
) -> Result<()> {
    const K: &str = "ph_resolve";
    let n = check_slots(K, edges)?;
    check_pending_table(K, table, n)?;
    check_len(K, "best_score", best_score, n_reset)?;
    check_len(K, "best_key", best_key, n_reset)?;
    let counters = round_counts(K, counters, batch)?;
    let args = PhResolveArgs {
        keys: edges.keys.as_mut_ptr(),
        counts: edges.counts.as_mut_ptr(),
        sums: edges.sums.as_mut_ptr(),
        n_slots: n,
        table_rep: table.rep.as_ptr(),
        slot_of: table.slot_of.as_ptr(),
        n_reset,
        best_score: best_score.as_mut_ptr(),
        best_key: best_key.as_mut_ptr(),
        counters,
    };
    // The table holds the entries of the first step over these `n` slots
    // (checked: `pending`), so `slot_of` names table entries and their
    // representatives are slot indices below `n`.
    // SAFETY: as just said; the slots, the best arrays (`n_reset` entries)
    // and `counters` are long enough (checked above); the launch is
    // grid-stride over whole warps.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `ph_clear_table`: empties the entries of the pending contraction, if
/// any.
pub(super) fn clear_table(gpu: &Gpu, table: &mut HashTable) -> Result<()> {
    const K: &str = "ph_clear_table";
    let Some(n) = table.pending else {
        return Ok(());
    };
    check_len(K, "slot_of", &table.slot_of, n)?;
    if n > 0 {
        let args = PhClearTableArgs {
            slot_of: table.slot_of.as_ptr(),
            n_slots: n,
            table_keys: table.keys.as_mut_ptr(),
            table_rep: table.rep.as_mut_ptr(),
        };
        // SAFETY: `slot_of` names the entries (below the table's length)
        // that the pending contraction over `n` slots used (checked).
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    table.pending = None;
    Ok(())
}

/// `ph_classify`: flags the slots that stay (`active`) and those parked.
pub(super) fn classify(
    gpu: &Gpu,
    edges: &EdgeArrays,
    source: ParkSource,
    park_flags: &DeviceBuffer<u32>,
    best_score: &DeviceBuffer<u64>,
    active: &mut DeviceBuffer<u32>,
    parked: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "ph_classify";
    let n = check_slots(K, edges)?;
    match source {
        ParkSource::ParkFlags => check_len(K, "park_flags", park_flags, n)?,
        ParkSource::BestScores => check_nodes(K, "best_score", best_score, edges)?,
    }
    check_len(K, "active", active, n)?;
    check_len(K, "parked", parked, n)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhClassifyArgs {
        keys: edges.keys.as_ptr(),
        n_slots: n,
        source,
        park_flags: park_flags.as_ptr(),
        best_score: best_score.as_ptr(),
        active: active.as_mut_ptr(),
        parked: parked.as_mut_ptr(),
    };
    // SAFETY: the keys hold `n` slots (checked); the source that is read
    // holds a flag per slot, or is indexed by endpoints below the node
    // bound (checked); the outputs hold one u32 per slot (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `ph_gather_edges`: appends the edges of the first `n` slots `indices`
/// of `src` to `dst`, their endpoints through `map` when given. A map
/// that makes a self-loop (which cannot happen) is an error.
pub(super) fn gather(
    gpu: &Gpu,
    src: &EdgeArrays,
    indices: &SlotIndices,
    n: u64,
    map: Option<NodeMap<'_>>,
    dst: &mut EdgeArrays,
) -> Result<()> {
    const K: &str = "ph_gather_edges";
    if n == 0 {
        return Ok(());
    }
    let n_slots = check_slots(K, src)?;
    if n > indices.len() || indices.bound_of_first(n) > n_slots {
        return Err(invalid(K, format!("{n} of {} slot indices into {n_slots} slots", indices.len())));
    }
    check_len(K, "indices", &indices.indices, n)?;
    let offset = dst.len;
    if dst.capacity() < offset + n {
        return Err(invalid(K, format!("{n} edges after {offset} overrun a capacity of {}", dst.capacity())));
    }
    let (endpoints, map_ptr, bound) = match map {
        Some(m) => {
            check_nodes(K, "the node map", m.ids, src)?;
            (EndpointMap::Lookup, m.ids.as_ptr(), m.bound)
        }
        None => (EndpointMap::Identity, std::ptr::null(), src.node_bound),
    };
    if bound > dst.node_bound {
        return Err(invalid(K, format!("endpoints below {bound} into edges bound by {}", dst.node_bound)));
    }
    let mut n_bad = gpu.zeros::<u32>(1)?;
    let args = PhGatherEdgesArgs {
        keys: src.keys.as_ptr(),
        counts: src.counts.as_ptr(),
        sums: src.sums.as_ptr(),
        indices: indices.indices.as_ptr(),
        n,
        endpoints,
        map: map_ptr,
        offset,
        out_keys: dst.keys.as_mut_ptr(),
        out_counts: dst.counts.as_mut_ptr(),
        out_sums: dst.sums.as_mut_ptr(),
        n_bad: n_bad.as_mut_ptr(),
    };
    // `dst` is another allocation than `src` (borrowed mutably, `src`
    // shared), and the copies' endpoints stay below its node bound (the
    // map's or the source's bound, checked).
    // SAFETY: `indices` holds `n` slots of `src`; the map, if any, covers
    // the source's endpoints; `dst` holds `offset + n` elements (all
    // checked above); `n_bad` is one u32.
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    // The copies count only once they are known good: after an error the
    // destination keeps its previous length.
    if map.is_some() {
        check_no_bad(gpu, &n_bad, K, "edges became self-loops through the node map")?;
    }
    dst.len = offset + n;
    Ok(())
}

/// `ph_live_flags`: flags the slots that hold edges.
pub(super) fn live_flags(gpu: &Gpu, edges: &EdgeArrays, flags: &mut DeviceBuffer<u32>) -> Result<()> {
    const K: &str = "ph_live_flags";
    let n = check_slots(K, edges)?;
    check_len(K, "flags", flags, n)?;
    if n == 0 {
        return Ok(());
    }
    let args = PhLiveFlagsArgs { keys: edges.keys.as_ptr(), n_slots: n, flags: flags.as_mut_ptr() };
    // SAFETY: the keys and the flags hold `n` slots (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// Renumbers the nodes with edges among the first `n_current` ids
/// (`ph_mark_endpoints`, a compaction, `ph_scatter_ids`,
/// `ph_translate_keys`: one wrapper, so that every endpoint the last
/// kernel translates was marked by the first and so has a new id): their
/// ids become `0..m` in increasing order and the slots' node bound `m`.
/// Returns the old id of every new id, and `m`.
pub(super) fn renumber_keys(gpu: &Gpu, edges: &mut EdgeArrays, n_current: u64) -> Result<(DeviceBuffer<u32>, u64)> {
    const K: &str = "ph_mark_endpoints";
    let n = check_slots(K, edges)?;
    if edges.node_bound > n_current {
        return Err(invalid(K, format!("endpoints below {} renumbered among {n_current} ids", edges.node_bound)));
    }
    let mut flags = gpu.zeros::<u32>(n_current.max(1) as usize)?;
    if n > 0 {
        let args = PhMarkEndpointsArgs { keys: edges.keys.as_ptr(), n_slots: n, flags: flags.as_mut_ptr() };
        // SAFETY: the keys hold `n` slots (checked) whose endpoints are
        // below the node bound, at most `n_current`, the flags' length.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    let (old_of_new, m) = compact_indices(gpu, &flags, n_current)?;
    drop(flags);
    let mut new_of_old = gpu.uninit::<u32>(n_current.max(1) as usize)?;
    if m > 0 {
        check_len("ph_scatter_ids", "old_of_new", &old_of_new, m)?;
        let args = PhScatterIdsArgs { old_of_new: old_of_new.as_ptr(), m, new_of_old: new_of_old.as_mut_ptr() };
        // SAFETY: `old_of_new` holds `m` distinct ids below `n_current`
        // (the compaction's indices), the length of `new_of_old`.
        unsafe { gpu.launch(gpu.grid_stride_config(m), args) }?;
    }
    if n > 0 {
        let args = PhTranslateKeysArgs { keys: edges.keys.as_mut_ptr(), n_slots: n, new_of_old: new_of_old.as_ptr() };
        // SAFETY: every endpoint was marked, so it is one of the `m` ids
        // whose new id was just set; they index `new_of_old`.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    edges.node_bound = m;
    Ok((old_of_new, m))
}

/// `ph_commit`: copies a renumbering's merges into the forest and tags of
/// all `n_nodes` nodes.
pub(super) fn commit(
    gpu: &Gpu,
    renumbered: &Renumbered,
    all_parent: &mut DeviceBuffer<u32>,
    all_touched: &mut DeviceBuffer<u32>,
    n_nodes: u64,
) -> Result<()> {
    const K: &str = "ph_commit";
    let n = renumbered.n;
    if n == 0 {
        return Ok(());
    }
    check_len(K, "parent", &renumbered.parent, n)?;
    check_len(K, "touched", &renumbered.touched, n)?;
    check_len(K, "original", &renumbered.original, n)?;
    check_len(K, "all_parent", all_parent, n_nodes)?;
    check_len(K, "all_touched", all_touched, n_nodes)?;
    let args = PhCommitArgs {
        parent: renumbered.parent.as_ptr(),
        touched: renumbered.touched.as_ptr(),
        original: renumbered.original.as_ptr(),
        n,
        all_parent: all_parent.as_mut_ptr(),
        all_touched: all_touched.as_mut_ptr(),
    };
    // SAFETY: the renumbered arrays hold `n` entries (checked), parents
    // being renumbered ids below `n`; the original ids are distinct node
    // ids below `n_nodes`, the length of the full arrays (checked).
    unsafe { gpu.launch(gpu.grid_stride_config(n), args) }
}

/// `ph_find_roots`: the root of every one of the first `n` nodes of the
/// forest `parent` (whose parents are node ids below `n`).
pub(super) fn find_roots(gpu: &Gpu, parent: &DeviceBuffer<u32>, n: u64) -> Result<DeviceBuffer<u32>> {
    const K: &str = "ph_find_roots";
    check_len(K, "parent", parent, n)?;
    let mut roots = gpu.uninit::<u32>(n.max(1) as usize)?;
    if n > 0 {
        let args = PhFindRootsArgs { parent: parent.as_ptr(), n_nodes: n, roots: roots.as_mut_ptr() };
        // SAFETY: `parent` holds `n` node ids below `n` forming a forest
        // (the node state's invariant), `roots` `n` u32s.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    Ok(roots)
}

/// `ph_segment`: the first `n` `labels`, each replaced by
/// `roots[label]`. A label outside `roots` is an error (checked on the
/// device; this synchronizes).
pub(super) fn segment(
    gpu: &Gpu,
    labels: &DeviceBuffer<u32>,
    n: u64,
    roots: &DeviceBuffer<u32>,
) -> Result<DeviceBuffer<u32>> {
    const K: &str = "ph_segment";
    check_len(K, "labels", labels, n)?;
    let mut out = gpu.uninit::<u32>(n.max(1) as usize)?;
    let n_roots = roots.len() as u64;
    let mut n_bad = gpu.zeros::<u32>(1)?;
    if n > 0 {
        let args = PhSegmentArgs {
            labels: labels.as_ptr(),
            n,
            roots: roots.as_ptr(),
            n_roots,
            out: out.as_mut_ptr(),
            n_bad: n_bad.as_mut_ptr(),
        };
        // SAFETY: `labels` holds `n` u32s (checked), `out` as many; the
        // kernel checks every label against `n_roots`, the length of
        // `roots`; `n_bad` is one zeroed u32.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    check_no_bad(gpu, &n_bad, K, &format!("voxels hold fragment ids outside the {n_roots} nodes of the graph"))?;
    Ok(out)
}

/// `ph_segment_u64`: the first `n` `labels`, each label `k` replaced by
/// `table[k]`. A label outside `table` is an error (checked on the device;
/// this synchronizes).
pub(super) fn segment_u64(
    gpu: &Gpu,
    labels: &DeviceBuffer<u32>,
    n: u64,
    table: &DeviceBuffer<u64>,
) -> Result<DeviceBuffer<u64>> {
    const K: &str = "ph_segment_u64";
    check_len(K, "labels", labels, n)?;
    let mut out = gpu.uninit::<u64>(n.max(1) as usize)?;
    let n_table = table.len() as u64;
    let mut n_bad = gpu.zeros::<u32>(1)?;
    if n > 0 {
        let args = PhSegmentU64Args {
            labels: labels.as_ptr(),
            n,
            table: table.as_ptr(),
            n_table,
            out: out.as_mut_ptr(),
            n_bad: n_bad.as_mut_ptr(),
        };
        // SAFETY: `labels` holds `n` u32s (checked), `out` `n` u64s; the
        // kernel checks every label against `n_table`, the length of
        // `table`; `n_bad` is one zeroed u32.
        unsafe { gpu.launch(gpu.grid_stride_config(n), args) }?;
    }
    check_no_bad(gpu, &n_bad, K, &format!("voxels hold fragment ids outside the {n_table} nodes of the graph"))?;
    Ok(out)
}

/// Fails when the kernel counted anything in `n_bad` (synchronizes).
fn check_no_bad(gpu: &Gpu, n_bad: &DeviceBuffer<u32>, kernel: &'static str, what: &str) -> Result<()> {
    let bad = gpu.download(n_bad)?[0];
    if bad > 0 {
        return Err(invalid(kernel, format!("{bad} {what}")));
    }
    Ok(())
}
