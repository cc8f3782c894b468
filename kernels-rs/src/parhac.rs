//! ParHAC rounds on the GPU: best incident edges, (1+ε)-heavy matchings,
//! merges and an in-place contraction of the region graph.
//!
//! The graph is an array of edge slots (key `u << 32 | v` with `u < v`,
//! contact count, fixed-point affinity sum); a slot whose key is
//! [`EMPTY_KEY`] is a hole left by a contraction. Every choice is made with
//! integer atomics of a total order (`min` of score bits, then `min` of
//! keys; `max` of priorities, then `min` of keys), and statistics are added
//! with integer atomics, so the merges and the contracted graph do not
//! depend on the order threads run in: reruns give the same merges as each
//! other and as the CPU ParHAC (`gpu_waterz_parhac::cpu`), which shares the
//! arithmetic in `gpu_waterz_abi::parhac`. Only the order of the slots may
//! vary, and nothing observable depends on it (the host sorts what it
//! reports).
//!
//! Contraction: the edges with an endpoint merged this round get their new
//! key and meet their parallel edges in a hash table (linear probing,
//! [`hash_slot`]); the edge with the smallest slot index of each new key
//! collects the others' statistics, the others become holes.

use crate::device::*;
use gpu_waterz_abi::parhac::{
    contact_mean, edge_key, edge_priority, edge_score, hash_slot, mutual_merge, partner, relabelled, RoundParams,
    EMPTY_KEY,
};

/// Edge slot `e`: `(u, v, key, score)`, or `None` for a hole.
///
/// # Safety
/// `e` is below the length of the three arrays.
#[inline(always)]
unsafe fn load_edge(keys: *const u64, counts: *const u64, sums: *const u64, e: u64) -> Option<(u64, u64, u64, f64)> {
    // SAFETY: the caller passes an in-bounds slot index.
    let key = unsafe { *keys.add(e as usize) };
    if key == EMPTY_KEY {
        return None;
    }
    // SAFETY: as above.
    let (count, sum) = unsafe { (*counts.add(e as usize), *sums.add(e as usize)) };
    Some((key >> 32, key & 0xFFFF_FFFF, key, edge_score(count, sum)))
}

/// Sets `a[x] = a_value` and `b[x] = b_value` for both endpoints `x` of
/// every edge: the identities of the per-node reductions that follow,
/// written only where they will be read.
///
/// # Safety
/// `keys` holds `n_slots` u64s whose endpoints index `a` and `b`.
///
/// # Parameters
/// - `keys`, `n_slots`: the edge slots; `a`, `b`: per-node arrays and values.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_reset_endpoints(
    keys: *const u64,
    n_slots: u64,
    a: *mut u64,
    a_value: u64,
    b: *mut u64,
    b_value: u64,
) {
    grid_stride(n_slots, |e| {
        // SAFETY: `e < n_slots`; endpoints are node ids.
        unsafe {
            let key = *keys.add(e as usize);
            if key != EMPTY_KEY {
                for x in [key >> 32, key & 0xFFFF_FFFF] {
                    *a.add(x as usize) = a_value;
                    *b.add(x as usize) = b_value;
                }
            }
        }
    });
}

