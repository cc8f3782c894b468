//! ParHAC's per-edge arithmetic and per-slot decisions, shared by the CPU
//! ParHAC, the GPU kernels (`kernels-rs/src/parhac/`) and the host models
//! of the kernels, so that all of them rank, match and merge the same
//! edges; and the argument structs of the `ph_*` kernels.
//!
//! The GPU's graph is an array of edge slots: [`EdgeKey`] bits, contact
//! counts and fixed-point affinity sums; a slot whose key is
//! [`EdgeKey::EMPTY`] is a hole left by a contraction.

use crate::graph::EdgeKey;
use crate::stats::FIXED_POINT_ONE;

/// The best score of a node with no incident edge below the threshold
/// (larger than the bits of every score, which are never negative).
pub const NO_SCORE: u64 = u64::MAX;

/// The table slot of an edge slot that no contraction inserted, and the
/// representative of an empty hash-table slot.
pub const NO_SLOT: u32 = u32::MAX;

/// The byte that, repeated, gives every sentinel: [`EdgeKey::EMPTY`],
/// [`NO_SCORE`] and [`NO_SLOT`]. The host sets whole buffers to them with
/// the driver's memset.
pub const SENTINEL_BYTE: u8 = 0xFF;

const _: () = {
    assert!(EdgeKey::EMPTY.bits() == u64::from_ne_bytes([SENTINEL_BYTE; 8]));
    assert!(NO_SCORE == u64::from_ne_bytes([SENTINEL_BYTE; 8]));
    assert!(NO_SLOT == u32::from_ne_bytes([SENTINEL_BYTE; 4]));
};

/// The smallest hash table the contractions use, in entries.
pub const MIN_TABLE_LEN: u64 = 1024;

/// The hash-table length for deduplicating `n_edges` edges: a power of
/// two, at least twice `n_edges` (so that linear probing always finds an
/// empty entry, and probes stay short) and at least [`MIN_TABLE_LEN`].
#[inline(always)]
pub const fn hash_table_len(n_edges: u64) -> u64 {
    let n = if n_edges == 0 { 1 } else { n_edges };
    let len = (2 * n).next_power_of_two();
    if len < MIN_TABLE_LEN {
        MIN_TABLE_LEN
    } else {
        len
    }
}

/// What a round's launches count, per round: the matching's merges and
/// parkable edges, and the holes its contraction made. The host keeps one
/// per round of a batch, consecutive.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundCounts {
    /// Pairs merged.
    pub n_merged: u64,
    /// Edges with an endpoint that can no longer merge at this threshold.
    pub n_parkable: u64,
    /// Holes made by the round's contraction.
    pub n_removed: u64,
}

/// The `u64`s of one [`RoundCounts`].
pub const ROUND_COUNTS_LEN: usize = 3;

const _: () = assert!(core::mem::size_of::<RoundCounts>() == ROUND_COUNTS_LEN * 8);

/// The parameters of one ParHAC round, passed to the round's kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundParams {
    /// Edge slots of the current graph.
    pub n_edges: u64,
    /// Edges scoring below this merge (waterz's float32 threshold, widened).
    pub threshold: f64,
    /// `1 + ε`: an edge is eligible when its mean times this reaches the
    /// best mean at both endpoints.
    pub factor: f64,
    /// The round's index since the start (salts the matching priority).
    pub round: u64,
    /// A tag unique to this round ([`round_tag`]): nodes that merge are
    /// marked with it, so that the marks need no clearing.
    pub tag: u32,
    /// Padding; zero.
    pub pad: u32,
}

impl RoundParams {
    /// Round `round` over `n_edges` slots at `threshold` with `epsilon`.
    pub fn new(n_edges: u64, threshold: f64, epsilon: f64, round: u64) -> Self {
        Self { n_edges, threshold, factor: 1.0 + epsilon, round, tag: round_tag(round), pad: 0 }
    }
}

