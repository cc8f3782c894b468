//! The region graph's edge keys, its packed face entries and the argument
//! structs of its kernels (`rg_*` in `kernels-rs/src/graph.rs`).

use crate::Dims3;

/// The key of region-graph edge `(u, v)`, `u < v < 2^32 - 1`: the bits
/// `u << 32 | v`.
///
/// Keys order edges by their endpoints, `(u, v)` lexicographically, which
/// is waterz's edge order and breaks score ties. On the device, keys are
/// stored as their `u64` bits ([`EdgeKey::bits`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EdgeKey(u64);

impl EdgeKey {
    /// The key of no edge: a hole in ParHAC's edge slots, an empty slot of
    /// its hash table, and the best key of a node without a candidate edge.
    /// No edge has it, because node ids are below `2^32 - 1`.
    pub const EMPTY: EdgeKey = EdgeKey(u64::MAX);

    /// The key of edge `(u, v)`; `u < v < 2^32` for a real edge.
    #[inline(always)]
    pub const fn new(u: u64, v: u64) -> Self {
        Self((u << 32) | v)
    }

    /// The key of the edge between `a` and `b` in either order, or `None`
    /// when they are the same node (a contraction's self-loop).
    #[inline(always)]
    pub const fn between(a: u64, b: u64) -> Option<Self> {
        if a == b {
            None
        } else if a < b {
            Some(Self::new(a, b))
        } else {
            Some(Self::new(b, a))
        }
    }

    /// The key whose bits are `bits` (as stored in device memory).
    #[inline(always)]
    pub const fn from_bits(bits: u64) -> Self {
        Self(bits)
    }

    /// The key's bits, `u << 32 | v`.
    #[inline(always)]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// The smaller endpoint.
    #[inline(always)]
    pub const fn u(self) -> u64 {
        self.0 >> 32
    }

    /// The larger endpoint.
    #[inline(always)]
    pub const fn v(self) -> u64 {
        self.0 & 0xFFFF_FFFF
    }

    /// Both endpoints, `[u, v]`.
    #[inline(always)]
    pub const fn endpoints(self) -> [u64; 2] {
        [self.u(), self.v()]
    }

    /// Whether this is [`EdgeKey::EMPTY`].
    #[inline(always)]
    pub const fn is_empty(self) -> bool {
        self.0 == Self::EMPTY.0
    }

    /// The other endpoint, seen from endpoint `x`.
    #[inline(always)]
    pub const fn partner(self, x: u64) -> u64 {
        if self.u() == x {
            self.v()
        } else {
            self.u()
        }
    }
}

/// Bits of a packed face entry ([`pack_count_sum`]) that hold the
/// fixed-point affinity sum; the contact count sits above them (24 bits:
/// a tile's entry counts at most `3 RG_TILE_VOXELS` faces). A tile's sum
/// for one fragment pair may exceed these bits; [`rg_entry_pieces`] splits
/// it into entries whose sums fit.
pub const PACKED_SUM_BITS: u32 = 40;

/// A face entry's value: `count << PACKED_SUM_BITS | sum`.
#[inline(always)]
pub const fn pack_count_sum(count: u64, sum: u64) -> u64 {
    (count << PACKED_SUM_BITS) | sum
}

/// The contact count of a packed face entry.
#[inline(always)]
pub const fn packed_count(packed: u64) -> u64 {
    packed >> PACKED_SUM_BITS
}

/// The fixed-point affinity sum of a packed face entry.
#[inline(always)]
pub const fn packed_sum(packed: u64) -> u64 {
    packed & ((1u64 << PACKED_SUM_BITS) - 1)
}

/// The element type of an affinity buffer.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AffinityKind {
    /// float32 affinities in `[0, 1]`.
    F32 = 0,
    /// uint8 affinities, `value / 255`.
    U8 = 1,
}

