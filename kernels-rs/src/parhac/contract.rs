//! The contraction in place: edges with a merged endpoint get their new
//! key and meet their parallel edges in a hash table (step 1), parallel
//! edges combine into the one with the smallest slot (step 2), and the
//! table is emptied (step 3); and the fused ε = 0 round, whose one launch
//! matches and runs step 1.

use super::merge_pair;
use crate::device::*;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{
    fused_slot, hash_slot, Contraction, PhClearTableArgs, PhMatchContractArgs, PhRelabelInsertArgs, PhResolveArgs,
    Rekeying, NO_SCORE, NO_SLOT,
};

/// Inserts `key` into the hash table; returns its entry. The table never
/// fills: it has at least twice as many entries as there are edges.
///
/// # Safety
/// `table_keys` holds `mask + 1` u64s.
#[inline(always)]
unsafe fn insert_key(table_keys: *mut u64, mask: u64, key: EdgeKey) -> u64 {
    let mut slot = hash_slot(key, mask);
    loop {
        // SAFETY: `slot <= mask`.
        let previous = unsafe { atomic_cas_u64(table_keys.add(slot as usize), EdgeKey::EMPTY.bits(), key.bits()) };
        if previous == EdgeKey::EMPTY.bits() || previous == key.bits() {
            return slot;
        }
        slot = (slot + 1) & mask;
    }
}

/// Inserts `key`, the key of slot `e`, into the hash table with `e`
/// offered as its representative; returns its table entry.
///
/// # Safety
/// The table holds `mask + 1` entries.
#[inline(always)]
unsafe fn insert_edge(e: u64, key: EdgeKey, table_keys: *mut u64, table_rep: *mut u32, mask: u64) -> u32 {
    // SAFETY: as the caller guarantees; the entry is below `mask + 1`.
    unsafe {
        let slot = insert_key(table_keys, mask, key);
        atomic_min_u32(table_rep.add(slot as usize), e as u32);
        slot as u32
    }
}

/// Applies a contraction to slot `e`: a hole (returns `(NO_SLOT, true)`),
/// or the new key, inserted into the hash table (returns its entry and
/// `false`), or nothing (`(NO_SLOT, false)`).
///
/// # Safety
/// `e` is a slot of `keys`; the table holds `mask + 1` entries.
#[inline(always)]
unsafe fn contract_slot(
    keys: *mut u64,
    e: u64,
    contraction: Contraction,
    table_keys: *mut u64,
    table_rep: *mut u32,
    mask: u64,
) -> (u32, bool) {
    // SAFETY: as the caller guarantees.
    unsafe {
        match contraction {
            Contraction::Unchanged => (NO_SLOT, false),
            Contraction::Rekeyed(new_key) => {
                *keys.add(e as usize) = new_key.bits();
                (insert_edge(e, new_key, table_keys, table_rep, mask), false)
            }
            Contraction::Hole => {
                *keys.add(e as usize) = EdgeKey::EMPTY.bits();
                (NO_SLOT, true)
            }
        }
    }
}