/// Every node's lowest score among its incident edges below the threshold:
/// `best_score[x] = min(bits of score)`. With `clear`, also empties the
/// hash-table slots the previous contraction used (`slot_of`), which saves
/// a launch of [`ph_clear_table`].
///
/// # Safety
/// `keys`, `counts`, `sums` hold `params.n_edges` slots; endpoints index
/// `best_score`, which [`ph_reset_endpoints`] or [`ph_resolve`] set to
/// `u64::MAX`; with `clear`, `slot_of` holds one table slot (or
/// `u32::MAX`) per edge slot, written by the previous contraction over the
/// same slots, and the table `mask + 1` entries.
///
/// # Parameters
/// - the edge slots; `params`: the round; `best_score`: per-node minimum;
///   `clear`, `slot_of`, `table_keys`, `table_rep`: the table to empty.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration, two atomics per edge below
/// the threshold.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_best_score(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    params: RoundParams,
    best_score: *mut u64,
    clear: u32,
    slot_of: *const u32,
    table_keys: *mut u64,
    table_rep: *mut u32,
) {
    grid_stride(params.n_edges, |e| {
        // SAFETY: `e < n_edges`; endpoints are node ids; table slots are
        // below the table's length.
        unsafe {
            if clear != 0 {
                let slot = *slot_of.add(e as usize);
                if slot != u32::MAX {
                    *table_keys.add(slot as usize) = EMPTY_KEY;
                    *table_rep.add(slot as usize) = u32::MAX;
                }
            }
            if let Some((u, v, _, score)) = load_edge(keys, counts, sums, e) {
                if score < params.threshold {
                    let bits = score.to_bits();
                    for x in [u, v] {
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

/// Breaks ties of [`ph_best_score`]: among a node's edges with its best
/// score, the smallest key. After this kernel `(best_score, best_key)`
/// name every node's best edge.
///
/// # Safety
/// As [`ph_best_score`], which ran before; `best_key` was reset.
///
/// # Parameters
/// - the edge slots; `params`; `best_score`: read; `best_key`: per-node minimum.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_best_key(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    params: RoundParams,
    best_score: *const u64,
    best_key: *mut u64,
) {
    grid_stride(params.n_edges, |e| {
        // SAFETY: `e < n_edges`; endpoints are node ids.
        unsafe {
            if let Some((u, v, key, score)) = load_edge(keys, counts, sums, e) {
                if score < params.threshold {
                    for x in [u, v] {
                        if *best_score.add(x as usize) == score.to_bits() {
                            atomic_min_u64(best_key.add(x as usize), key);
                        }
                    }
                }
            }
        }
    });
}

/// Records the merge of `v` into `u`: `parent[v] = u`, both nodes tagged
/// with the round.
///
/// # Safety
/// `u`, `v` index `parent` and `touched`.
#[inline(always)]
unsafe fn merge_pair(u: u64, v: u64, tag: u32, parent: *mut u32, touched: *mut u32) {
    // SAFETY: as the caller guarantees; the matching gives every node at
    // most one matched edge, so these writes do not race.
    unsafe {
        *parent.add(v as usize) = u as u32;
        *touched.add(u as usize) = tag;
        *touched.add(v as usize) = tag;
    }
}

/// Whether an endpoint of the edge has no edge below the threshold: such a
/// node can never merge at this threshold (its edges only combine into
/// means between theirs), so the edge can be parked until the next one.
///
/// # Safety
/// `u`, `v` index `best_score`.
#[inline(always)]
unsafe fn parkable(u: u64, v: u64, best_score: *const u64) -> bool {
    // SAFETY: as the caller guarantees.
    unsafe { *best_score.add(u as usize) == u64::MAX || *best_score.add(v as usize) == u64::MAX }
}

/// ε = 0: merges every mutual best edge below the threshold (the best edge
/// of both endpoints; such edges share no node, so they are a matching).
/// Flags matched slots in `matched` and parkable ones ([`parkable`]) in
/// `park_flags` (every slot is written), and counts merges in
/// `counters[0]`, parkable edges in `counters[1]`.
///
/// # Safety
/// As [`ph_best_key`], which ran before. `parent` and `touched` hold one
/// u32 per node, `matched` and `park_flags` one u32 per slot, `counters`
/// two u64s.
///
/// # Parameters
/// - the edge slots; `params`; `best_score`, `best_key`: the best edges;
///   `parent`: the merge forest; `touched`: round tags; `matched`,
///   `park_flags`: flags; `counters`: merges and parkable edges.
///
/// # Thread mapping
/// Warp-uniform grid-stride loop, one slot per lane; counts are added once
/// per warp.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_match_mutual(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    params: RoundParams,
    best_score: *const u64,
    best_key: *const u64,
    parent: *mut u32,
    touched: *mut u32,
    matched: *mut u32,
    park_flags: *mut u32,
    counters: *mut u64,
) {
    warp_uniform_stride(params.n_edges, |e, valid| {
        // SAFETY: valid lanes hold slots below `n_edges`; endpoints are node ids.
        unsafe {
            let edge = if valid { load_edge(keys, counts, sums, e) } else { None };
            let (mut is_match, mut park) = (false, false);
            if let Some((u, v, key, score)) = edge {
                let bits = score.to_bits();
                let best_of = |x: u64| *best_score.add(x as usize) == bits && *best_key.add(x as usize) == key;
                is_match = score < params.threshold && best_of(u) && best_of(v);
                park = parkable(u, v, best_score);
                if is_match {
                    merge_pair(u, v, params.tag, parent, touched);
                }
            }
            if valid {
                *matched.add(e as usize) = is_match as u32;
                *park_flags.add(e as usize) = park as u32;
            }
            warp_count(counters, is_match);
            warp_count(counters.add(1), park);
        }
    });
}

/// ε > 0, step 1: the mean of every node's best edge, written by that edge
/// (one writer per node).
///
/// # Safety
/// As [`ph_best_key`], which ran before; `best_mean` holds one f64 per node.
///
/// # Parameters
/// - the edge slots; `params`; `best_score`, `best_key`; `best_mean`: output.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_best_mean(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    params: RoundParams,
    best_score: *const u64,
    best_key: *const u64,
    best_mean: *mut f64,
) {
    grid_stride(params.n_edges, |e| {
        // SAFETY: `e < n_edges`; endpoints are node ids.
        unsafe {
            if let Some((u, v, key, score)) = load_edge(keys, counts, sums, e) {
                if score < params.threshold {
                    let mean = contact_mean(*counts.add(e as usize), *sums.add(e as usize));
                    for x in [u, v] {
                        if *best_score.add(x as usize) == score.to_bits() && *best_key.add(x as usize) == key {
                            *best_mean.add(x as usize) = mean;
                        }
                    }
                }
            }
        }
    });
}

/// ε > 0, step 2: flags the (1+ε)-heavy edges below the threshold (mean
/// times `factor` at least the best mean of both endpoints), takes per node
/// the highest matching priority among them, and counts parkable edges in
/// `counters[1]`.
///
/// # Safety
/// As [`ph_best_mean`], which ran before; `eligible` holds one u32 per
/// slot; `best_priority` was reset to 0 at the endpoints; `counters` holds
/// two u64s.
///
/// # Parameters
/// - the edge slots; `params`; `best_score`; `best_mean`; `eligible`:
///   output flags; `best_priority`: per-node maximum; `counters`.
///
/// # Thread mapping
/// Warp-uniform grid-stride loop, one slot per lane.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_eligible(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    params: RoundParams,
    best_score: *const u64,
    best_mean: *const f64,
    eligible: *mut u32,
    best_priority: *mut u64,
    counters: *mut u64,
) {
    warp_uniform_stride(params.n_edges, |e, valid| {
        // SAFETY: valid lanes hold slots below `n_edges`; endpoints are node ids.
        unsafe {
            let edge = if valid { load_edge(keys, counts, sums, e) } else { None };
            let (mut ok, mut park) = (false, false);
            if let Some((u, v, _, score)) = edge {
                park = parkable(u, v, best_score);
                if score < params.threshold && !park {
                    let mean = contact_mean(*counts.add(e as usize), *sums.add(e as usize));
                    let heavy = |x: u64| mean * params.factor >= *best_mean.add(x as usize);
                    ok = heavy(u) && heavy(v);
                }
                if ok {
                    let priority = edge_priority(u, v, params.round);
                    atomic_max_u64(best_priority.add(u as usize), priority);
                    atomic_max_u64(best_priority.add(v as usize), priority);
                }
            }
            if valid {
                *eligible.add(e as usize) = ok as u32;
            }
            warp_count(counters.add(1), park);
        }
    });
}

/// ε > 0, step 3: breaks priority ties by the smaller key.
///
/// # Safety
/// As [`ph_eligible`], which ran before; `preferred_key` was reset to
/// `u64::MAX` at the endpoints.
///
/// # Parameters
/// - `keys`; `params`; `eligible`; `best_priority`; `preferred_key`: output.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_preferred_key(
    keys: *const u64,
    params: RoundParams,
    eligible: *const u32,
    best_priority: *const u64,
    preferred_key: *mut u64,
) {
    grid_stride(params.n_edges, |e| {
        // SAFETY: `e < n_edges`; eligible slots hold edges.
        unsafe {
            if *eligible.add(e as usize) == 0 {
                return;
            }
            let key = *keys.add(e as usize);
            let (u, v) = (key >> 32, key & 0xFFFF_FFFF);
            let priority = edge_priority(u, v, params.round);
            for x in [u, v] {
                if *best_priority.add(x as usize) == priority {
                    atomic_min_u64(preferred_key.add(x as usize), key);
                }
            }
        }
    });
}

/// ε > 0, step 4: merges the eligible edges that both endpoints prefer
/// (they share no node); flags them in `matched` (every slot is written)
/// and counts them in `counters[0]`.
///
/// # Safety
/// As [`ph_preferred_key`], which ran before; `parent`, `touched`,
/// `matched` and `counters` as in [`ph_match_mutual`].
///
/// # Parameters
/// - `keys`; `params`; `eligible`; `best_priority`; `preferred_key`; the
///   merge outputs as in [`ph_match_mutual`].
///
/// # Thread mapping
/// Warp-uniform grid-stride loop, one slot per lane.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_match_preferred(
    keys: *const u64,
    params: RoundParams,
    eligible: *const u32,
    best_priority: *const u64,
    preferred_key: *const u64,
    parent: *mut u32,
    touched: *mut u32,
    matched: *mut u32,
    counters: *mut u64,
) {
    warp_uniform_stride(params.n_edges, |e, valid| {
        // SAFETY: valid lanes hold slots below `n_edges`; eligible slots
        // hold edges.
        unsafe {
            let mut is_match = false;
            if valid && *eligible.add(e as usize) != 0 {
                let key = *keys.add(e as usize);
                let (u, v) = (key >> 32, key & 0xFFFF_FFFF);
                let priority = edge_priority(u, v, params.round);
                let prefers =
                    |x: u64| *best_priority.add(x as usize) == priority && *preferred_key.add(x as usize) == key;
                is_match = prefers(u) && prefers(v);
                if is_match {
                    merge_pair(u, v, params.tag, parent, touched);
                }
            }
            if valid {
                *matched.add(e as usize) = is_match as u32;
            }
            warp_count(counters, is_match);
        }
    });
}

/// Writes the merges of the matched slots `indices[0..n]` to the history
/// at `offset`: `(a, b) = (u, v)` (`v` merged into `u`) and the score;
/// with `relabel`, the endpoints are node ids of a renumbering and are
/// written as `original[u]`, `original[v]`.
///
/// # Safety
/// `indices` holds `n` slot indices of edges; `out_keys` and `out_scores`
/// hold at least `offset + n` elements; with `relabel`, `original` holds
/// one id per node.
///
/// # Parameters
/// - the edge slots; `indices`, `n`: the matched slots; `relabel`,
///   `original`: the renumbering; `offset`; outputs.
///
/// # Thread mapping
/// Grid-stride loop, one merge per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_history(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    indices: *const u32,
    n: u64,
    relabel: u32,
    original: *const u32,
    offset: u64,
    out_keys: *mut u64,
    out_scores: *mut f64,
) {
    grid_stride(n, |i| {
        // SAFETY: `i < n`; the indices are slots of edges; the outputs hold
        // `offset + n` elements; endpoints index `original` when relabelling.
        unsafe {
            let e = *indices.add(i as usize) as u64;
            if let Some((u, v, key, score)) = load_edge(keys, counts, sums, e) {
                let key = if relabel != 0 {
                    edge_key(*original.add(u as usize) as u64, *original.add(v as usize) as u64)
                } else {
                    key
                };
                *out_keys.add((offset + i) as usize) = key;
                *out_scores.add((offset + i) as usize) = score;
            }
        }
    });
}

