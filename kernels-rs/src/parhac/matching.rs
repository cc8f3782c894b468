//! The round's matching and merges: at ε = 0 the mutual best edges; at
//! ε > 0 the (1+ε)-heavy edges that both endpoints prefer by priority.

use super::{load_edge, merge_pair, parkable};
use crate::device::*;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{
    contact_mean, edge_priority, PhBestMeanArgs, PhEligibleArgs, PhMatchMutualArgs, PhMatchPreferredArgs,
    PhPreferredKeyArgs,
};

kernel! {
    /// ε = 0: merges every mutual best edge below the threshold (the best edge
    /// of both endpoints; such edges share no node, so they are a matching).
    /// Flags matched slots in `matched` and parkable ones in `park_flags`
    /// (every slot is written), and counts merges and parkable edges in
    /// `counters`.
    ///
    /// # Safety
    /// As `ph_best_key`, which ran before. `parent` and `touched` hold one
    /// u32 per node, `matched` and `park_flags` one u32 per slot, `counters`
    /// one `RoundCounts`.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the edge slots; `params`: the round;
    ///   `best_score`, `best_key`: the best edges; `parent`: the merge forest;
    ///   `touched`: round tags; `matched`, `park_flags`: flags; `counters`:
    ///   merges and parkable edges.
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop, one slot per lane; counts are added once
    /// per warp.
    pub unsafe extern "ptx-kernel" fn ph_match_mutual(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        best_score: *const u64,
        best_key: *const u64,
        parent: *mut u32,
        touched: *mut u32,
        matched: *mut u32,
        park_flags: *mut u32,
        counters: *mut gpu_waterz_abi::parhac::RoundCounts,
    ) as PhMatchMutualArgs {
        warp_uniform_stride(params.n_edges, |e, valid| {
            // SAFETY: valid lanes hold slots below `n_edges`; endpoints are node ids.
            unsafe {
                let edge = if valid { load_edge(keys, counts, sums, e) } else { None };
                let (mut is_match, mut park) = (false, false);
                if let Some((key, score)) = edge {
                    let bits = score.to_bits();
                    let best_of = |x: u64| *best_score.add(x as usize) == bits && *best_key.add(x as usize) == key.bits();
                    is_match = score < params.threshold && best_of(key.u()) && best_of(key.v());
                    park = parkable(key, best_score);
                    if is_match {
                        merge_pair(key, params.tag, parent, touched);
                    }
                }
                if valid {
                    *matched.add(e as usize) = is_match as u32;
                    *park_flags.add(e as usize) = park as u32;
                }
                warp_count(&raw mut (*counters).n_merged, is_match);
                warp_count(&raw mut (*counters).n_parkable, park);
            }
        });
    }
}

kernel! {
    /// ε > 0, step 1: the mean of every node's best edge, written by that edge
    /// (one writer per node).
    ///
    /// # Safety
    /// As `ph_best_key`, which ran before; `best_mean` holds one f64 per node.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the edge slots; `params`: the round;
    ///   `best_score`, `best_key`: the best edges; `best_mean`: output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_best_mean(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        best_score: *const u64,
        best_key: *const u64,
        best_mean: *mut f64,
    ) as PhBestMeanArgs {
        grid_stride(params.n_edges, |e| {
            // SAFETY: `e < n_edges`; endpoints are node ids.
            unsafe {
                if let Some((key, score)) = load_edge(keys, counts, sums, e) {
                    if score < params.threshold {
                        let mean = contact_mean(*counts.add(e as usize), *sums.add(e as usize));
                        for x in key.endpoints() {
                            if *best_score.add(x as usize) == score.to_bits() && *best_key.add(x as usize) == key.bits() {
                                *best_mean.add(x as usize) = mean;
                            }
                        }
                    }
                }
            }
        });
    }
}