kernel! {
    /// Contraction, step 1: every edge with an endpoint merged this round
    /// (tag `tag`) gets its endpoints' new ids; an edge inside a merged pair
    /// becomes a hole (counted in `counters`), the others meet their parallel
    /// edges in the hash table: `table_rep[entry]` becomes the smallest slot
    /// index with that key, and `slot_of[e]` the edge's table entry (`NO_SLOT`
    /// for edges that did not change).
    ///
    /// With [`Rekeying::SinceTag`], every edge at a node that merged since the
    /// round tagged `tag` (the threshold's first) is inserted with its current
    /// key (the deduplication at the end of a threshold).
    ///
    /// # Safety
    /// The key bits hold `n_slots` slots whose endpoints index `parent` and
    /// `touched`; with [`Rekeying::RoundMerges`] the nodes are roots of the
    /// forest and the round's merge targets did not merge away in it;
    /// `table_keys` and `table_rep` hold `mask + 1` entries, empty
    /// (`EdgeKey::EMPTY`, `NO_SLOT`), at least twice the edges; `slot_of`
    /// holds one u32 per slot; `counters` is one `RoundCounts`.
    ///
    /// # Parameters
    /// - `keys` (updated), `n_slots`: the edge slots; `tag`, `rekeying`: which
    ///   edges change; `parent`; `touched`; `table_keys`, `table_rep`, `mask`:
    ///   the table; `slot_of`; `counters`.
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop, one slot per lane.
    pub unsafe extern "ptx-kernel" fn ph_relabel_insert(
        keys: *mut u64,
        n_slots: u64,
        tag: u32,
        rekeying: gpu_waterz_abi::parhac::Rekeying,
        parent: *const u32,
        touched: *const u32,
        table_keys: *mut u64,
        table_rep: *mut u32,
        mask: u64,
        slot_of: *mut u32,
        counters: *mut gpu_waterz_abi::parhac::RoundCounts,
    ) as PhRelabelInsertArgs {
        warp_uniform_stride(n_slots, |e, valid| {
            // SAFETY: valid lanes hold slots below `n_slots`; endpoints are node
            // ids; table entries are below `mask + 1`.
            unsafe {
                let mut removed = false;
                if valid {
                    let key = EdgeKey::from_bits(*keys.add(e as usize));
                    let mut slot = NO_SLOT;
                    if !key.is_empty() {
                        let (u, v) = (key.u(), key.v());
                        match rekeying {
                            Rekeying::SinceTag => {
                                // Two edges can share a key at the end of a
                                // threshold only if one of them changed, that
                                // is, only at nodes that merged during the
                                // threshold.
                                if *touched.add(u as usize) >= tag || *touched.add(v as usize) >= tag {
                                    slot = insert_edge(e, key, table_keys, table_rep, mask);
                                }
                            }
                            Rekeying::RoundMerges => {
                                if *touched.add(u as usize) == tag || *touched.add(v as usize) == tag {
                                    // Nodes are roots, and merge targets did not
                                    // merge away in the same round: one step of
                                    // `parent` is the new root.
                                    let (a, b) = (*parent.add(u as usize) as u64, *parent.add(v as usize) as u64);
                                    let contraction = Contraction::between(a, b);
                                    (slot, removed) = contract_slot(keys, e, contraction, table_keys, table_rep, mask);
                                }
                            }
                        }
                    }
                    *slot_of.add(e as usize) = slot;
                }
                warp_count(&raw mut (*counters).n_removed, removed);
            }
        });
    }
}

kernel! {
    /// ε = 0, one launch for `ph_match_mutual` and [`ph_relabel_insert`]:
    /// merges every mutual best edge below the threshold and starts the
    /// contraction. A node `x` merges this round exactly when its best edge
    /// (`best_key[x]`) is also its partner's, and its new id is then the
    /// smaller of the two, so every slot finds its endpoints' new ids from the
    /// best keys alone, without waiting for the merges to be written
    /// (`gpu_waterz_abi::parhac::fused_slot`, which the host model of this
    /// round calls too). Edges inside a merged pair become holes; the others
    /// with a merged endpoint (even one that keeps its id) get their new key
    /// and meet their parallel edges in the hash table, as in
    /// [`ph_relabel_insert`]. Records parkable slots in `park_flags` and
    /// counts merges, parkable edges and holes in `counters`. No merge history
    /// is kept.
    ///
    /// # Safety
    /// As `ph_match_mutual` and [`ph_relabel_insert`] together: the best keys
    /// of this round are complete (endpoints of edges index `best_key`, and so
    /// do the endpoints of best keys); the table is empty.
    ///
    /// # Parameters
    /// - `keys` (updated): the edge slots; `params`: the round; `best_key`;
    ///   `parent`, `touched`; `park_flags`; `table_keys`, `table_rep`, `mask`:
    ///   the table; `slot_of`; `counters`.
    ///
    /// # Thread mapping
    /// Warp-uniform grid-stride loop, one slot per lane; counts are added once
    /// per warp.
    pub unsafe extern "ptx-kernel" fn ph_match_contract(
        keys: *mut u64,
        params: gpu_waterz_abi::parhac::RoundParams,
        best_key: *const u64,
        parent: *mut u32,
        touched: *mut u32,
        park_flags: *mut u32,
        table_keys: *mut u64,
        table_rep: *mut u32,
        mask: u64,
        slot_of: *mut u32,
        counters: *mut gpu_waterz_abi::parhac::RoundCounts,
    ) as PhMatchContractArgs {
        warp_uniform_stride(params.n_edges, |e, valid| {
            // SAFETY: valid lanes hold slots below `n_edges`; endpoints and the
            // endpoints of best keys are node ids; table entries are below
            // `mask + 1`.
            unsafe {
                let (mut is_match, mut park, mut removed) = (false, false, false);
                if valid {
                    let key = EdgeKey::from_bits(*keys.add(e as usize));
                    let mut slot = NO_SLOT;
                    if !key.is_empty() {
                        let best_u = EdgeKey::from_bits(*best_key.add(key.u() as usize));
                        let best_v = EdgeKey::from_bits(*best_key.add(key.v() as usize));
                        let fate = fused_slot(key, best_u, best_v, |x| EdgeKey::from_bits(*best_key.add(x as usize)));
                        (is_match, park) = (fate.matched, fate.parkable);
                        if is_match {
                            merge_pair(key, params.tag, parent, touched);
                        }
                        (slot, removed) = contract_slot(keys, e, fate.contraction, table_keys, table_rep, mask);
                    }
                    *slot_of.add(e as usize) = slot;
                    *park_flags.add(e as usize) = park as u32;
                }
                warp_count(&raw mut (*counters).n_merged, is_match);
                warp_count(&raw mut (*counters).n_parkable, park);
                warp_count(&raw mut (*counters).n_removed, removed);
            }
        });
    }
}