/// Inserts `key` into the hash table; returns its slot. The table never
/// fills: it has at least twice as many slots as there are edges.
///
/// # Safety
/// `table_keys` holds `mask + 1` u64s.
#[inline(always)]
unsafe fn insert_key(table_keys: *mut u64, mask: u64, key: u64) -> u64 {
    let mut slot = hash_slot(key, mask);
    loop {
        // SAFETY: `slot <= mask`.
        let previous = unsafe { atomic_cas_u64(table_keys.add(slot as usize), EMPTY_KEY, key) };
        if previous == EMPTY_KEY || previous == key {
            return slot;
        }
        slot = (slot + 1) & mask;
    }
}

/// Gives slot `e` the edge between regions `a` and `b`: a hole when they
/// are the same region (returns `(u32::MAX, true)`), else the new key,
/// inserted into the hash table with `e` offered as its representative
/// (returns the table slot and `false`).
///
/// # Safety
/// `e` is a slot of `keys`; the table holds `mask + 1` entries.
#[inline(always)]
unsafe fn rekey(
    keys: *mut u64,
    e: u64,
    a: u64,
    b: u64,
    table_keys: *mut u64,
    table_rep: *mut u32,
    mask: u64,
) -> (u32, bool) {
    // SAFETY: as the caller guarantees.
    unsafe {
        match relabelled(a, b) {
            Some((a, b)) => {
                let new_key = edge_key(a, b);
                *keys.add(e as usize) = new_key;
                let slot = insert_key(table_keys, mask, new_key);
                atomic_min_u32(table_rep.add(slot as usize), e as u32);
                (slot as u32, false)
            }
            None => {
                *keys.add(e as usize) = EMPTY_KEY;
                (u32::MAX, true)
            }
        }
    }
}