/// The tag of round `round` (counted from 0): `round + 1`, so that the tag
/// 0 means "never merged".
#[inline(always)]
pub const fn round_tag(round: u64) -> u32 {
    (round + 1) as u32
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

/// The bits a node's best score is the minimum of, for an edge scoring
/// `score`: `Some` when the edge is below the threshold (a candidate),
/// else `None`.
#[inline(always)]
pub fn candidate_bits(score: f64, threshold: f64) -> Option<u64> {
    if score < threshold {
        Some(score.to_bits())
    } else {
        None
    }
}

/// The matching priority of edge `key` in round `round`: SplitMix64 of the
/// two, so that it is the same on every run and every device. It is free
/// of the score order, so that chains of similar edges match many pairs
/// per round; ties break towards the smaller key.
#[inline(always)]
pub fn edge_priority(key: EdgeKey, round: u64) -> u64 {
    let mut z = key.bits() ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The home slot of `key` in a hash table of `mask + 1` entries (a power
/// of two): the key's bits through SplitMix64's finalizer, masked.
#[inline(always)]
pub fn hash_slot(key: EdgeKey, mask: u64) -> u64 {
    let mut z = key.bits();
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & mask
}

/// At ε = 0, what a round does to node `x`, from best keys alone: `x`
/// merges exactly when its best key `best_x` ([`EdgeKey::EMPTY`]: no edge
/// below the threshold) is also the best key of its partner on that edge
/// (`partner_best`), and its region then takes the smaller id of the two.
/// Returns `(new id, merged)`; a node that merged may keep its id (the
/// smaller of its pair), and its edges still change.
#[inline(always)]
pub fn mutual_merge(x: u64, best_x: EdgeKey, partner_best: EdgeKey) -> (u64, bool) {
    if !best_x.is_empty() && partner_best == best_x {
        (x.min(best_x.partner(x)), true)
    } else {
        (x, false)
    }
}

/// What a contraction does with an edge slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contraction {
    /// Neither endpoint merged: the slot stays as it is.
    Unchanged,
    /// Both endpoints are now one region: the slot becomes a hole.
    Hole,
    /// The edge now joins other regions: the slot takes this key and meets
    /// its parallel edges in the hash table.
    Rekeyed(EdgeKey),
}

impl Contraction {
    /// The fate of an edge whose endpoints' regions are now `a` and `b`.
    #[inline(always)]
    pub fn between(a: u64, b: u64) -> Self {
        match EdgeKey::between(a, b) {
            Some(key) => Contraction::Rekeyed(key),
            None => Contraction::Hole,
        }
    }
}

/// What the fused ε = 0 round (`ph_match_contract`) does with one edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedSlot {
    /// The edge is the best of both endpoints: `v` merges into `u`.
    pub matched: bool,
    /// An endpoint has no edge below the threshold, so the edge can wait
    /// (parked) until the threshold's end.
    pub parkable: bool,
    /// The contraction's first step for the slot.
    pub contraction: Contraction,
}

/// The fused ε = 0 round for edge `key`, from the best keys of its
/// endpoints (`best_u`, `best_v`; [`EdgeKey::EMPTY`] for a node without an
/// edge below the threshold): whether it is matched and parkable, and the
/// endpoints' new ids ([`mutual_merge`]), which give its contraction.
/// `best_key_of(x)` reads node `x`'s best key; it is called only for the
/// partners of endpoints whose best edge is another edge.
#[inline(always)]
pub fn fused_slot(
    key: EdgeKey,
    best_u: EdgeKey,
    best_v: EdgeKey,
    mut best_key_of: impl FnMut(u64) -> EdgeKey,
) -> FusedSlot {
    let (u, v) = (key.u(), key.v());
    // A best key exists exactly for nodes with an edge below the
    // threshold, and is one of those edges.
    let matched = best_u == key && best_v == key;
    let parkable = best_u.is_empty() || best_v.is_empty();
    // The partner's best key is already at hand when the endpoint's best
    // is this edge.
    let mut new_id = |x: u64, best: EdgeKey| {
        let partner_best = if best.is_empty() {
            EdgeKey::EMPTY
        } else if best == key {
            if x == u {
                best_v
            } else {
                best_u
            }
        } else {
            best_key_of(best.partner(x))
        };
        mutual_merge(x, best, partner_best)
    };
    let (a, merged_u) = new_id(u, best_u);
    let (b, merged_v) = new_id(v, best_v);
    let contraction = if merged_u || merged_v { Contraction::between(a, b) } else { Contraction::Unchanged };
    FusedSlot { matched, parkable, contraction }
}

/// Which edges `ph_relabel_insert` inserts into the hash table.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rekeying {
    /// A round's contraction: the edges at a node tagged with this round
    /// get their endpoints' new ids (one step of the merge forest).
    RoundMerges = 0,
    /// A threshold's end: every edge at a node tagged since the given tag
    /// (the threshold's first round) is inserted with its key as it is.
    SinceTag = 1,
}

