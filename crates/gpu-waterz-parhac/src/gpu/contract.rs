//! The contraction in place after a round (the kernels of
//! `kernels-rs/src/parhac/contract.rs`), and the fused ε = 0 round that
//! matches and starts the contraction in one launch.

use super::best::best_edges;
use super::launch;
use super::matching::check_round;
use super::node_state::{NodeState, RoundNodes};
use super::slots::EdgeSlots;
use gpu_waterz_abi::parhac::{Rekeying, RoundParams};
use gpu_waterz_runtime::{Gpu, Result, RuntimeError};

/// Queues one whole round at ε = 0 without merge history (no
/// synchronization): best edges, then the matching and the first step of
/// the contraction in one launch (`ph_match_contract`), then the second
/// step, which also resets the next round's best edges (`ph_resolve`).
/// The same merges and contraction as `match_round` then [`contract`], in
/// four launches instead of seven; the table is emptied by the next
/// round's first launch.
pub(super) fn match_and_contract(
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
    let n_reset = state.n_round_nodes();
    let RoundNodes { forest, best_score, best_key, .. } = state.round_nodes();
    let EdgeSlots { edges, park_flags, table, counters, .. } = slots;
    launch::match_contract(gpu, edges, params, best_key, forest, park_flags, table, counters, batch_index)?;
    launch::resolve(gpu, edges, table, n_reset, best_score, best_key, counters, batch_index)
}

/// Empties the hash-table entries the last [`match_and_contract`] used,
/// before the slots change or are deduplicated otherwise.
pub(super) fn clear_table(gpu: &Gpu, slots: &mut EdgeSlots) -> Result<()> {
    launch::clear_table(gpu, &mut slots.table)
}

/// Runs the hash-table deduplication over the slots: with
/// [`Rekeying::SinceTag`], every edge at a node tagged since `tag` with its
/// key; otherwise the edges touched by the round `tag` with their new keys.
/// Parallel edges end up as one edge with the sum of their statistics; the
/// others become holes (counted into the batch's entry `batch_index`).
fn deduplicate(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    tag: u32,
    rekeying: Rekeying,
    state: &mut NodeState,
    batch_index: usize,
) -> Result<()> {
    clear_table(gpu, slots)?;
    if slots.n_slots() == 0 {
        return Ok(());
    }
    // At ε = 0 a round's contraction resets the next round's best edges
    // (the per-node arrays cover the round's ids; not at a threshold's end,
    // which works on original ids).
    let n_reset = if rekeying == Rekeying::RoundMerges && state.heavy.is_none() { state.n_round_nodes() } else { 0 };
    let RoundNodes { forest, best_score, best_key, .. } = state.round_nodes();
    let (parent, touched) = (&*forest.parent, &*forest.touched);
    let EdgeSlots { edges, table, counters, .. } = slots;
    launch::relabel_insert(gpu, edges, tag, rekeying, parent, touched, table, counters, batch_index)?;
    launch::resolve(gpu, edges, table, n_reset, best_score, best_key, counters, batch_index)?;
    launch::clear_table(gpu, table)
}

/// Queues the in-place contraction after a round (no synchronization):
/// edges touched by the round `params.tag` get their new endpoints,
/// parallel edges merge (exact integer sums), edges inside merged pairs
/// become holes, counted into the batch's entry `batch_index`.
pub(super) fn contract(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    params: RoundParams,
    state: &mut NodeState,
    batch_index: usize,
) -> Result<()> {
    deduplicate(gpu, slots, params.tag, Rekeying::RoundMerges, state, batch_index)
}

/// Merges the parallel edges that a threshold's end brings together: every
/// edge at a node that merged since the round tagged `first_tag` (the
/// threshold's first) meets the edges with its key.
pub(super) fn deduplicate_since(gpu: &Gpu, slots: &mut EdgeSlots, first_tag: u32, state: &mut NodeState) -> Result<()> {
    deduplicate(gpu, slots, first_tag, Rekeying::SinceTag, state, 0)
}