/// Contraction, step 1: every edge with an endpoint merged this round
/// (tag `params.tag`) gets its endpoints' new ids; an edge inside a merged
/// pair becomes a hole (counted in `counters[2]`), the others meet their
/// parallel edges in the hash table: `table_rep[slot]` becomes the
/// smallest slot index with that key, and `slot_of[e]` the edge's table
/// slot (`u32::MAX` for edges that did not change).
///
/// With `all` set, every edge at a node that merged since the round tagged
/// `params.tag` (the threshold's first) is inserted with its current key
/// (the deduplication at the end of a threshold).
///
/// # Safety
/// The edge slots hold `params.n_edges` elements; `parent`, `touched` one
/// u32 per node; `table_keys` and `table_rep` `mask + 1` elements, empty
/// (`EMPTY_KEY`, `u32::MAX`); `slot_of` one u32 per slot; `counters` three
/// u64s.
///
/// # Parameters
/// - `keys` (updated); `params`; `parent`; `touched`; `all`; the table;
///   `slot_of`; `counters`.
///
/// # Thread mapping
/// Warp-uniform grid-stride loop, one slot per lane.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_relabel_insert(
    keys: *mut u64,
    params: RoundParams,
    parent: *const u32,
    touched: *const u32,
    all: u32,
    table_keys: *mut u64,
    table_rep: *mut u32,
    mask: u64,
    slot_of: *mut u32,
    counters: *mut u64,
) {
    warp_uniform_stride(params.n_edges, |e, valid| {
        // SAFETY: valid lanes hold slots below `n_edges`; endpoints are node
        // ids; table slots are below `mask + 1`.
        unsafe {
            let mut removed = false;
            if valid {
                let key = *keys.add(e as usize);
                let mut slot = u32::MAX;
                if key != EMPTY_KEY {
                    let (u, v) = (key >> 32, key & 0xFFFF_FFFF);
                    if all != 0 {
                        // Two edges can share a key at the end of a
                        // threshold only if one of them changed, that is,
                        // only at nodes that merged during the threshold.
                        if *touched.add(u as usize) >= params.tag || *touched.add(v as usize) >= params.tag {
                            slot = insert_key(table_keys, mask, key) as u32;
                            atomic_min_u32(table_rep.add(slot as usize), e as u32);
                        }
                    } else if *touched.add(u as usize) == params.tag || *touched.add(v as usize) == params.tag {
                        // Nodes are roots, and merge targets did not merge
                        // away in the same round: one step of `parent` is
                        // the new root.
                        let (a, b) = (*parent.add(u as usize) as u64, *parent.add(v as usize) as u64);
                        (slot, removed) = rekey(keys, e, a, b, table_keys, table_rep, mask);
                    }
                }
                *slot_of.add(e as usize) = slot;
            }
            warp_count(counters.add(2), removed);
        }
    });
}

