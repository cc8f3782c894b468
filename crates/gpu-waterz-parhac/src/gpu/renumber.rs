//! Dense node ids at ε = 0 (the kernels of
//! `kernels-rs/src/parhac/renumber.rs`): the nodes that still have edges
//! are renumbered `0..m` in increasing order, so that the per-node arrays
//! shrink with the graph.

use super::launch;
use super::node_state::{unset_bests, NodeState, Renumbered};
use super::slots::EdgeSlots;
use gpu_waterz_runtime::primitives::iota_u32;
use gpu_waterz_runtime::{Gpu, Result};

/// Renumbers the nodes with edges in the slots (at ε = 0 only; see
/// [`NodeState`]): their ids become `0..m` in increasing order, the slots'
/// keys are translated in place, and the per-node arrays shrink to `m`.
/// Merges made on the previous numbering are committed first.
pub(super) fn renumber(gpu: &Gpu, slots: &mut EdgeSlots, state: &mut NodeState) -> Result<()> {
    if state.heavy.is_some() {
        // (1+ε)-heavy matchings hash node ids into priorities: they keep
        // the original ids.
        return Ok(());
    }
    let (old_of_new, m) = launch::renumber_keys(gpu, &mut slots.edges, state.n_round_nodes())?;
    // The new ids' original ids: through the previous renumbering's.
    let original = match &state.renumbered {
        Some(r) => launch::segment(gpu, &old_of_new, m, &r.original)?,
        None => old_of_new,
    };
    state.commit(gpu)?;
    let len = m.max(1) as usize;
    state.renumbered =
        Some(Renumbered { parent: iota_u32(gpu, len as u64)?, touched: gpu.zeros(len)?, original, n: m });
    state.best_score = unset_bests(gpu, len)?;
    state.best_key = unset_bests(gpu, len)?;
    Ok(())
}