/// Voxels per region-graph tile: a block aggregates the boundary faces of
/// one tile at a time in a shared-memory table, one entry per fragment
/// pair. At most `3 RG_TILE_VOXELS` faces fall in a tile, so an entry's
/// count fits the 24 bits above [`PACKED_SUM_BITS`].
pub const RG_TILE_VOXELS: u64 = 4096;

/// The x extent of every region-graph tile: one warp per row of 32 voxels.
pub const RG_TILE_X: u64 = 32;

/// Threads per block of `rg_tile_entries`.
pub const RG_TILE_THREADS: u32 = 256;

// Every thread of a block walks the same number of a tile's voxels, and
// blocks are whole warps: `rg_tile_entries` sums runs of equal faces
// across a warp's lanes.
const _: () = assert!(RG_TILE_VOXELS.is_multiple_of(RG_TILE_THREADS as u64) && RG_TILE_THREADS.is_multiple_of(32));

/// Slots of a block's fragment-pair table (a power of two). A tile of
/// real fragments holds tens to hundreds of pairs; a face that finds the
/// table full becomes an entry of its own.
pub const RG_TABLE_SLOTS: u32 = 1024;

/// Dynamic shared memory of `rg_tile_entries`: per table slot a u64 key, a
/// u64 sum and a u32 count, and two u64 words for the block's entry
/// reservation.
pub const RG_TILE_SHARED_BYTES: u32 = RG_TABLE_SLOTS * (8 + 8 + 4) + 2 * 8;

/// The sum of every entry but the first that [`rg_entry_pieces`] splits a
/// table slot into.
pub const PACKED_SUM_PIECE: u64 = 1 << (PACKED_SUM_BITS - 1);

/// The entries a table slot with fixed-point sum `sum` becomes: the first
/// carries the count and `sum % PACKED_SUM_PIECE`, each other one a count
/// of 0 and [`PACKED_SUM_PIECE`], so every entry's sum fits
/// [`PACKED_SUM_BITS`] and the entries add up to the slot's statistics.
#[inline(always)]
pub const fn rg_entry_pieces(sum: u64) -> u64 {
    sum / PACKED_SUM_PIECE + 1
}

/// Entry `piece` (below [`rg_entry_pieces`]) of a table slot with `count`
/// faces and fixed-point sum `sum`, packed ([`pack_count_sum`]).
#[inline(always)]
pub const fn rg_entry_piece(count: u64, sum: u64, piece: u64) -> u64 {
    if piece == 0 {
        pack_count_sum(count, sum % PACKED_SUM_PIECE)
    } else {
        pack_count_sum(0, PACKED_SUM_PIECE)
    }
}

/// The tile of the region graph's kernel for a volume of `dims`: powers of
/// two `(tz, ty, RG_TILE_X)` with `tz * ty * RG_TILE_X = RG_TILE_VOXELS`,
/// `tz` at most 8 and at most the volume's depth (rounded up to a power
/// of two), so 2D volumes get flat tiles.
pub const fn rg_tile_shape(dims: Dims3) -> Dims3 {
    let rows = RG_TILE_VOXELS / RG_TILE_X;
    let mut tz = 1;
    while tz < 8 && tz < dims.z {
        tz *= 2;
    }
    Dims3::new(tz, rows / tz, RG_TILE_X)
}

/// The first table slot that `key` (edge-key bits) probes: a
/// multiplicative hash, so neighbouring pairs spread over the table.
#[inline(always)]
pub const fn rg_table_slot(key: u64) -> u32 {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - RG_TABLE_SLOTS.trailing_zeros())) as u32
}

