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
    contact_mean, edge_key, edge_priority, edge_score, hash_slot, relabelled, RoundParams, EMPTY_KEY,
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
/// `best_score[x] = min(bits of score)`.
///
/// # Safety
/// `keys`, `counts`, `sums` hold `params.n_edges` slots; endpoints index
/// `best_score`, which [`ph_reset_endpoints`] set to `u64::MAX`.
///
/// # Parameters
/// - the edge slots; `params`: the round; `best_score`: per-node minimum.
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
) {
    grid_stride(params.n_edges, |e| {
        // SAFETY: `e < n_edges`; endpoints are node ids.
        unsafe {
            if let Some((u, v, _, score)) = load_edge(keys, counts, sums, e) {
                if score < params.threshold {
                    atomic_min_u64(best_score.add(u as usize), score.to_bits());
                    atomic_min_u64(best_score.add(v as usize), score.to_bits());
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
/// Flags matched slots in `matched` (every slot is written) and counts
/// merges in `counters[0]`, parkable edges in `counters[1]`.
///
/// # Safety
/// As [`ph_best_key`], which ran before. `parent` and `touched` hold one
/// u32 per node, `matched` one u32 per slot, `counters` two u64s.
///
/// # Parameters
/// - the edge slots; `params`; `best_score`, `best_key`: the best edges;
///   `parent`: the merge forest; `touched`: round tags; `matched`: flags;
///   `counters`: merges and parkable edges.
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
/// at `offset`: `(a, b) = (u, v)` (`v` merged into `u`) and the score.
///
/// # Safety
/// `indices` holds `n` slot indices of edges; `out_keys` and `out_scores`
/// hold at least `offset + n` elements.
///
/// # Parameters
/// - the edge slots; `indices`, `n`: the matched slots; `offset`; outputs.
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
    offset: u64,
    out_keys: *mut u64,
    out_scores: *mut f64,
) {
    grid_stride(n, |i| {
        // SAFETY: `i < n`; the indices are slots of edges; the outputs hold
        // `offset + n` elements.
        unsafe {
            let e = *indices.add(i as usize) as u64;
            if let Some((_, _, key, score)) = load_edge(keys, counts, sums, e) {
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
                        }
                    } else if *touched.add(u as usize) == params.tag || *touched.add(v as usize) == params.tag {
                        // Nodes are roots, and merge targets did not merge
                        // away in the same round: one step of `parent` is
                        // the new root.
                        match relabelled(*parent.add(u as usize) as u64, *parent.add(v as usize) as u64) {
                            Some((a, b)) => {
                                let new_key = edge_key(a, b);
                                *keys.add(e as usize) = new_key;
                                slot = insert_key(table_keys, mask, new_key) as u32;
                            }
                            None => {
                                *keys.add(e as usize) = EMPTY_KEY;
                                removed = true;
                            }
                        }
                    }
                    if slot != u32::MAX {
                        atomic_min_u32(table_rep.add(slot as usize), e as u32);
                    }
                }
                *slot_of.add(e as usize) = slot;
            }
            warp_count(counters.add(2), removed);
        }
    });
}

/// Contraction, step 2: every inserted edge that is not its key's
/// representative adds its statistics to the representative's (integer
/// atomics) and becomes a hole (counted in `counters[2]`).
///
/// # Safety
/// As [`ph_relabel_insert`], which ran before.
///
/// # Parameters
/// - the edge slots (updated); `n_slots`; `table_rep`; `slot_of`; `counters`.
///
/// # Thread mapping
/// Warp-uniform grid-stride loop, one slot per lane.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_resolve(
    keys: *mut u64,
    counts: *mut u64,
    sums: *mut u64,
    n_slots: u64,
    table_rep: *const u32,
    slot_of: *const u32,
    counters: *mut u64,
) {
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
/// 1` for edges with an endpoint that cannot ([`parkable`]); holes get 0
/// in both.
///
/// # Safety
/// The keys hold `n_slots` u64s whose endpoints index `best_score` (set this
/// round); `active` and `parked` hold `n_slots` u32s.
///
/// # Parameters
/// - `keys`, `n_slots`; `best_score`; outputs.
///
/// # Thread mapping
/// Grid-stride loop, one slot per iteration.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ph_classify(
    keys: *const u64,
    n_slots: u64,
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
            } else if parkable(key >> 32, key & 0xFFFF_FFFF, best_score) {
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