/// Whether `ph_best_score` first empties the hash-table entries that the
/// last contraction left (saving a launch of `ph_clear_table`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TableState {
    /// Every table entry is empty.
    Clean = 0,
    /// The entries named by `slot_of` are still in use.
    Pending = 1,
}

/// Where `ph_classify` learns which edges are parkable.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParkSource {
    /// From the endpoints' best scores (the last round's).
    BestScores = 0,
    /// From the flags the last round's matching recorded per slot.
    ParkFlags = 1,
}

/// Whether a kernel that copies edges translates their endpoints.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointMap {
    /// The endpoints stay as they are (the map pointer is not read).
    Identity = 0,
    /// Endpoint `x` becomes `map[x]`.
    Lookup = 1,
}

/// `ph_reset_endpoints`: `a[x] = a_value`, `b[x] = b_value` at both
/// endpoints `x` of every edge.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhResetEndpointsArgs {
    /// `n_slots` key bits.
    pub keys: *const u64,
    /// Slots.
    pub n_slots: u64,
    /// A per-node array.
    pub a: *mut u64,
    /// Its value.
    pub a_value: u64,
    /// Another per-node array.
    pub b: *mut u64,
    /// Its value.
    pub b_value: u64,
}

/// `ph_best_score`: every node's lowest candidate score bits.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhBestScoreArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// `params.n_edges` contact counts.
    pub counts: *const u64,
    /// `params.n_edges` fixed-point sums.
    pub sums: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per node: the minimum score bits.
    pub best_score: *mut u64,
    /// Whether the table entries named by `slot_of` are emptied first.
    pub table: TableState,
    /// Per slot: the table entry the last contraction used, or [`NO_SLOT`].
    pub slot_of: *const u32,
    /// The hash table's keys.
    pub table_keys: *mut u64,
    /// The hash table's representatives.
    pub table_rep: *mut u32,
}

/// `ph_best_key`: every node's smallest key among its best-scoring edges.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhBestKeyArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// `params.n_edges` contact counts.
    pub counts: *const u64,
    /// `params.n_edges` fixed-point sums.
    pub sums: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per node: the best score bits.
    pub best_score: *const u64,
    /// Per node: the minimum key bits.
    pub best_key: *mut u64,
}

/// `ph_match_mutual`: the ε = 0 matching (mutual best edges).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhMatchMutualArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// `params.n_edges` contact counts.
    pub counts: *const u64,
    /// `params.n_edges` fixed-point sums.
    pub sums: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per node: the best score bits.
    pub best_score: *const u64,
    /// Per node: the best key bits.
    pub best_key: *const u64,
    /// Per node: the merge forest.
    pub parent: *mut u32,
    /// Per node: the tag of the last round it merged in.
    pub touched: *mut u32,
    /// Per slot: 1 where matched.
    pub matched: *mut u32,
    /// Per slot: 1 where parkable.
    pub park_flags: *mut u32,
    /// The round's counts.
    pub counters: *mut RoundCounts,
}

/// `ph_best_mean`: the mean of every node's best edge (ε > 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhBestMeanArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// `params.n_edges` contact counts.
    pub counts: *const u64,
    /// `params.n_edges` fixed-point sums.
    pub sums: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per node: the best score bits.
    pub best_score: *const u64,
    /// Per node: the best key bits.
    pub best_key: *const u64,
    /// Per node: the best edge's mean.
    pub best_mean: *mut f64,
}

/// `ph_eligible`: the (1+ε)-heavy edges and every node's highest priority.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhEligibleArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// `params.n_edges` contact counts.
    pub counts: *const u64,
    /// `params.n_edges` fixed-point sums.
    pub sums: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per node: the best score bits.
    pub best_score: *const u64,
    /// Per node: the best edge's mean.
    pub best_mean: *const f64,
    /// Per slot: 1 where eligible.
    pub eligible: *mut u32,
    /// Per node: the maximum priority of its eligible edges.
    pub best_priority: *mut u64,
    /// The round's counts.
    pub counters: *mut RoundCounts,
}

