//! A round's matching and merges (the kernels of
//! `kernels-rs/src/parhac/matching.rs`): the mutual best edges at ε = 0,
//! the (1+ε)-heavy edges both endpoints prefer otherwise.

use super::best::best_edges;
use super::launch::{self, HeavyArrays};
use super::node_state::{NodeState, RoundNodes};
use super::slots::{EdgeSlots, MAX_BATCH};
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::RoundParams;
use gpu_waterz_runtime::{Gpu, Result, RuntimeError};

/// Checks a round's batch index and slot count; returns the slot count.
pub(super) fn check_round(slots: &EdgeSlots, params: RoundParams, batch_index: usize) -> Result<u64> {
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

/// Queues one round's matching (no synchronization): finds every node's
/// best edge below `params.threshold` (`params.n_edges` must be the slot
/// count), picks a matching among the (1+ε)-heavy edges (mutual best edges
/// when `state` has no ε scratch), records the merges in `state`, flags the
/// matched slots, and counts into the batch's entry `batch_index` (below
/// [`MAX_BATCH`]; see `read_counts`).
pub(super) fn match_round(
    gpu: &Gpu,
    slots: &mut EdgeSlots,
    params: RoundParams,
    state: &mut NodeState,
    batch_index: usize,
) -> Result<()> {
    let n = check_round(slots, params, batch_index)?;
    if n == 0 {
        return Ok(());
    }
    best_edges(gpu, slots, params, state)?;
    let RoundNodes { forest, best_score, best_key, heavy } = state.round_nodes();
    let EdgeSlots { edges, matched, park_flags, eligible, counters, .. } = slots;
    match (heavy, eligible) {
        (Some(h), Some(eligible)) => {
            let (priority, preferred) = (&mut h.best_priority, &mut h.preferred_key);
            launch::reset_endpoints(gpu, edges, priority, 0, preferred, EdgeKey::EMPTY.bits())?;
            launch::best_mean(gpu, edges, params, best_score, best_key, &mut h.best_mean)?;
            let arrays = HeavyArrays {
                best_score,
                best_mean: &h.best_mean,
                best_priority: &mut h.best_priority,
                preferred_key: &mut h.preferred_key,
            };
            launch::heavy_matching(gpu, edges, params, arrays, eligible, forest, matched, counters, batch_index)
        }
        (None, _) => launch::match_mutual(
            gpu,
            edges,
            params,
            best_score,
            best_key,
            forest,
            matched,
            park_flags,
            counters,
            batch_index,
        ),
        (Some(_), None) => Err(RuntimeError::InvalidLaunch {
            kernel: "ph_eligible",
            reason: "the edge slots were made without ε scratch".into(),
        }),
    }
}
