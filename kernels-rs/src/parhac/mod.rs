//! ParHAC rounds on the GPU: best incident edges, (1+ε)-heavy matchings,
//! merges and an in-place contraction of the region graph.
//!
//! The graph is an array of edge slots ([`EdgeKey`] bits with `u < v`,
//! contact count, fixed-point affinity sum); a slot whose key is
//! [`EdgeKey::EMPTY`] is a hole left by a contraction. Every choice is made
//! with integer atomics of a total order (`min` of score bits, then `min`
//! of keys; `max` of priorities, then `min` of keys), and statistics are
//! added with integer atomics, so the merges and the contracted graph do
//! not depend on the order threads run in: reruns give the same merges as
//! each other and as the CPU ParHAC (`gpu_waterz_parhac::cpu`), which
//! shares the arithmetic and the per-slot decisions in
//! `gpu_waterz_abi::parhac`. Only the order of the slots may vary, and
//! nothing observable depends on it (the host sorts what it reports).
//!
//! Contraction: the edges with an endpoint merged this round get their new
//! key and meet their parallel edges in a hash table (linear probing,
//! `hash_slot`); the edge with the smallest slot index of each new key
//! collects the others' statistics, the others become holes.
//!
//! The kernels, by concept: [`best`] (every node's best edge), [`matching`]
//! (the matchings and merges), [`contract`] (the contraction, and the
//! fused ε = 0 round), [`history`] (the merge history), [`compact`] (the
//! compaction of the slots), [`renumber`] (dense node ids) and [`segment`]
//! (regions and segmentations).

use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{edge_score, NO_SCORE};

pub mod best;
pub mod compact;
pub mod contract;
pub mod history;
pub mod matching;
pub mod renumber;
pub mod segment;

/// Edge slot `e`: its key and score, or `None` for a hole.
///
/// # Safety
/// `e` is below the length of the three arrays.
#[inline(always)]
unsafe fn load_edge(keys: *const u64, counts: *const u64, sums: *const u64, e: u64) -> Option<(EdgeKey, f64)> {
    // SAFETY: the caller passes an in-bounds slot index.
    let key = EdgeKey::from_bits(unsafe { *keys.add(e as usize) });
    if key.is_empty() {
        return None;
    }
    // SAFETY: as above.
    let (count, sum) = unsafe { (*counts.add(e as usize), *sums.add(e as usize)) };
    Some((key, edge_score(count, sum)))
}

/// Records the merge of edge `key`'s `v` into its `u`: `parent[v] = u`,
/// both nodes tagged with the round.
///
/// # Safety
/// The endpoints index `parent` and `touched`.
#[inline(always)]
unsafe fn merge_pair(key: EdgeKey, tag: u32, parent: *mut u32, touched: *mut u32) {
    let (u, v) = (key.u(), key.v());
    // SAFETY: as the caller guarantees; the matching gives every node at
    // most one matched edge, so these writes do not race.
    unsafe {
        *parent.add(v as usize) = u as u32;
        *touched.add(u as usize) = tag;
        *touched.add(v as usize) = tag;
    }
}

/// Whether an endpoint of edge `key` has no edge below the threshold: such
/// a node can never merge at this threshold (its edges only combine into
/// means between theirs), so the edge can be parked until the next one.
///
/// # Safety
/// The endpoints index `best_score`.
#[inline(always)]
unsafe fn parkable(key: EdgeKey, best_score: *const u64) -> bool {
    // SAFETY: as the caller guarantees.
    unsafe { *best_score.add(key.u() as usize) == NO_SCORE || *best_score.add(key.v() as usize) == NO_SCORE }
}