/// `ph_preferred_key`: every node's smallest key among its eligible edges
/// of the highest priority.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhPreferredKeyArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per slot: the eligibility flags.
    pub eligible: *const u32,
    /// Per node: the highest priority.
    pub best_priority: *const u64,
    /// Per node: the minimum key bits.
    pub preferred_key: *mut u64,
}

/// `ph_match_preferred`: the ε > 0 matching (edges both endpoints prefer).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhMatchPreferredArgs {
    /// `params.n_edges` key bits.
    pub keys: *const u64,
    /// The round.
    pub params: RoundParams,
    /// Per slot: the eligibility flags.
    pub eligible: *const u32,
    /// Per node: the highest priority.
    pub best_priority: *const u64,
    /// Per node: the preferred key bits.
    pub preferred_key: *const u64,
    /// Per node: the merge forest.
    pub parent: *mut u32,
    /// Per node: the tag of the last round it merged in.
    pub touched: *mut u32,
    /// Per slot: 1 where matched.
    pub matched: *mut u32,
    /// The round's counts.
    pub counters: *mut RoundCounts,
}

/// `ph_history`: the merges of the matched slots, appended to the history.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhHistoryArgs {
    /// The slots' key bits.
    pub keys: *const u64,
    /// The slots' contact counts.
    pub counts: *const u64,
    /// The slots' fixed-point sums.
    pub sums: *const u64,
    /// `n` matched slot indices.
    pub indices: *const u32,
    /// How many.
    pub n: u64,
    /// Whether the endpoints go through `original`.
    pub endpoints: EndpointMap,
    /// Per node: its original id (read only with [`EndpointMap::Lookup`]).
    pub original: *const u32,
    /// Where the merges start in the history.
    pub offset: u64,
    /// The history's key bits (`b` merged into `a`).
    pub out_keys: *mut u64,
    /// The history's scores.
    pub out_scores: *mut f64,
}

/// `ph_relabel_insert`: the contraction's first step (new keys into the
/// hash table).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhRelabelInsertArgs {
    /// `n_slots` key bits, updated.
    pub keys: *mut u64,
    /// Slots.
    pub n_slots: u64,
    /// The round's tag ([`Rekeying::RoundMerges`]) or the threshold's first
    /// round's ([`Rekeying::SinceTag`]).
    pub tag: u32,
    /// Which edges are inserted.
    pub rekeying: Rekeying,
    /// Per node: the merge forest.
    pub parent: *const u32,
    /// Per node: the tag of the last round it merged in.
    pub touched: *const u32,
    /// The hash table's keys (`mask + 1`, empty).
    pub table_keys: *mut u64,
    /// The hash table's representatives (`mask + 1`, [`NO_SLOT`]).
    pub table_rep: *mut u32,
    /// The table's length minus one (a power of two minus one).
    pub mask: u64,
    /// Per slot: the table entry used, or [`NO_SLOT`].
    pub slot_of: *mut u32,
    /// The round's counts.
    pub counters: *mut RoundCounts,
}

/// `ph_match_contract`: the fused ε = 0 matching and contraction's first
/// step.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhMatchContractArgs {
    /// `params.n_edges` key bits, updated.
    pub keys: *mut u64,
    /// The round.
    pub params: RoundParams,
    /// Per node: the best key bits.
    pub best_key: *const u64,
    /// Per node: the merge forest.
    pub parent: *mut u32,
    /// Per node: the tag of the last round it merged in.
    pub touched: *mut u32,
    /// Per slot: 1 where parkable.
    pub park_flags: *mut u32,
    /// The hash table's keys (`mask + 1`, empty).
    pub table_keys: *mut u64,
    /// The hash table's representatives (`mask + 1`, [`NO_SLOT`]).
    pub table_rep: *mut u32,
    /// The table's length minus one (a power of two minus one).
    pub mask: u64,
    /// Per slot: the table entry used, or [`NO_SLOT`].
    pub slot_of: *mut u32,
    /// The round's counts.
    pub counters: *mut RoundCounts,
}

