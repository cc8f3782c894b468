//! Validated affinity graphs in waterz's layout.

use crate::{CoreError, Dims3, Result};
use ndarray::{ArrayView4, Axis};
use rayon::prelude::*;

/// The values of an affinity graph: float32, or uint8 meaning `k / 255`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AffinityValues<'a> {
    /// Affinities: finite, normally in `[0, 1]` (see
    /// [`AffinityGraph::n_outside_unit_interval`]).
    F32(ArrayView4<'a, f32>),
    /// Quantized affinities: `k` stands for `k / 255`.
    U8(ArrayView4<'a, u8>),
}

/// An affinity graph `(3, z, y, x)`: channel `c` holds, for every voxel, the
/// affinity of the face to its predecessor along axis `c` (z, y, x). Values
/// at index 0 along their axis are outside the volume and never read.
///
/// Construction checks the shape (exactly 3 channels, no empty axis) and,
/// for float input, that every value is finite (no NaN, no infinity), and
/// counts the values outside `[0, 1]`, which waterz takes as they are.
#[derive(Clone, Debug)]
pub struct AffinityGraph<'a> {
    values: AffinityValues<'a>,
    dims: Dims3,
    n_outside_unit_interval: u64,
}

/// The float32 value of a quantized affinity, `k / 255` rounded as numpy's
/// `affs.astype(np.float32) / 255` rounds it.
#[inline(always)]
pub fn u8_affinity(k: u8) -> f32 {
    k as f32 / 255.0
}

fn dims_of(shape: &[usize]) -> Result<Dims3> {
    if shape.len() != 4 || shape[0] != 3 {
        return Err(CoreError::AffinityShape { shape: shape.to_vec() });
    }
    if shape.contains(&0) {
        return Err(CoreError::EmptyVolume { shape: shape.to_vec() });
    }
    Ok(Dims3::new(shape[1] as u64, shape[2] as u64, shape[3] as u64))
}

impl<'a> AffinityGraph<'a> {
    /// Wraps float32 affinities after checking shape and values.
    pub fn from_f32(view: ArrayView4<'a, f32>) -> Result<Self> {
        let dims = dims_of(view.shape())?;
        let n_outside_unit_interval = check_values(&view)?;
        Ok(Self { values: AffinityValues::F32(view), dims, n_outside_unit_interval })
    }

    /// Wraps uint8 affinities (`k / 255`) after checking the shape.
    pub fn from_u8(view: ArrayView4<'a, u8>) -> Result<Self> {
        let dims = dims_of(view.shape())?;
        Ok(Self { values: AffinityValues::U8(view), dims, n_outside_unit_interval: 0 })
    }

    /// The volume's extent.
    pub fn dims(&self) -> Dims3 {
        self.dims
    }

    /// How many values lie outside `[0, 1]`: waterz takes them as they are
    /// (and so does the CPU reference in waterz's arithmetic); exact
    /// integer statistics clamp them to `[0, 1]`.
    pub fn n_outside_unit_interval(&self) -> u64 {
        self.n_outside_unit_interval
    }

    /// The values as given.
    pub fn values(&self) -> &AffinityValues<'a> {
        &self.values
    }

    /// The number of voxels.
    pub fn n_voxels(&self) -> u64 {
        self.dims.z * self.dims.y * self.dims.x
    }

    /// The affinity of channel `c` at voxel `(z, y, x)`, as float32.
    #[inline]
    pub fn get(&self, c: usize, z: usize, y: usize, x: usize) -> f32 {
        match &self.values {
            AffinityValues::F32(v) => v[[c, z, y, x]],
            AffinityValues::U8(v) => u8_affinity(v[[c, z, y, x]]),
        }
    }

    /// All values as one C-ordered float32 vector `(3, z, y, x)`.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match &self.values {
            AffinityValues::F32(v) => match v.as_slice() {
                Some(s) => s.to_vec(),
                None => v.iter().copied().collect(),
            },
            AffinityValues::U8(v) => v.iter().map(|&k| u8_affinity(k)).collect(),
        }
    }
}

/// Affinities in waterz's layout from an "inside" probability map `q`
/// (high inside cells): `aff[c][v] = min(q[v], q[v - e_c])`, and 0 for the
/// faces at index 0 along their axis. For a boundary map `p`, pass `1 - p`.
pub fn from_inside_probability(q: &ndarray::Array3<f32>) -> ndarray::Array4<f32> {
    let (zd, yd, xd) = q.dim();
    let q = q.as_standard_layout();
    let q = q.as_slice().expect("a standard layout");
    let (section, strides) = (yd * xd, [yd * xd, xd, 1]);
    let mut out = vec![0f32; 3 * zd * section];
    // One section of one channel per task: each value depends only on `q`.
    out.par_chunks_mut(section.max(1)).enumerate().for_each(|(k, out)| {
        let (c, z) = (k / zd, k % zd);
        for y in 0..yd {
            for x in 0..xd {
                if [z, y, x][c] != 0 {
                    let i = z * section + y * xd + x;
                    out[y * xd + x] = q[i].min(q[i - strides[c]]);
                }
            }
        }
    });
    ndarray::Array4::from_shape_vec((3, zd, yd, xd), out).expect("the values fill the shape")
}

/// A section's check: its first value that is not finite (y, x, value),
/// and its finite values outside `[0, 1]` before it.
type SectionCheck = (Option<(usize, usize, f32)>, u64);