kernel! {
    /// Contraction, step 2: every inserted edge that is not its key's
    /// representative adds its statistics to the representative's (integer
    /// atomics) and becomes a hole (counted in `counters`). At ε = 0 it also
    /// sets the best score and key of nodes `0..n_reset` to `NO_SCORE` and
    /// `EdgeKey::EMPTY`, ready for the next round's `ph_best_score`, which
    /// saves a launch of `ph_reset_endpoints`.
    ///
    /// # Safety
    /// As [`ph_relabel_insert`] or [`ph_match_contract`], which ran before
    /// over the same slots; `best_score` and `best_key` hold at least
    /// `n_reset` u64s.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums` (updated), `n_slots`: the edge slots;
    ///   `table_rep`; `slot_of`; `n_reset`, `best_score`, `best_key`: the
    ///   nodes to reset; `counters`.
    ///
    /// # Thread mapping
    /// A grid-stride loop over the nodes to reset, then a warp-uniform
    /// grid-stride loop, one slot per lane.
    pub unsafe extern "ptx-kernel" fn ph_resolve(
        keys: *mut u64,
        counts: *mut u64,
        sums: *mut u64,
        n_slots: u64,
        table_rep: *const u32,
        slot_of: *const u32,
        n_reset: u64,
        best_score: *mut u64,
        best_key: *mut u64,
        counters: *mut gpu_waterz_abi::parhac::RoundCounts,
    ) as PhResolveArgs {
        // The next round's best edges start from nothing: nodes `0..n_reset`
        // are reset along the way (their arrays are dense after a renumbering,
        // so this writes whole lines instead of two random entries per edge).
        grid_stride(n_reset, |x| {
            // SAFETY: `x < n_reset`, within the per-node arrays.
            unsafe {
                *best_score.add(x as usize) = NO_SCORE;
                *best_key.add(x as usize) = EdgeKey::EMPTY.bits();
            }
        });
        warp_uniform_stride(n_slots, |e, valid| {
            // SAFETY: valid lanes hold slots below `n_slots`; representatives
            // are slot indices; a representative's own statistics are only read
            // by itself, which does not run this branch.
            unsafe {
                let mut removed = false;
                if valid {
                    let slot = *slot_of.add(e as usize);
                    if slot != NO_SLOT {
                        let rep = *table_rep.add(slot as usize) as usize;
                        if rep != e as usize {
                            atomic_add_u64(counts.add(rep), *counts.add(e as usize));
                            atomic_add_u64(sums.add(rep), *sums.add(e as usize));
                            *keys.add(e as usize) = EdgeKey::EMPTY.bits();
                            removed = true;
                        }
                    }
                }
                warp_count(&raw mut (*counters).n_removed, removed);
            }
        });
    }
}

kernel! {
    /// Contraction, step 3: empties the table entries this contraction used.
    ///
    /// # Safety
    /// As [`ph_resolve`], which ran before: `slot_of` holds `n_slots` entries
    /// below the table's length (or `NO_SLOT`).
    ///
    /// # Parameters
    /// - `slot_of`, `n_slots`: the entries used; `table_keys`, `table_rep`:
    ///   the table.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_clear_table(
        slot_of: *const u32,
        n_slots: u64,
        table_keys: *mut u64,
        table_rep: *mut u32,
    ) as PhClearTableArgs {
        grid_stride(n_slots, |e| {
            // SAFETY: table entries are below the table's length.
            unsafe {
                let slot = *slot_of.add(e as usize);
                if slot != NO_SLOT {
                    *table_keys.add(slot as usize) = EdgeKey::EMPTY.bits();
                    *table_rep.add(slot as usize) = NO_SLOT;
                }
            }
        });
    }
}