/// `ph_resolve`: the contraction's second step (parallel edges combine).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhResolveArgs {
    /// `n_slots` key bits, updated.
    pub keys: *mut u64,
    /// `n_slots` contact counts, updated.
    pub counts: *mut u64,
    /// `n_slots` fixed-point sums, updated.
    pub sums: *mut u64,
    /// Slots.
    pub n_slots: u64,
    /// The hash table's representatives.
    pub table_rep: *const u32,
    /// Per slot: the table entry the first step used, or [`NO_SLOT`].
    pub slot_of: *const u32,
    /// Nodes whose best score and key are reset (0: none).
    pub n_reset: u64,
    /// Per node: best score bits, reset to [`NO_SCORE`].
    pub best_score: *mut u64,
    /// Per node: best key bits, reset to [`EdgeKey::EMPTY`].
    pub best_key: *mut u64,
    /// The round's counts.
    pub counters: *mut RoundCounts,
}

/// `ph_clear_table`: empties the table entries a contraction used.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhClearTableArgs {
    /// Per slot: the table entry used, or [`NO_SLOT`].
    pub slot_of: *const u32,
    /// Slots.
    pub n_slots: u64,
    /// The hash table's keys.
    pub table_keys: *mut u64,
    /// The hash table's representatives.
    pub table_rep: *mut u32,
}

/// `ph_classify`: active and parked flags for a compaction.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhClassifyArgs {
    /// `n_slots` key bits.
    pub keys: *const u64,
    /// Slots.
    pub n_slots: u64,
    /// Where parkable edges are read from.
    pub source: ParkSource,
    /// Per slot: the last round's park flags ([`ParkSource::ParkFlags`]).
    pub park_flags: *const u32,
    /// Per node: the last round's best scores ([`ParkSource::BestScores`]).
    pub best_score: *const u64,
    /// Per slot: 1 for edges that stay.
    pub active: *mut u32,
    /// Per slot: 1 for edges that are parked.
    pub parked: *mut u32,
}

/// `ph_gather_edges`: copies indexed edges, optionally relabelled.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhGatherEdgesArgs {
    /// The source's key bits.
    pub keys: *const u64,
    /// The source's contact counts.
    pub counts: *const u64,
    /// The source's fixed-point sums.
    pub sums: *const u64,
    /// `n` slot indices of edges in the source.
    pub indices: *const u32,
    /// How many.
    pub n: u64,
    /// Whether the endpoints go through `map`.
    pub endpoints: EndpointMap,
    /// Per node: its new id (read only with [`EndpointMap::Lookup`]).
    pub map: *const u32,
    /// Where the copies start in the outputs.
    pub offset: u64,
    /// The destination's key bits.
    pub out_keys: *mut u64,
    /// The destination's contact counts.
    pub out_counts: *mut u64,
    /// The destination's fixed-point sums.
    pub out_sums: *mut u64,
    /// One u32: edges the map turned into self-loops (none expected).
    pub n_bad: *mut u32,
}

/// `ph_live_flags`: 1 for the slots that hold edges.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhLiveFlagsArgs {
    /// `n_slots` key bits.
    pub keys: *const u64,
    /// Slots.
    pub n_slots: u64,
    /// `n_slots` flags.
    pub flags: *mut u32,
}

/// `ph_find_roots`: every node's region (the root of its merge tree).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhFindRootsArgs {
    /// `n_nodes` parents forming a forest.
    pub parent: *const u32,
    /// Nodes.
    pub n_nodes: u64,
    /// `n_nodes` roots.
    pub roots: *mut u32,
}

/// `ph_segment`: each voxel's fragment replaced by its region.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhSegmentArgs {
    /// `n` fragment labels.
    pub labels: *const u32,
    /// Voxels.
    pub n: u64,
    /// `n_roots` regions, one per fragment.
    pub roots: *const u32,
    /// How many.
    pub n_roots: u64,
    /// `n` regions.
    pub out: *mut u32,
    /// One zeroed u32: labels at or above `n_roots`.
    pub n_bad: *mut u32,
}

