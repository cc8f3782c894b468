//! Every node's best edge at the start of a round (the kernels of
//! `kernels-rs/src/parhac/best.rs`).

use super::launch;
use super::node_state::NodeState;
use super::slots::EdgeSlots;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{RoundParams, NO_SCORE};
use gpu_waterz_runtime::{Gpu, Result};

/// Queues a round's best edges: best scores, then best keys; the first
/// also empties the hash-table entries the last fused round left. At
/// ε > 0 the endpoints' best edges are reset first (at ε = 0 the previous
/// contraction's `ph_resolve`, or a fresh allocation, did).
pub(super) fn best_edges(gpu: &Gpu, slots: &mut EdgeSlots, params: RoundParams, state: &mut NodeState) -> Result<()> {
    if state.heavy.is_some() {
        let (best_score, best_key) = (&mut state.best_score, &mut state.best_key);
        launch::reset_endpoints(gpu, &slots.edges, best_score, NO_SCORE, best_key, EdgeKey::EMPTY.bits())?;
    }
    launch::best_score(gpu, &slots.edges, params, &mut state.best_score, &mut slots.table)?;
    launch::best_key(gpu, &slots.edges, params, &state.best_score, &mut state.best_key)
}
