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
/// fixed-point affinity sum; the contact count sits above them. A warp's
/// entry sums at most 32 faces of at most `2^32` each, below `2^37`.
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

/// Dynamic shared memory of `rg_emit_entries` per thread of the block: one
/// u64 per lane, its leader's running sum.
pub const RG_EMIT_SHARED_BYTES_PER_THREAD: u32 = 8;

/// `rg_count_entries`: counts the warp-aggregated face entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RgCountEntriesArgs {
    /// One u32 label per voxel of `dims`.
    pub labels: *const u32,
    /// The volume.
    pub dims: Dims3,
    /// One u64, zeroed before the launch; receives the number of entries.
    pub counter: *mut u64,
}

/// `rg_emit_entries`: writes the warp-aggregated face entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RgEmitEntriesArgs {
    /// One u32 label per voxel of `dims`.
    pub labels: *const u32,
    /// `3 n` affinities of type `kind` (channel-major).
    pub affs: *const u8,
    /// The type of `affs`.
    pub kind: AffinityKind,
    /// The volume.
    pub dims: Dims3,
    /// One u64, zeroed before the launch: the entries reserved so far.
    pub counter: *mut u64,
    /// One u64 per counted entry: the [`EdgeKey`] bits.
    pub keys: *mut u64,
    /// One u64 per counted entry: the packed value ([`pack_count_sum`]).
    pub values: *mut u64,
}

impl_kernel_args!(
    RgCountEntriesArgs => RgCountEntries { labels, dims, counter },
    RgEmitEntriesArgs => RgEmitEntries { labels, affs, kind, dims, counter, keys, values },
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
}