/// `ph_segment_u64`: each voxel's fragment replaced by its region's u64 id.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhSegmentU64Args {
    /// `n` fragment labels.
    pub labels: *const u32,
    /// Voxels.
    pub n: u64,
    /// `n_table` ids, one per fragment.
    pub table: *const u64,
    /// How many.
    pub n_table: u64,
    /// `n` ids.
    pub out: *mut u64,
    /// One zeroed u32: labels at or above `n_table`.
    pub n_bad: *mut u32,
}

/// `ph_mark_endpoints`: flags the nodes with an edge.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhMarkEndpointsArgs {
    /// `n_slots` key bits.
    pub keys: *const u64,
    /// Slots.
    pub n_slots: u64,
    /// Per node: zeroed flags.
    pub flags: *mut u32,
}

/// `ph_scatter_ids`: the inverse of a renumbering.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhScatterIdsArgs {
    /// `m` distinct old ids, in order.
    pub old_of_new: *const u32,
    /// How many.
    pub m: u64,
    /// Per old id: its new id.
    pub new_of_old: *mut u32,
}

/// `ph_translate_keys`: renumbers the slots' endpoints in place.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhTranslateKeysArgs {
    /// `n_slots` key bits, updated.
    pub keys: *mut u64,
    /// Slots.
    pub n_slots: u64,
    /// Per old id: its new id.
    pub new_of_old: *const u32,
}

/// `ph_commit`: copies a renumbering's merges into the state of all nodes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhCommitArgs {
    /// `n` parents in renumbered ids.
    pub parent: *const u32,
    /// `n` merge tags.
    pub touched: *const u32,
    /// `n` original ids.
    pub original: *const u32,
    /// Renumbered nodes.
    pub n: u64,
    /// Per original node: the merge forest.
    pub all_parent: *mut u32,
    /// Per original node: merge tags.
    pub all_touched: *mut u32,
}