/// ε = 0, one launch for [`ph_match_mutual`] and [`ph_relabel_insert`]:
/// merges every mutual best edge below the threshold and starts the
/// contraction. A node `x` merges this round exactly when its best edge
/// (`best_key[x]`) is also its partner's, and its new id is then the
/// smaller of the two, so every slot finds its endpoints' new ids from the
/// best keys alone, without waiting for the merges to be written. Edges
/// inside a merged pair become holes (counted in `counters[2]`); the
/// others with a merged endpoint (even one that keeps its id) get their
/// new key and meet their parallel edges in the hash table, as in
/// [`ph_relabel_insert`]. Records parkable
/// slots in `park_flags` and counts merges and parkable edges in
/// `counters[0]` and `counters[1]`. No merge history is kept.
///
/// # Safety
/// As [`ph_match_mutual`] and [`ph_relabel_insert`] together: the best
/// edges of this round are complete; the table is empty.
///
/// # Parameters
/// - the edge slots (keys updated); `params`; `best_key`; `parent`,
///   `touched`; `park_flags`; the table; `slot_of`; `counters`.
///
/// # Thread mapping
/// Warp-uniform grid-stride loop, one slot per lane; counts are added once
/// per warp.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_match_contract(
    keys: *mut u64,
    params: RoundParams,
    best_key: *const u64,
    parent: *mut u32,
    touched: *mut u32,
    park_flags: *mut u32,
    table_keys: *mut u64,
    table_rep: *mut u32,
    mask: u64,
    slot_of: *mut u32,
    counters: *mut u64,
) {
    warp_uniform_stride(params.n_edges, |e, valid| {
        // SAFETY: valid lanes hold slots below `n_edges`; endpoints and the
        // endpoints of best keys are node ids; table slots are below
        // `mask + 1`.
        unsafe {
            let (mut is_match, mut park, mut removed) = (false, false, false);
            if valid {
                let key = *keys.add(e as usize);
                let mut slot = u32::MAX;
                if key != EMPTY_KEY {
                    let (u, v) = (key >> 32, key & 0xFFFF_FFFF);
                    let (best_u, best_v) = (*best_key.add(u as usize), *best_key.add(v as usize));
                    // A best key exists exactly for nodes with an edge below
                    // the threshold, and is one of those edges.
                    is_match = best_u == key && best_v == key;
                    park = best_u == u64::MAX || best_v == u64::MAX;
                    if is_match {
                        merge_pair(u, v, params.tag, parent, touched);
                    }
                    // An endpoint's new id and whether it merged, from the
                    // best keys (`mutual_merge`); the partner's best key is
                    // already loaded when the endpoint's best is this edge.
                    let new_id = |x: u64, best: u64| -> (u64, bool) {
                        let partner_best = if best == u64::MAX {
                            u64::MAX
                        } else if best == key {
                            if x == u {
                                best_v
                            } else {
                                best_u
                            }
                        } else {
                            *best_key.add(partner(x, best) as usize)
                        };
                        mutual_merge(x, best, partner_best)
                    };
                    let ((a, merged_u), (b, merged_v)) = (new_id(u, best_u), new_id(v, best_v));
                    if merged_u || merged_v {
                        (slot, removed) = rekey(keys, e, a, b, table_keys, table_rep, mask);
                    }
                }
                *slot_of.add(e as usize) = slot;
                *park_flags.add(e as usize) = park as u32;
            }
            warp_count(counters, is_match);
            warp_count(counters.add(1), park);
            warp_count(counters.add(2), removed);
        }
    });
}

