//! ParHAC's per-edge arithmetic, shared by the CPU ParHAC and the GPU
//! kernels so that both rank, match and merge the same edges.

use crate::stats::FIXED_POINT_ONE;

/// The parameters of one ParHAC round, passed to every round kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundParams {
    /// Edges in the current graph.
    pub n_edges: u64,
    /// Edges scoring below this merge (waterz's float32 threshold, widened).
    pub threshold: f64,
    /// `1 + ε`: an edge is eligible when its mean times this reaches the
    /// best mean at both endpoints.
    pub factor: f64,
    /// The round's index since the start (salts the matching priority).
    pub round: u64,
    /// A tag unique to this round (`round + 1`): nodes that merge are
    /// marked with it, so that the marks need no clearing.
    pub tag: u32,
    /// Padding; zero.
    pub pad: u32,
}

/// The mean affinity of `count` faces whose fixed-point affinities sum to
/// `sum` (0 for no faces), exactly as [`crate::stats::ContactStats::mean`].
#[inline(always)]
pub fn contact_mean(count: u64, sum: u64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    sum as f64 / (count as f64 * FIXED_POINT_ONE)
}

/// waterz's edge score: one minus the contact mean, in f64. It is never
/// negative, so its IEEE bits order as the scores do.
#[inline(always)]
pub fn edge_score(count: u64, sum: u64) -> f64 {
    1.0 - contact_mean(count, sum)
}

/// The key of edge `(u, v)`, `u < v < 2^32`: `u << 32 | v`. Keys order
/// edges by their endpoints, which breaks score ties.
#[inline(always)]
pub fn edge_key(u: u64, v: u64) -> u64 {
    (u << 32) | v
}

/// The matching priority of edge `(u, v)` in round `round`: SplitMix64 of
/// the three, so that it is the same on every run and every device. It is
/// free of the score order, so that chains of similar edges match many
/// pairs per round; ties break towards the smaller key.
#[inline(always)]
pub fn edge_priority(u: u64, v: u64, round: u64) -> u64 {
    let mut z = edge_key(u, v) ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of an empty edge slot (a hole left by a contraction) and of an
/// empty hash-table slot; no edge has it (node ids are below `2^32 - 1`).
pub const EMPTY_KEY: u64 = u64::MAX;

/// The home slot of `key` in a hash table of `mask + 1` slots (a power of
/// two): the key through SplitMix64's finalizer, masked.
#[inline(always)]
pub fn hash_slot(key: u64, mask: u64) -> u64 {
    let mut z = key;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & mask
}

/// What a contraction does with an edge whose endpoints became `(a, b)`.
#[inline(always)]
pub fn relabelled(a: u64, b: u64) -> Option<(u64, u64)> {
    if a == b {
        None
    } else if a < b {
        Some((a, b))
    } else {
        Some((b, a))
    }
}

/// The other endpoint of edge `key` seen from its endpoint `x`.
#[inline(always)]
pub fn partner(x: u64, key: u64) -> u64 {
    if key >> 32 == x {
        key & 0xFFFF_FFFF
    } else {
        key >> 32
    }
}

/// At ε = 0, what a round does to node `x`, from best keys alone: `x`
/// merges exactly when its best key `best_x` (`u64::MAX`: no edge below
/// the threshold) is also the best key of its partner on that edge
/// (`partner_best`), and its region then takes the smaller id of the two.
/// Returns `(new id, merged)`; a node that merged may keep its id (the
/// smaller of its pair), and its edges still change.
#[inline(always)]
pub fn mutual_merge(x: u64, best_x: u64, partner_best: u64) -> (u64, bool) {
    if best_x != u64::MAX && partner_best == best_x {
        (x.min(partner(x, best_x)), true)
    } else {
        (x, false)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn scores_order_as_their_bits() {
        let scores = [edge_score(1, 0), edge_score(3, 1 << 31), edge_score(2, 1 << 32), edge_score(1, 1 << 32)];
        assert_eq!(scores, [1.0, 1.0 - 1.0 / 6.0, 0.5, 0.0]);
        for w in scores.windows(2) {
            assert!(w[0] > w[1] && w[0].to_bits() > w[1].to_bits());
        }
        assert_eq!(edge_score(0, 0), 1.0);
    }

    #[test]
    fn relabelling_drops_self_loops_and_orders_endpoints() {
        assert_eq!(relabelled(3, 3), None);
        assert_eq!(relabelled(5, 2), Some((2, 5)));
        assert_eq!(relabelled(2, 5), Some((2, 5)));
    }

    #[test]
    fn hash_slots_stay_in_the_table_and_spread() {
        let mask = 1023;
        let slots: std::collections::BTreeSet<u64> =
            (1..=512u64).map(|u| hash_slot(edge_key(u, u + 1), mask)).collect();
        assert!(slots.iter().all(|&s| s <= mask));
        assert!(slots.len() > 350, "{} distinct slots for 512 keys", slots.len());
    }

    #[test]
    fn mutual_best_keys_merge_into_the_smaller_id() {
        let k = edge_key(3, 8);
        assert_eq!(partner(3, k), 8);
        assert_eq!(partner(8, k), 3);
        // Mutual: both ends merge, into 3; 3 keeps its id but merged.
        assert_eq!(mutual_merge(8, k, k), (3, true));
        assert_eq!(mutual_merge(3, k, k), (3, true));
        // Not mutual, or no edge below the threshold: no merge.
        assert_eq!(mutual_merge(8, k, edge_key(3, 5)), (8, false));
        assert_eq!(mutual_merge(8, u64::MAX, u64::MAX), (8, false));
    }

    #[test]
    fn priorities_depend_on_the_round() {
        assert_ne!(edge_priority(1, 2, 0), edge_priority(1, 2, 1));
        assert_eq!(edge_priority(1, 2, 7), edge_priority(1, 2, 7));
    }
}