impl_kernel_args!(
    PhResetEndpointsArgs => PhResetEndpoints { keys, n_slots, a, a_value, b, b_value },
    PhBestScoreArgs => PhBestScore { keys, counts, sums, params, best_score, table, slot_of, table_keys, table_rep },
    PhBestKeyArgs => PhBestKey { keys, counts, sums, params, best_score, best_key },
    PhMatchMutualArgs => PhMatchMutual { keys, counts, sums, params, best_score, best_key, parent, touched, matched, park_flags, counters },
    PhBestMeanArgs => PhBestMean { keys, counts, sums, params, best_score, best_key, best_mean },
    PhEligibleArgs => PhEligible { keys, counts, sums, params, best_score, best_mean, eligible, best_priority, counters },
    PhPreferredKeyArgs => PhPreferredKey { keys, params, eligible, best_priority, preferred_key },
    PhMatchPreferredArgs => PhMatchPreferred { keys, params, eligible, best_priority, preferred_key, parent, touched, matched, counters },
    PhHistoryArgs => PhHistory { keys, counts, sums, indices, n, endpoints, original, offset, out_keys, out_scores },
    PhRelabelInsertArgs => PhRelabelInsert { keys, n_slots, tag, rekeying, parent, touched, table_keys, table_rep, mask, slot_of, counters },
    PhMatchContractArgs => PhMatchContract { keys, params, best_key, parent, touched, park_flags, table_keys, table_rep, mask, slot_of, counters },
    PhResolveArgs => PhResolve { keys, counts, sums, n_slots, table_rep, slot_of, n_reset, best_score, best_key, counters },
    PhClearTableArgs => PhClearTable { slot_of, n_slots, table_keys, table_rep },
    PhClassifyArgs => PhClassify { keys, n_slots, source, park_flags, best_score, active, parked },
    PhGatherEdgesArgs => PhGatherEdges { keys, counts, sums, indices, n, endpoints, map, offset, out_keys, out_counts, out_sums, n_bad },
    PhLiveFlagsArgs => PhLiveFlags { keys, n_slots, flags },
    PhFindRootsArgs => PhFindRoots { parent, n_nodes, roots },
    PhSegmentArgs => PhSegment { labels, n, roots, n_roots, out, n_bad },
    PhSegmentU64Args => PhSegmentU64 { labels, n, table, n_table, out, n_bad },
    PhMarkEndpointsArgs => PhMarkEndpoints { keys, n_slots, flags },
    PhScatterIdsArgs => PhScatterIds { old_of_new, m, new_of_old },
    PhTranslateKeysArgs => PhTranslateKeys { keys, n_slots, new_of_old },
    PhCommitArgs => PhCommit { parent, touched, original, n, all_parent, all_touched },
);

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
        assert_eq!(candidate_bits(0.5, 0.6), Some(0.5f64.to_bits()));
        assert_eq!(candidate_bits(0.6, 0.6), None);
    }

    #[test]
    fn contraction_drops_self_loops_and_orders_endpoints() {
        assert_eq!(Contraction::between(3, 3), Contraction::Hole);
        assert_eq!(Contraction::between(5, 2), Contraction::Rekeyed(EdgeKey::new(2, 5)));
        assert_eq!(Contraction::between(2, 5), Contraction::Rekeyed(EdgeKey::new(2, 5)));
    }

    #[test]
    fn hash_slots_stay_in_the_table_and_spread() {
        let mask = 1023;
        let slots: std::collections::BTreeSet<u64> =
            (1..=512u64).map(|u| hash_slot(EdgeKey::new(u, u + 1), mask)).collect();
        assert!(slots.iter().all(|&s| s <= mask));
        assert!(slots.len() > 350, "{} distinct slots for 512 keys", slots.len());
    }

    #[test]
    fn hash_tables_hold_twice_the_edges() {
        assert_eq!(hash_table_len(0), MIN_TABLE_LEN);
        assert_eq!(hash_table_len(512), 1024);
        assert_eq!(hash_table_len(513), 2048);
        for n in [1u64, 1000, 1 << 20, (1 << 20) + 1] {
            let len = hash_table_len(n);
            assert!(len.is_power_of_two() && len >= 2 * n && len >= MIN_TABLE_LEN);
        }
    }

    #[test]
    fn mutual_best_keys_merge_into_the_smaller_id() {
        let k = EdgeKey::new(3, 8);
        // Mutual: both ends merge, into 3; 3 keeps its id but merged.
        assert_eq!(mutual_merge(8, k, k), (3, true));
        assert_eq!(mutual_merge(3, k, k), (3, true));
        // Not mutual, or no edge below the threshold: no merge.
        assert_eq!(mutual_merge(8, k, EdgeKey::new(3, 5)), (8, false));
        assert_eq!(mutual_merge(8, EdgeKey::EMPTY, EdgeKey::EMPTY), (8, false));
    }

    #[test]
    fn fused_slots_match_park_and_rekey() {
        let none = |_: u64| -> EdgeKey { panic!("no lookup expected") };
        // A mutual best edge: matched, and inside the merged pair, a hole.
        let k = EdgeKey::new(3, 8);
        let s = fused_slot(k, k, k, none);
        assert_eq!(s, FusedSlot { matched: true, parkable: false, contraction: Contraction::Hole });
        // Edge (8, 9) where 8 merges into 3 (their mutual best) and 9 has
        // no candidate: the edge becomes (3, 9) and is parkable.
        let best = |x: u64| if x == 3 { k } else { panic!("unexpected lookup of {x}") };
        let s = fused_slot(EdgeKey::new(8, 9), k, EdgeKey::EMPTY, best);
        assert_eq!(
            s,
            FusedSlot { matched: false, parkable: true, contraction: Contraction::Rekeyed(EdgeKey::new(3, 9)) }
        );
        // Neither endpoint merges: unchanged.
        let other = EdgeKey::new(1, 4);
        let s = fused_slot(EdgeKey::new(4, 5), other, EdgeKey::new(5, 6), |_| EdgeKey::EMPTY);
        assert_eq!(s, FusedSlot { matched: false, parkable: false, contraction: Contraction::Unchanged });
    }

    #[test]
    fn priorities_depend_on_the_round() {
        let k = EdgeKey::new(1, 2);
        assert_ne!(edge_priority(k, 0), edge_priority(k, 1));
        assert_eq!(edge_priority(k, 7), edge_priority(k, 7));
    }

    #[test]
    fn round_params_tag_rounds_from_one() {
        let p = RoundParams::new(10, 0.5, 0.25, 4);
        assert_eq!((p.n_edges, p.threshold, p.factor, p.round, p.tag, p.pad), (10, 0.5, 1.25, 4, 5, 0));
    }
}
