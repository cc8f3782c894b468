//! Exact, order-independent contact statistics: the arithmetic that the GPU
//! region graph and ParHAC use, and that the CPU reference uses in its
//! `Exact` mode, so that "GPU equals reference" is an equality of integers.
//!
//! An affinity `a` in `[0, 1]` becomes the fixed-point integer
//! `round(a * 2^FIXED_POINT_BITS)`. Sums of such integers do not depend on
//! the order of the additions, so reruns and reorderings give the same bits.

/// Fractional bits of the fixed-point affinity. With 32 bits an edge can
/// hold up to `2^32` contacts before its `u64` sum could overflow.
pub const FIXED_POINT_BITS: u32 = 32;

/// `2^FIXED_POINT_BITS`, as a float.
pub const FIXED_POINT_ONE: f64 = (1u64 << FIXED_POINT_BITS) as f64;

/// The fixed-point value of an affinity in `[0, 1]`, rounded to nearest.
///
/// Values outside `[0, 1]` are clamped; NaN maps to 0. Callers validate
/// their input before it gets here.
#[inline(always)]
pub fn affinity_to_fixed(affinity: f32) -> u64 {
    let a = affinity as f64;
    if !(a > 0.0) {
        return 0;
    }
    if a >= 1.0 {
        return 1u64 << FIXED_POINT_BITS;
    }
    // a * 2^32 is exact in f64 (a has 24 significant bits); adding 0.5 and
    // truncating rounds half up, which is exact too.
    (a * FIXED_POINT_ONE + 0.5) as u64
}

/// The statistics of one region-graph edge, accumulated exactly.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContactStats {
    /// Number of voxel faces shared by the two fragments.
    pub contact_count: u64,
    /// Sum of the fixed-point affinities of those faces.
    pub affinity_sum: u64,
}

impl ContactStats {
    /// The statistics of a single face.
    #[inline(always)]
    pub fn of_face(affinity: f32) -> Self {
        Self { contact_count: 1, affinity_sum: affinity_to_fixed(affinity) }
    }

    /// The statistics of the union of two sets of faces.
    #[inline(always)]
    pub fn merged(self, other: Self) -> Self {
        Self {
            contact_count: self.contact_count + other.contact_count,
            affinity_sum: self.affinity_sum + other.affinity_sum,
        }
    }

    /// The mean affinity of the faces, in `[0, 1]` (0 for no faces).
    #[inline(always)]
    pub fn mean(&self) -> f64 {
        if self.contact_count == 0 {
            return 0.0;
        }
        self.affinity_sum as f64 / (self.contact_count as f64 * FIXED_POINT_ONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_endpoints_and_rounding() {
        assert_eq!(affinity_to_fixed(0.0), 0);
        assert_eq!(affinity_to_fixed(-0.5), 0);
        assert_eq!(affinity_to_fixed(f32::NAN), 0);
        assert_eq!(affinity_to_fixed(1.0), 1 << 32);
        assert_eq!(affinity_to_fixed(0.5), 1 << 31);
        // 1/255 in f32 is 0.003921568859368563; times 2^32 is exactly 16843010.
        assert_eq!(affinity_to_fixed(1.0 / 255.0), 16843010);
        // Halves round up: 2^-33 becomes 1.
        assert_eq!(affinity_to_fixed(2f32.powi(-33)), 1);
        assert_eq!(affinity_to_fixed(2f32.powi(-34)), 0);
    }

    #[test]
    fn merging_is_exact_and_commutative() {
        let a = ContactStats::of_face(0.25).merged(ContactStats::of_face(0.75));
        let b = ContactStats::of_face(0.75).merged(ContactStats::of_face(0.25));
        assert_eq!(a, b);
        assert_eq!(a.mean(), 0.5);
        assert_eq!(ContactStats::default().mean(), 0.0);
    }
}