/// `rg_tile_entries`: the boundary faces aggregated per tile into one
/// entry per fragment pair.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RgTileEntriesArgs {
    /// One u32 label per voxel of `dims`.
    pub labels: *const u32,
    /// `3 n` affinities of type `kind` (channel-major).
    pub affs: *const u8,
    /// The type of `affs`.
    pub kind: AffinityKind,
    /// The volume.
    pub dims: Dims3,
    /// The tile ([`rg_tile_shape`]): powers of two, `tile.x` = [`RG_TILE_X`].
    pub tile: Dims3,
    /// The entries `keys` and `values` hold.
    pub capacity: u64,
    /// One u64, zeroed before the launch: receives the number of entries,
    /// including those beyond `capacity`, which are not written.
    pub counter: *mut u64,
    /// `capacity` u64s: the [`EdgeKey`] bits of each entry.
    pub keys: *mut u64,
    /// `capacity` u64s: each entry's packed value ([`pack_count_sum`]).
    pub values: *mut u64,
}

impl_kernel_args!(
    RgTileEntriesArgs => RgTileEntries { labels, affs, kind, dims, tile, capacity, counter, keys, values },
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_pack_and_order_endpoints() {
        let k = EdgeKey::new(3, 8);
        assert_eq!(k.bits(), 3 << 32 | 8);
        assert_eq!((k.u(), k.v(), k.endpoints()), (3, 8, [3, 8]));
        assert_eq!((k.partner(3), k.partner(8)), (8, 3));
        assert_eq!(EdgeKey::from_bits(k.bits()), k);
        assert!(EdgeKey::new(2, 9) < k && k < EdgeKey::new(3, 9) && k < EdgeKey::EMPTY);
        assert_eq!(EdgeKey::between(8, 3), Some(k));
        assert_eq!(EdgeKey::between(3, 8), Some(k));
        assert_eq!(EdgeKey::between(4, 4), None);
        assert!(EdgeKey::EMPTY.is_empty() && !k.is_empty());
        let largest = EdgeKey::new(u32::MAX as u64 - 2, u32::MAX as u64 - 1);
        assert!(!largest.is_empty());
    }

    #[test]
    fn packed_entries_round_trip() {
        let packed = pack_count_sum(32, 32 << 32);
        assert_eq!((packed_count(packed), packed_sum(packed)), (32, 32 << 32));
    }

    #[test]
    fn table_slots_split_into_entries_that_add_up() {
        // The largest slot of a tile: every face of every voxel, affinity 1.
        let most = 3 * RG_TILE_VOXELS;
        for (count, sum) in
            [(1, 0), (1, 1 << 32), (7, PACKED_SUM_PIECE - 1), (300, PACKED_SUM_PIECE), (most, most << 32)]
        {
            let pieces = rg_entry_pieces(sum);
            let entries = (0..pieces).map(|p| rg_entry_piece(count, sum, p));
            assert!(packed_count(rg_entry_piece(count, sum, 0)) == count && count < 1 << (64 - PACKED_SUM_BITS));
            assert_eq!(entries.clone().map(packed_count).sum::<u64>(), count);
            assert_eq!(entries.clone().map(packed_sum).sum::<u64>(), sum, "count {count}, sum {sum}");
            assert!(entries.clone().all(|e| pack_count_sum(packed_count(e), packed_sum(e)) == e));
            // Never more entries than faces.
            assert!(pieces <= count.max(1));
        }
    }

    #[test]
    fn tiles_are_powers_of_two_of_the_tile_size() {
        for dims in [Dims3::new(1, 1, 1), Dims3::new(1, 512, 512), Dims3::new(3, 9, 9), Dims3::new(512, 512, 512)] {
            let t = rg_tile_shape(dims);
            assert_eq!(t.z * t.y * t.x, RG_TILE_VOXELS, "{dims:?}");
            assert!(t.z.is_power_of_two() && t.y.is_power_of_two() && t.x == RG_TILE_X);
            assert!(t.z <= 8 && (t.z == 1 || t.z / 2 < dims.z));
        }
        assert_eq!(rg_tile_shape(Dims3::new(1, 64, 64)), Dims3::new(1, 128, 32));
        assert_eq!(rg_tile_shape(Dims3::new(512, 512, 512)), Dims3::new(8, 16, 32));
        assert!((0..10_000u64).all(|k| rg_table_slot(k << 32 | (k + 1)) < RG_TABLE_SLOTS));
    }
}
