//! Compactions of the edge slots (the kernels of
//! `kernels-rs/src/parhac/compact.rs`): holes go, edges of nodes that can
//! no longer merge at this threshold are parked, and at the threshold's end
//! the parked edges come back, through the regions' roots.

use super::contract::{clear_table, deduplicate_since};
use super::launch;
use super::node_state::{NodeMap, NodeState};
use super::renumber::renumber;
use super::segment::find_roots;
use super::slots::{EdgeArrays, EdgeSlots, ParkedEdges};
use gpu_waterz_abi::parhac::ParkSource;
use gpu_waterz_runtime::{Gpu, Result, RuntimeError};

/// Compacts the slots: edges whose endpoints can both still merge at this
/// threshold (per the last round) stay, in order; edges with an endpoint
/// that cannot are appended to `parked` (in original ids); holes go.
/// Resets the counts. Synchronizes.
pub(super) fn compact(gpu: &Gpu, slots: &mut EdgeSlots, state: &mut NodeState, parked: &mut ParkedEdges) -> Result<()> {
    clear_table(gpu, slots)?;
    let n = slots.n_slots();
    let mut active = gpu.uninit::<u32>(n.max(1) as usize)?;
    let mut parked_flags = gpu.uninit::<u32>(n.max(1) as usize)?;
    // At ε = 0 the last round's best scores were reset by its
    // contraction; its matching recorded the parkable slots.
    let source = if state.heavy.is_none() { ParkSource::ParkFlags } else { ParkSource::BestScores };
    launch::classify(gpu, &slots.edges, source, &slots.park_flags, &state.best_score, &mut active, &mut parked_flags)?;
    let active_idx = launch::flagged_slots(gpu, &active, n)?;
    let parked_idx = launch::flagged_slots(gpu, &parked_flags, n)?;
    let (n_active, n_parked) = (active_idx.len(), parked_idx.len());
    let mut kept = EdgeArrays::with_capacity(gpu, n_active, slots.edges.node_bound)?;
    launch::gather(gpu, &slots.edges, &active_idx, n_active, None, &mut kept)?;
    if n_parked > 0 {
        let old = parked.len();
        parked.reserve(gpu, old + n_parked, slots.capacity())?;
        // Parked edges keep original ids: the numbering changes below.
        launch::gather(gpu, &slots.edges, &parked_idx, n_parked, state.original_ids(), &mut parked.edges)?;
    }
    slots.edges = kept;
    slots.fit_table(n_active)?;
    renumber(gpu, slots, state)?;
    gpu.memset_zero(&mut slots.counters)?;
    Ok(())
}

/// The edges (non-empty slots) of `edges`, compacted in order; their
/// endpoints go through `map` when given.
fn live_edges(gpu: &Gpu, edges: &EdgeArrays, map: Option<NodeMap<'_>>) -> Result<EdgeArrays> {
    let n = edges.len;
    let mut live = gpu.uninit::<u32>(n.max(1) as usize)?;
    launch::live_flags(gpu, edges, &mut live)?;
    let live_idx = launch::flagged_slots(gpu, &live, n)?;
    let n_live = live_idx.len();
    let bound = map.map_or(edges.node_bound, |m| m.bound);
    let mut out = EdgeArrays::with_capacity(gpu, n_live, bound)?;
    launch::gather(gpu, edges, &live_idx, n_live, map, &mut out)?;
    Ok(out)
}

/// Ends a threshold whose first round had tag `first_tag`: the merges are
/// committed to the forest of all nodes, the slots' edges and the parked
/// ones (their endpoints through the regions' roots) become one graph
/// without holes or parallel edges, in no particular order: the slots' new
/// content, renumbered at ε = 0. Resets the counts. Synchronizes.
pub(super) fn finish_threshold(
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
        let (n_live, total) = (live.len, live.len + n_parked);
        slots.fit_table(total)?;
        if slots.capacity() < total {
            return Err(RuntimeError::InvalidLaunch {
                kernel: "ph_relabel_insert",
                reason: format!("{total} edges exceed the capacity the slots were made for"),
            });
        }
        let mut merged = EdgeArrays::with_capacity(gpu, total, state.n_nodes)?;
        let all = launch::all_slots(gpu, n_live.max(n_parked))?;
        launch::gather(gpu, &live, &all, n_live, None, &mut merged)?;
        let roots = NodeMap { ids: &roots, bound: state.n_nodes };
        launch::gather(gpu, &parked.edges, &all, n_parked, Some(roots), &mut merged)?;
        parked.edges.len = 0;
        // Parallel edges between the two parts merge in the hash table.
        slots.edges = merged;
        deduplicate_since(gpu, slots, first_tag, state)?;
        slots.edges = live_edges(gpu, &slots.edges, None)?;
    } else {
        slots.edges = live;
    }
    slots.fit_table(slots.n_slots())?;
    renumber(gpu, slots, state)?;
    gpu.memset_zero(&mut slots.counters)?;
    Ok(())
}