kernel! {
    /// ε > 0, step 2: flags the (1+ε)-heavy edges below the threshold (mean
    /// times `params.factor` at least the best mean of both endpoints), takes
    /// per node the highest matching priority among them, and counts parkable
    /// edges in `counters`.
    ///
    /// # Safety
    /// As [`ph_best_mean`], which ran before; `eligible` holds one u32 per
    /// slot; `best_priority` was reset to 0 at the endpoints; `counters` is
    /// one `RoundCounts`.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the edge slots; `params`: the round;
    ///   `best_score`; `best_mean`; `eligible`: output flags; `best_priority`:
    ///   per-node maximum; `counters`.
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop, one slot per lane.
    pub unsafe extern "ptx-kernel" fn ph_eligible(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        best_score: *const u64,
        best_mean: *const f64,
        eligible: *mut u32,
        best_priority: *mut u64,
        counters: *mut gpu_waterz_abi::parhac::RoundCounts,
    ) as PhEligibleArgs {
        warp_uniform_stride(params.n_edges, |e, valid| {
            // SAFETY: valid lanes hold slots below `n_edges`; endpoints are node ids.
            unsafe {
                let edge = if valid { load_edge(keys, counts, sums, e) } else { None };
                let (mut ok, mut park) = (false, false);
                if let Some((key, score)) = edge {
                    park = parkable(key, best_score);
                    if score < params.threshold && !park {
                        let mean = contact_mean(*counts.add(e as usize), *sums.add(e as usize));
                        let heavy = |x: u64| mean * params.factor >= *best_mean.add(x as usize);
                        ok = heavy(key.u()) && heavy(key.v());
                    }
                    if ok {
                        let priority = edge_priority(key, params.round);
                        atomic_max_u64(best_priority.add(key.u() as usize), priority);
                        atomic_max_u64(best_priority.add(key.v() as usize), priority);
                    }
                }
                if valid {
                    *eligible.add(e as usize) = ok as u32;
                }
                warp_count(&raw mut (*counters).n_parkable, park);
            }
        });
    }
}

kernel! {
    /// ε > 0, step 3: breaks priority ties by the smaller key.
    ///
    /// # Safety
    /// As [`ph_eligible`], which ran before; `preferred_key` was reset to
    /// `EdgeKey::EMPTY` at the endpoints.
    ///
    /// # Parameters
    /// - `keys`: the edge slots; `params`: the round; `eligible`;
    ///   `best_priority`; `preferred_key`: output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_preferred_key(
        keys: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        eligible: *const u32,
        best_priority: *const u64,
        preferred_key: *mut u64,
    ) as PhPreferredKeyArgs {
        grid_stride(params.n_edges, |e| {
            // SAFETY: `e < n_edges`; eligible slots hold edges.
            unsafe {
                if *eligible.add(e as usize) == 0 {
                    return;
                }
                let key = EdgeKey::from_bits(*keys.add(e as usize));
                let priority = edge_priority(key, params.round);
                for x in key.endpoints() {
                    if *best_priority.add(x as usize) == priority {
                        atomic_min_u64(preferred_key.add(x as usize), key.bits());
                    }
                }
            }
        });
    }
}

kernel! {
    /// ε > 0, step 4: merges the eligible edges that both endpoints prefer
    /// (they share no node); flags them in `matched` (every slot is written)
    /// and counts them in `counters`.
    ///
    /// # Safety
    /// As [`ph_preferred_key`], which ran before; `parent`, `touched`,
    /// `matched` and `counters` as in [`ph_match_mutual`].
    ///
    /// # Parameters
    /// - `keys`: the edge slots; `params`: the round; `eligible`;
    ///   `best_priority`; `preferred_key`; `parent`, `touched`, `matched`,
    ///   `counters`: the merge outputs as in [`ph_match_mutual`].
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop, one slot per lane.
    pub unsafe extern "ptx-kernel" fn ph_match_preferred(
        keys: *const u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        eligible: *const u32,
        best_priority: *const u64,
        preferred_key: *const u64,
        parent: *mut u32,
        touched: *mut u32,
        matched: *mut u32,
        counters: *mut gpu_waterz_abi::parhac::RoundCounts,
    ) as PhMatchPreferredArgs {
        warp_uniform_stride(params.n_edges, |e, valid| {
            // SAFETY: valid lanes hold slots below `n_edges`; eligible slots
            // hold edges.
            unsafe {
                let mut is_match = false;
                if valid && *eligible.add(e as usize) != 0 {
                    let key = EdgeKey::from_bits(*keys.add(e as usize));
                    let priority = edge_priority(key, params.round);
                    let prefers =
                        |x: u64| *best_priority.add(x as usize) == priority && *preferred_key.add(x as usize) == key.bits();
                    is_match = prefers(key.u()) && prefers(key.v());
                    if is_match {
                        merge_pair(key, params.tag, parent, touched);
                    }
                }
                if valid {
                    *matched.add(e as usize) = is_match as u32;
                }
                warp_count(&raw mut (*counters).n_merged, is_match);
            }
        });
    }
}