/// Fails on the first NaN or infinite value (in C order); returns how many
/// values lie outside `[0, 1]` (finite, which waterz takes as they are).
/// One pass over the values, a section of one channel at one z per task.
fn check_values(view: &ArrayView4<'_, f32>) -> Result<u64> {
    let depth = view.shape()[1];
    let sections: Vec<SectionCheck> = (0..view.shape()[0] * depth)
        .into_par_iter()
        .map(|k| {
            let section = view.index_axis(Axis(0), k / depth);
            let section = section.index_axis(Axis(0), k % depth);
            // The rare cases (outside [0, 1], not finite) are counted again
            // with positions, only for a section that has them; NaN fails
            // both comparisons of the common case.
            let usual = |value: f32| (0.0..=1.0).contains(&value);
            let all_usual = match section.as_slice() {
                Some(values) => values.iter().fold(true, |all, &v| all & usual(v)),
                None => section.iter().all(|&v| usual(v)),
            };
            if all_usual {
                return (None, 0);
            }
            let mut outside = 0u64;
            for ((y, x), &value) in section.indexed_iter() {
                if !usual(value) {
                    if !value.is_finite() {
                        return (Some((y, x, value)), outside);
                    }
                    outside += 1;
                }
            }
            (None, outside)
        })
        .collect();
    if let Some((k, &(Some((y, x, value)), _))) = sections.iter().enumerate().find(|(_, s)| s.0.is_some()) {
        let what = if value.is_nan() { "NaN" } else { "infinite" };
        return Err(CoreError::AffinityValue { value, what, channel: k / depth, z: k % depth, y, x });
    }
    Ok(sections.iter().map(|s| s.1).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array4;

    #[test]
    fn rejects_wrong_channels_and_empty() {
        let a = Array4::<f32>::zeros((2, 3, 3, 3));
        let e = AffinityGraph::from_f32(a.view()).unwrap_err();
        assert!(e.to_string().contains("(3, z, y, x)"), "{e}");
        let a = Array4::<f32>::zeros((3, 0, 3, 3));
        let e = AffinityGraph::from_f32(a.view()).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn rejects_nan_and_infinity_with_position_and_counts_values_outside_0_1() {
        let mut a = Array4::<f32>::zeros((3, 2, 3, 4));
        a[[1, 1, 2, 3]] = f32::NAN;
        let e = AffinityGraph::from_f32(a.view()).unwrap_err().to_string();
        assert!(e.contains("NaN") && e.contains("channel 1") && e.contains("z=1, y=2, x=3"), "{e}");
        a[[1, 1, 2, 3]] = f32::NEG_INFINITY;
        let e = AffinityGraph::from_f32(a.view()).unwrap_err().to_string();
        assert!(e.contains("infinite") && e.contains("channel 1"), "{e}");
        // Finite values outside [0, 1] are waterz's input too: counted.
        a[[1, 1, 2, 3]] = 1.0001676;
        a[[0, 0, 0, 0]] = -0.5;
        a[[2, 1, 1, 1]] = -0.0;
        assert_eq!(AffinityGraph::from_f32(a.view()).unwrap().n_outside_unit_interval(), 2);
        // Several bad values: the first in C order is reported, also for a
        // view that is not contiguous (every other x of a wider array).
        let mut wide = Array4::<f32>::from_elem((4, 3, 3, 8), 0.5);
        wide[[2, 2, 0, 0]] = f32::INFINITY;
        wide[[1, 2, 1, 6]] = f32::NAN;
        wide[[1, 2, 2, 2]] = f32::NAN;
        wide[[0, 1, 0, 1]] = f32::NAN; // an odd x: outside the view
        wide[[0, 0, 0, 2]] = 7.0;
        fn every_other_x(a: &Array4<f32>) -> ArrayView4<'_, f32> {
            a.slice_axis(Axis(0), ndarray::Slice::from(..3)).slice_axis_move(Axis(3), ndarray::Slice::new(0, None, 2))
        }
        let e = AffinityGraph::from_f32(every_other_x(&wide)).unwrap_err().to_string();
        assert!(e.contains("NaN") && e.contains("channel 1") && e.contains("z=2, y=1, x=3"), "{e}");
        wide[[1, 2, 1, 6]] = 0.25;
        wide[[1, 2, 2, 2]] = 0.25;
        wide[[2, 2, 0, 0]] = 1.5;
        assert_eq!(AffinityGraph::from_f32(every_other_x(&wide)).unwrap().n_outside_unit_interval(), 2);
    }

    #[test]
    fn affinities_from_an_inside_map() {
        let q = ndarray::Array3::from_shape_vec((1, 2, 2), vec![0.9, 0.2, 0.5, 0.7]).unwrap();
        let a = from_inside_probability(&q);
        assert_eq!(a[[2, 0, 0, 1]], 0.2); // min(q[0,0,1], q[0,0,0])
        assert_eq!(a[[1, 0, 1, 1]], 0.2); // min(q[0,1,1], q[0,0,1])
        assert_eq!(a[[2, 0, 1, 0]], 0.0); // x = 0: outside
        assert_eq!(a[[0, 0, 1, 1]], 0.0); // z = 0: outside
    }

    #[test]
    fn u8_means_k_over_255() {
        let mut a = Array4::<u8>::zeros((3, 1, 1, 2));
        a[[2, 0, 0, 1]] = 255;
        a[[1, 0, 0, 1]] = 51;
        let g = AffinityGraph::from_u8(a.view()).unwrap();
        assert_eq!(g.get(2, 0, 0, 1), 1.0);
        assert_eq!(g.get(1, 0, 0, 1), 0.2);
        assert_eq!(g.to_f32_vec()[5], 1.0);
    }
}