/// Contraction, step 2: every inserted edge that is not its key's
/// representative adds its statistics to the representative's (integer
/// atomics) and becomes a hole (counted in `counters[2]`). At ε = 0 it
/// also sets the best score and key of nodes `0..n_reset` to `u64::MAX`,
/// ready for the next round's [`ph_best_score`], which saves a launch of
/// [`ph_reset_endpoints`].
///
/// # Safety
/// As [`ph_relabel_insert`], which ran before; `best_score` and `best_key`
/// hold at least `n_reset` u64s.
///
/// # Parameters
/// - the edge slots (updated); `n_slots`; `table_rep`; `slot_of`;
///   `n_reset`, `best_score`, `best_key`; `counters`.
///
/// # Thread mapping
/// A grid-stride loop over the nodes to reset, then a warp-uniform
/// grid-stride loop, one slot per lane.
#[no_mangle]
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
    counters: *mut u64,
) {
    // The next round's best edges start from nothing: nodes `0..n_reset`
    // are reset along the way (their arrays are dense after a renumbering,
    // so this writes whole lines instead of two random entries per edge).
    grid_stride(n_reset, |x| {
        // SAFETY: `x < n_reset`, within the per-node arrays.
        unsafe {
            *best_score.add(x as usize) = u64::MAX;
            *best_key.add(x as usize) = u64::MAX;
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
                if slot != u32::MAX {
                    let rep = *table_rep.add(slot as usize) as usize;
                    if rep != e as usize {
                        atomic_add_u64(counts.add(rep), *counts.add(e as usize));
                        atomic_add_u64(sums.add(rep), *sums.add(e as usize));
                        *keys.add(e as usize) = EMPTY_KEY;
                        removed = true;
                    }
                }
            }
            warp_count(counters.add(2), removed);
        }
    });
}

/// Contraction, step 3: empties the table slots this contraction used.
///
/// # Safety
/// As [`ph_resolve`], which ran before.
///
/// # Parameters
/// - `slot_of`, `n_slots`; the table.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_clear_table(
    slot_of: *const u32,
    n_slots: u64,
    table_keys: *mut u64,
    table_rep: *mut u32,
) {
    grid_stride(n_slots, |e| {
        // SAFETY: table slots are below the table's length.
        unsafe {
            let slot = *slot_of.add(e as usize);
            if slot != u32::MAX {
                *table_keys.add(slot as usize) = EMPTY_KEY;
                *table_rep.add(slot as usize) = u32::MAX;
            }
        }
    });
}

/// Sorts the edge slots for a compaction: `active[e] = 1` for edges
/// between two nodes that can still merge at this threshold, `parked[e] =
/// 1` for edges with an endpoint that cannot ([`parkable`], from the last
/// round's best scores or, with `use_flags`, from the flags
/// [`ph_match_mutual`] recorded with them); holes get 0 in both.
///
/// # Safety
/// The keys hold `n_slots` u64s; with `use_flags`, `park_flags` holds
/// `n_slots` u32s written by the last round, otherwise the endpoints index
/// `best_score` (set by the last round); `active` and `parked` hold
/// `n_slots` u32s.
///
/// # Parameters
/// - `keys`, `n_slots`; `use_flags`, `park_flags`; `best_score`; outputs.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_classify(
    keys: *const u64,
    n_slots: u64,
    use_flags: u32,
    park_flags: *const u32,
    best_score: *const u64,
    active: *mut u32,
    parked: *mut u32,
) {
    grid_stride(n_slots, |e| {
        // SAFETY: `e < n_slots`; endpoints are node ids.
        unsafe {
            let key = *keys.add(e as usize);
            let (is_active, is_parked) = if key == EMPTY_KEY {
                (0, 0)
            } else if if use_flags != 0 {
                *park_flags.add(e as usize) != 0
            } else {
                parkable(key >> 32, key & 0xFFFF_FFFF, best_score)
            } {
                (0, 1)
            } else {
                (1, 0)
            };
            *active.add(e as usize) = is_active;
            *parked.add(e as usize) = is_parked;
        }
    });
}

