//! The compaction of the edge slots: which edges stay, which are parked
//! until the threshold's end, and the copies that gather them.

use super::parkable;
use crate::device::*;
use gpu_waterz_abi::graph::EdgeKey;
use gpu_waterz_abi::parhac::{EndpointMap, ParkSource, PhClassifyArgs, PhGatherEdgesArgs, PhLiveFlagsArgs};

kernel! {
    /// Sorts the edge slots for a compaction: `active[e] = 1` for edges
    /// between two nodes that can still merge at this threshold, `parked[e] =
    /// 1` for edges with an endpoint that cannot (from the last round's best
    /// scores, or from the flags `ph_match_mutual` and `ph_match_contract`
    /// recorded with them); holes get 0 in both.
    ///
    /// # Safety
    /// `keys` holds `n_slots` key bits; with [`ParkSource::ParkFlags`],
    /// `park_flags` holds `n_slots` u32s written by the last round, otherwise
    /// the endpoints index `best_score` (set by the last round); `active` and
    /// `parked` hold `n_slots` u32s.
    ///
    /// # Parameters
    /// - `keys`, `n_slots`: the edge slots; `source`, `park_flags`,
    ///   `best_score`: what is parkable; `active`, `parked`: outputs.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_classify(
        keys: *const u64,
        n_slots: u64,
        source: gpu_waterz_abi::parhac::ParkSource,
        park_flags: *const u32,
        best_score: *const u64,
        active: *mut u32,
        parked: *mut u32,
    ) as PhClassifyArgs {
        grid_stride(n_slots, |e| {
            // SAFETY: `e < n_slots`; endpoints are node ids.
            unsafe {
                let key = EdgeKey::from_bits(*keys.add(e as usize));
                let (is_active, is_parked) = if key.is_empty() {
                    (0, 0)
                } else if match source {
                    ParkSource::ParkFlags => *park_flags.add(e as usize) != 0,
                    ParkSource::BestScores => parkable(key, best_score),
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
}

kernel! {
    /// Copies the edges `indices[0..n]` (keys, counts, sums) to
    /// `out_*[offset..offset + n]`; with [`EndpointMap::Lookup`] the endpoints
    /// go through `map` (parked edges, whose endpoints may have merged; a
    /// self-loop, which cannot happen, would be counted in `n_bad`).
    ///
    /// # Safety
    /// `indices` holds `n` in-bounds slot indices; with
    /// [`EndpointMap::Lookup`] the endpoints of the non-empty ones index `map`; the outputs hold at
    /// least `offset + n` elements and do not alias the inputs; `n_bad` is one
    /// u32.
    ///
    /// # Parameters
    /// - `keys`, `counts`, `sums`: the source; `indices`, `n`: what to copy;
    ///   `endpoints`, `map`: the relabelling; `offset`; `out_keys`,
    ///   `out_counts`, `out_sums`: the destination; `n_bad`.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one edge per iteration.
    pub unsafe extern "ptx-kernel" fn ph_gather_edges(
        keys: *const u64,
        counts: *const u64,
        sums: *const u64,
        indices: *const u32,
        n: u64,
        endpoints: gpu_waterz_abi::parhac::EndpointMap,
        map: *const u32,
        offset: u64,
        out_keys: *mut u64,
        out_counts: *mut u64,
        out_sums: *mut u64,
        n_bad: *mut u32,
    ) as PhGatherEdgesArgs {
        grid_stride(n, |i| {
            // SAFETY: as documented.
            unsafe {
                let e = *indices.add(i as usize) as usize;
                let o = (offset + i) as usize;
                let mut key = EdgeKey::from_bits(*keys.add(e));
                // An empty slot stays empty (its endpoints index nothing).
                if endpoints == EndpointMap::Lookup && !key.is_empty() {
                    let (a, b) = (*map.add(key.u() as usize) as u64, *map.add(key.v() as usize) as u64);
                    key = match EdgeKey::between(a, b) {
                        Some(k) => k,
                        None => {
                            atomic_add_u32(n_bad, 1);
                            EdgeKey::EMPTY
                        }
                    };
                }
                *out_keys.add(o) = key.bits();
                *out_counts.add(o) = *counts.add(e);
                *out_sums.add(o) = *sums.add(e);
            }
        });
    }
}

kernel! {
    /// Flags the edges (non-empty slots) among the first `n_slots`.
    ///
    /// # Safety
    /// `keys` holds `n_slots` u64s, `flags` `n_slots` u32s.
    ///
    /// # Parameters
    /// - `keys`, `n_slots`: the edge slots; `flags`: output.
    ///
    /// # Thread mapping
    /// Grid-stride loop, one slot per iteration.
    pub unsafe extern "ptx-kernel" fn ph_live_flags(
        keys: *const u64,
        n_slots: u64,
        flags: *mut u32,
    ) as PhLiveFlagsArgs {
        grid_stride(n_slots, |e| {
            // SAFETY: `e < n_slots`.
            unsafe { *flags.add(e as usize) = !EdgeKey::from_bits(*keys.add(e as usize)).is_empty() as u32 }
        });
    }
}
