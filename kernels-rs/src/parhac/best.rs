//! Every node's best edge: the lowest score below the threshold, ties
//! broken by the smaller key.

use super::load_edge;
use crate::device::*;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{
    candidate_bits, PhBestKeyArgs, PhBestScoreArgs, PhResetEndpointsArgs, TableState, NO_SLOT,
};

kernel! {
    /// Sets `a[x] = a_value` and `b[x] = b_value` for both endpoints `x` of
    /// every edge: the identities of the per-node reductions that follow,
    /// written only where they will be read.
    ///
    /// # Safety
    /// `keys` holds `n_slots` key bits whose endpoints index `a` and `b`.
    ///
    /// # Parameters
    /// - `keys`, `n_slots`: the edge slots; `a`, `a_value`, `b`, `b_value`:
    ///   per-node arrays and their values.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_reset_endpoints(
        keys: *const u64,
        n_slots: u64,
        a: *mut u64,
        a_value: u64,
        b: *mut u64,
        b_value: u64,
    ) as PhResetEndpointsArgs {
        grid_stride(n_slots, |e| {
            // SAFETY: `e < n_slots`; endpoints are node ids.
            unsafe {
                let key = EdgeKey::from_bits(*keys.add(e as usize));
                if !key.is_empty() {
                    for x in key.endpoints() {
                        *a.add(x as usize) = a_value;
                        *b.add(x as usize) = b_value;
                    }
                }
            }
        });
    }
}

kernel! {
    /// Every node's lowest score among its incident edges below the threshold:
    /// `best_score[x] = min(bits of score)`. With [`TableState::Pending`], also
    /// empties the hash-table entries the previous contraction used
    /// (`slot_of`), which saves a launch of `ph_clear_table`.
    ///
    /// # Safety
    /// `keys`, `counts`, `sums` hold `params.n_edges` slots; endpoints index
    /// `best_score`, which `ph_reset_endpoints` or `ph_resolve` set to
    /// `NO_SCORE`; with [`TableState::Pending`], `slot_of` holds one table
    /// entry (or `NO_SLOT`) per edge slot, written by the previous contraction
    /// over the same slots, and the table holds those entries.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the edge slots; `params`: the round;
    ///   `best_score`: per-node minimum; `table`, `slot_of`, `table_keys`,
    ///   `table_rep`: the table to empty.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration, two atomics per edge below
    /// the threshold.
    pub unsafe extern "ptx-kernel" fn ph_best_score(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        best_score: *mut u64,
        table: gpu_waterz_abi::parhac::TableState,
        slot_of: *const u32,
        table_keys: *mut u64,
        table_rep: *mut u32,
    ) as PhBestScoreArgs {
        grid_stride(params.n_edges, |e| {
            // SAFETY: `e < n_edges`; endpoints are node ids; table entries are
            // below the table's length.
            unsafe {
                if table == TableState::Pending {
                    let slot = *slot_of.add(e as usize);
                    if slot != NO_SLOT {
                        *table_keys.add(slot as usize) = EdgeKey::EMPTY.bits();
                        *table_rep.add(slot as usize) = NO_SLOT;
                    }
                }
                if let Some((key, score)) = load_edge(keys, counts, sums, e) {
                    if let Some(bits) = candidate_bits(score, params.threshold) {
                        for x in key.endpoints() {
                            // Values only fall during the launch, so a stale
                            // read only costs an atomic: most edges of a node
                            // with many (a large region) skip theirs.
                            let best = best_score.add(x as usize);
                            if bits < core::ptr::read_volatile(best) {
                                atomic_min_u64(best, bits);
                            }
                        }
                    }
                }
            }
        });
    }
}

kernel! {
    /// Breaks ties of [`ph_best_score`]: among a node's edges with its best
    /// score, the smallest key. After this kernel `(best_score, best_key)`
    /// name every node's best edge.
    ///
    /// # Safety
    /// As [`ph_best_score`], which ran before; `best_key` was reset to
    /// `EdgeKey::EMPTY` at the endpoints.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the edge slots; `params`: the round;
    ///   `best_score`: read; `best_key`: per-node minimum.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_best_key(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        best_score: *const u64,
        best_key: *mut u64,
    ) as PhBestKeyArgs {
        grid_stride(params.n_edges, |e| {
            // SAFETY: `e < n_edges`; endpoints are node ids.
            unsafe {
                if let Some((key, score)) = load_edge(keys, counts, sums, e) {
                    if let Some(bits) = candidate_bits(score, params.threshold) {
                        for x in key.endpoints() {
                            if *best_score.add(x as usize) == bits {
                                atomic_min_u64(best_key.add(x as usize), key.bits());
                            }
                        }
                    }
                }
            }
        });
    }
}