/// Copies the edges `indices[0..n]` (keys, counts, sums) to
/// `out_*[offset..offset + n]`; with `relabel` set the keys go through
/// `roots` (parked edges, whose endpoints may have merged; a self-loop,
/// which cannot happen, would be counted in `n_bad`).
///
/// # Safety
/// `indices` holds `n` in-bounds slot indices of edges; `roots` holds a
/// region per node when `relabel` is set; the outputs hold at least
/// `offset + n` elements and do not alias the inputs; `n_bad` is one u32.
///
/// # Parameters
/// - `keys`, `counts`, `sums`: the source; `indices`, `n`; `relabel`,
///   `roots`; `offset`; outputs; `n_bad`.
///
/// # Thread mapping
/// Grid-stride loop, one edge per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_gather_edges(
    keys: *const u64,
    counts: *const u64,
    sums: *const u64,
    indices: *const u32,
    n: u64,
    relabel: u32,
    roots: *const u32,
    offset: u64,
    out_keys: *mut u64,
    out_counts: *mut u64,
    out_sums: *mut u64,
    n_bad: *mut u32,
) {
    grid_stride(n, |i| {
        // SAFETY: as documented.
        unsafe {
            let e = *indices.add(i as usize) as usize;
            let o = (offset + i) as usize;
            let mut key = *keys.add(e);
            if relabel != 0 {
                let (u, v) = (key >> 32, key & 0xFFFF_FFFF);
                key = match relabelled(*roots.add(u as usize) as u64, *roots.add(v as usize) as u64) {
                    Some((a, b)) => edge_key(a, b),
                    None => {
                        atomic_add_u32(n_bad, 1);
                        EMPTY_KEY
                    }
                };
            }
            *out_keys.add(o) = key;
            *out_counts.add(o) = *counts.add(e);
            *out_sums.add(o) = *sums.add(e);
        }
    });
}

/// Flags the edges (non-empty slots) among the first `n_slots`.
///
/// # Safety
/// `keys` holds `n_slots` u64s, `flags` `n_slots` u32s.
///
/// # Parameters
/// - `keys`, `n_slots`; `flags`: output.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_live_flags(keys: *const u64, n_slots: u64, flags: *mut u32) {
    // SAFETY: `e < n_slots`.
    grid_stride(n_slots, |e| unsafe { *flags.add(e as usize) = (*keys.add(e as usize) != EMPTY_KEY) as u32 });
}

/// The region of every node: the root of its tree in the merge forest
/// (the smallest node of the region: merges go into the smaller id).
///
/// # Safety
/// `parent` holds `n_nodes` u32s forming a forest (roots point to
/// themselves); `roots` holds `n_nodes` u32s.
///
/// # Parameters
/// - `parent`, `n_nodes`; `roots`: output.
///
/// # Thread mapping
/// Grid-stride loop, one node per iteration, following parents to the root.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_find_roots(parent: *const u32, n_nodes: u64, roots: *mut u32) {
    grid_stride(n_nodes, |x| {
        // SAFETY: parents are node ids below `n_nodes`.
        unsafe {
            let mut r = x as u32;
            loop {
                let p = *parent.add(r as usize);
                if p == r {
                    break;
                }
                r = p;
            }
            *roots.add(x as usize) = r;
        }
    });
}

/// A segmentation: every voxel's fragment replaced by its region
/// (`roots[0] = 0` keeps the background). A label at or above `n_roots`
/// becomes 0 and is counted in `n_bad`, which the host checks.
///
/// # Safety
/// `labels` and `out` hold `n` u32s; `roots` holds `n_roots`; `n_bad` is
/// one zeroed u32.
///
/// # Parameters
/// - `labels`, `n`: fragments; `roots`, `n_roots`: region per fragment;
///   `out`: the segmentation; `n_bad`: labels outside `roots`.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_segment(
    labels: *const u32,
    n: u64,
    roots: *const u32,
    n_roots: u64,
    out: *mut u32,
    n_bad: *mut u32,
) {
    grid_stride(n, |i| {
        // SAFETY: `i < n`; the label is checked against `n_roots`.
        unsafe {
            let label = *labels.add(i as usize);
            let region = if (label as u64) < n_roots {
                *roots.add(label as usize)
            } else {
                atomic_add_u32(n_bad, 1);
                0
            };
            *out.add(i as usize) = region;
        }
    });
}

/// A segmentation in waterz's uint64 ids: every voxel's fragment `k`
/// replaced by `table[k]` (the id of its region). A fragment at or above
/// `n_table` becomes 0 and is counted in `n_bad`, which the host checks.
///
/// # Safety
/// `labels` holds `n` u32s, `out` `n` u64s; `table` holds `n_table` u64s;
/// `n_bad` is one zeroed u32.
///
/// # Parameters
/// - `labels`, `n`: fragments; `table`, `n_table`: id per fragment; `out`;
///   `n_bad`: labels outside the table.
///
/// # Thread mapping
/// Grid-stride loop, one voxel per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_segment_u64(
    labels: *const u32,
    n: u64,
    table: *const u64,
    n_table: u64,
    out: *mut u64,
    n_bad: *mut u32,
) {
    grid_stride(n, |i| {
        // SAFETY: `i < n`; the label is checked against `n_table`.
        unsafe {
            let label = *labels.add(i as usize);
            let id = if (label as u64) < n_table {
                *table.add(label as usize)
            } else {
                atomic_add_u32(n_bad, 1);
                0
            };
            *out.add(i as usize) = id;
        }
    });
}

/// Sets `flags[x] = 1` for both endpoints `x` of every edge (holes
/// skipped): the nodes a renumbering keeps.
///
/// # Safety
/// `keys` holds `n_slots` keys whose endpoints index `flags`.
///
/// # Parameters
/// - `keys`, `n_slots`: the edge slots; `flags`: zeroed, one per node.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_mark_endpoints(keys: *const u64, n_slots: u64, flags: *mut u32) {
    grid_stride(n_slots, |e| {
        // SAFETY: `e < n_slots`; endpoints index `flags`.
        unsafe {
            let key = *keys.add(e as usize);
            if key != EMPTY_KEY {
                *flags.add((key >> 32) as usize) = 1;
                *flags.add((key & 0xFFFF_FFFF) as usize) = 1;
            }
        }
    });
}

/// The inverse of a renumbering: `new_of_old[old_of_new[k]] = k`.
///
/// # Safety
/// `old_of_new` holds `m` distinct ids below the length of `new_of_old`.
///
/// # Parameters
/// - `old_of_new`, `m`: the kept nodes in order; `new_of_old`: output
///   (entries of nodes not kept are left as they were).
///
/// # Thread mapping
/// Grid-stride loop, one kept node per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_scatter_ids(old_of_new: *const u32, m: u64, new_of_old: *mut u32) {
    // SAFETY: `k < m`; the ids index `new_of_old`.
    grid_stride(m, |k| unsafe { *new_of_old.add(*old_of_new.add(k as usize) as usize) = k as u32 });
}

/// Renumbers the edges' endpoints in place: key `u << 32 | v` becomes
/// `new_of_old[u] << 32 | new_of_old[v]` (holes stay holes). The
/// renumbering is increasing, so `u < v` still holds and every comparison
/// of ids or keys is unchanged.
///
/// # Safety
/// `keys` holds `n_slots` keys whose endpoints index `new_of_old`, where
/// they have been set.
///
/// # Parameters
/// - `keys`, `n_slots`: the edge slots; `new_of_old`: the renumbering.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_translate_keys(keys: *mut u64, n_slots: u64, new_of_old: *const u32) {
    grid_stride(n_slots, |e| {
        // SAFETY: `e < n_slots`; endpoints index `new_of_old`.
        unsafe {
            let key = *keys.add(e as usize);
            if key != EMPTY_KEY {
                let u = *new_of_old.add((key >> 32) as usize) as u64;
                let v = *new_of_old.add((key & 0xFFFF_FFFF) as usize) as u64;
                *keys.add(e as usize) = edge_key(u, v);
            }
        }
    });
}

/// Copies the merges of renumbered nodes `0..n` into the merge forest and
/// merge tags of all nodes: for a node `x` that merged into `parent[x]`,
/// `all_parent[original[x]] = original[parent[x]]`; a node's non-zero tag
/// goes to `all_touched[original[x]]`.
///
/// # Safety
/// `parent`, `touched` and `original` hold `n` entries; `original` holds
/// distinct ids below the length of `all_parent` and `all_touched`.
///
/// # Parameters
/// - `parent`, `touched`, `original`, `n`: the renumbered nodes;
///   `all_parent`, `all_touched`: the state of all nodes.
///
/// # Thread mapping
/// Grid-stride loop, one renumbered node per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_commit(
    parent: *const u32,
    touched: *const u32,
    original: *const u32,
    n: u64,
    all_parent: *mut u32,
    all_touched: *mut u32,
) {
    grid_stride(n, |x| {
        // SAFETY: `x < n`; parents are renumbered ids below `n`; original
        // ids index the full arrays.
        unsafe {
            let id = *original.add(x as usize) as usize;
            let p = *parent.add(x as usize);
            if p != x as u32 {
                *all_parent.add(id) = *original.add(p as usize);
            }
            let tag = *touched.add(x as usize);
            if tag != 0 {
                *all_touched.add(id) = tag;
            }
        }
    });
}
