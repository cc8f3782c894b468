//! Grey-scale morphology with `scipy.ndimage`'s semantics, on arrays of
//! rank 1 to 8: the CPU path of the morphology operators, and the exact
//! Euclidean distance transform ([`distance`]) on the CPU and ([`gpu`]) the
//! GPU.
//!
//! Everything is a minimum or maximum filter over a structuring element,
//! resolved once on the host ([`Footprint::resolve`]) into flat input
//! offsets and weights, as scipy resolves it:
//! - the element is a box of `size`, a boolean `footprint`, or a non-flat
//!   `structure` (whose values are subtracted for erosion, added for
//!   dilation, over the footprint `structure` is defined on);
//! - element index `c` along an axis of extent `n` reads the input at
//!   `i + c - (n / 2 + origin)`;
//! - [`grey_dilation`] is the maximum filter with the element reflected and
//!   the origin negated (one less for even extents), as scipy defines it.
//!
//! Outside the array values come from the [`Mode`]: `reflect`
//! (`d c b a | a b c d | d c b a`), `mirror` (`d c b | a b c d | c b a`),
//! `nearest`, `wrap` and `constant` (`cval`).
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod distance;
pub mod gpu;
#[allow(unsafe_code)]
mod launch;

pub use distance::distance_transform_edt;

use ndarray::{ArrayD, ArrayViewD, IxDyn};
use rayon::prelude::*;

/// What can go wrong: input the operators do not take, or the GPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MorphologyError {
    /// Input the operators do not take.
    #[error("invalid input: {0}")]
    Input(String),
    /// The GPU failed.
    #[error("GPU: {0}")]
    Gpu(#[from] gpu_waterz_runtime::RuntimeError),
}

/// The kind of a [`MorphologyError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MorphologyErrorKind {
    /// Bad input.
    Input,
    /// The GPU.
    Gpu,
}

impl MorphologyError {
    /// What went wrong, for callers that branch on it.
    pub fn kind(&self) -> MorphologyErrorKind {
        match self {
            Self::Input(_) => MorphologyErrorKind::Input,
            Self::Gpu(_) => MorphologyErrorKind::Gpu,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = MorphologyError> = std::result::Result<T, E>;

fn invalid(reason: impl Into<String>) -> MorphologyError {
    MorphologyError::Input(reason.into())
}

/// The largest rank taken (scipy's limit for these filters is 32; the
/// morphology issue asks for 1 to 8).
pub const MAX_RANK: usize = 8;

/// How values outside the array are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `d c b a | a b c d | d c b a` (scipy's default).
    Reflect,
    /// `k k k k | a b c d | k k k k` with `k = cval`.
    Constant,
    /// `a a a a | a b c d | d d d d`.
    Nearest,
    /// `d c b | a b c d | c b a`.
    Mirror,
    /// `a b c d | a b c d | a b c d`.
    Wrap,
}

impl std::str::FromStr for Mode {
    type Err = MorphologyError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "reflect" => Mode::Reflect,
            "constant" => Mode::Constant,
            "nearest" => Mode::Nearest,
            "mirror" => Mode::Mirror,
            "wrap" => Mode::Wrap,
            other => {
                return Err(invalid(format!("mode must be reflect, constant, nearest, mirror or wrap, not {other:?}")))
            }
        })
    }
}

impl Mode {
    /// The kernels' code for this mode (`gpu_waterz_abi::morphology`).
    pub fn code(self) -> u32 {
        use gpu_waterz_abi::morphology::*;
        match self {
            Mode::Reflect => MODE_REFLECT,
            Mode::Constant => MODE_CONSTANT,
            Mode::Nearest => MODE_NEAREST,
            Mode::Mirror => MODE_MIRROR,
            Mode::Wrap => MODE_WRAP,
        }
    }
}

/// Where index `j` of an axis of extent `n` reads, or `None` for `cval`
/// (the rule the kernels run, `gpu_waterz_abi::morphology::boundary_index`).
fn boundary(j: isize, n: usize, mode: Mode) -> Option<usize> {
    gpu_waterz_abi::morphology::boundary_index(j as i64, n as i64, mode.code()).map(|j| j as usize)
}

/// A structuring element resolved for a filter: the coordinate offsets of
/// its active elements (relative to the output position, origin applied)
/// and their weights (0 for a flat element).
#[derive(Clone, Debug, PartialEq)]
pub struct Footprint {
    offsets: Vec<Vec<isize>>,
    weights: Vec<f64>,
}

/// How the structuring element is given, as scipy's arguments.
#[derive(Clone, Debug)]
pub enum Element<'a> {
    /// A box of this extent per axis (`size`).
    Size(Vec<usize>),
    /// The active elements (`footprint`).
    Footprint(ArrayViewD<'a, bool>),
    /// Values over a footprint (`structure`; with `footprint` the active
    /// ones, else all of them).
    Structure {
        /// The values.
        structure: ArrayViewD<'a, f64>,
        /// The active elements (all when `None`).
        footprint: Option<ArrayViewD<'a, bool>>,
    },
}

impl Footprint {
    /// Resolves `element` for an array of rank `rank` with `origin` (one per
    /// axis), for erosion (`dilation` false) or dilation (the element
    /// reflected, the origin negated and, for even extents, one less).
    pub fn resolve(rank: usize, element: &Element<'_>, origin: &[isize], dilation: bool) -> Result<Self> {
        let (shape, active, values): (Vec<usize>, Vec<bool>, Vec<f64>) = match element {
            Element::Size(size) => {
                let n: usize = size.iter().product();
                (size.clone(), vec![true; n], vec![0.0; n])
            }
            Element::Footprint(f) => {
                let f = f.as_standard_layout();
                (f.shape().to_vec(), f.iter().copied().collect(), vec![0.0; f.len()])
            }
            Element::Structure { structure, footprint } => {
                let s = structure.as_standard_layout();
                let active = match footprint {
                    Some(f) => {
                        if f.shape() != s.shape() {
                            return Err(invalid(format!(
                                "footprint {:?} and structure {:?} differ in shape",
                                f.shape(),
                                s.shape()
                            )));
                        }
                        f.as_standard_layout().iter().copied().collect()
                    }
                    None => vec![true; s.len()],
                };
                (s.shape().to_vec(), active, s.iter().copied().collect())
            }
        };
        if shape.len() != rank {
            return Err(invalid(format!("the structuring element has rank {}, the input {rank}", shape.len())));
        }
        if shape.contains(&0) {
            return Err(invalid(format!("the structuring element's shape {shape:?} has an empty axis")));
        }
        if values.iter().any(|v| !v.is_finite()) {
            return Err(invalid("structure values must be finite"));
        }
        if origin.len() != rank {
            return Err(invalid(format!("origin needs {rank} values, not {}", origin.len())));
        }
        for (axis, (&o, &n)) in origin.iter().zip(&shape).enumerate() {
            let half = (n / 2) as isize;
            if o < -half || o > (n as isize - 1) - half {
                return Err(invalid(format!("origin {o} on axis {axis} lies outside an element of extent {n}")));
            }
        }
        let mut offsets = Vec::new();
        let mut weights = Vec::new();
        for (flat, (&on, &value)) in active.iter().zip(&values).enumerate() {
            if !on {
                continue;
            }
            // The element's coordinates, C order.
            let mut rest = flat;
            let mut coords = vec![0usize; rank];
            for axis in (0..rank).rev() {
                coords[axis] = rest % shape[axis];
                rest /= shape[axis];
            }
            let offset: Vec<isize> = (0..rank)
                .map(|axis| {
                    let n = shape[axis] as isize;
                    if dilation {
                        // Reflected element, origin -o (one less for even n).
                        let reflected = n - 1 - coords[axis] as isize;
                        let o = -origin[axis] - if n % 2 == 0 { 1 } else { 0 };
                        reflected - (n / 2 + o)
                    } else {
                        coords[axis] as isize - (n / 2 + origin[axis])
                    }
                })
                .collect();
            offsets.push(offset);
            weights.push(value);
        }
        Ok(Self { offsets, weights })
    }

    /// The number of active elements.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether no element is active.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The rank of the element.
    pub fn rank(&self) -> usize {
        self.offsets.first().map_or(0, Vec::len)
    }

    /// Each active element's offset per axis.
    pub fn offsets(&self) -> &[Vec<isize>] {
        &self.offsets
    }

    /// Each active element's weight (0 for a flat element).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Whether every weight is 0.
    pub fn is_flat(&self) -> bool {
        self.weights.iter().all(|&w| w == 0.0)
    }

    /// The least and largest offset along each axis.
    pub fn extrema(&self) -> Vec<(isize, isize)> {
        (0..self.rank())
            .map(|axis| {
                let along = self.offsets.iter().map(|o| o[axis]);
                (along.clone().min().unwrap_or(0), along.max().unwrap_or(0))
            })
            .collect()
    }

    /// Whether the element is flat and fills the box of its extrema (then
    /// the filter is separable: one pass per axis).
    pub fn is_box(&self) -> bool {
        let cells: usize = self.extrema().iter().map(|&(lo, hi)| (hi - lo + 1) as usize).product();
        self.is_flat() && !self.is_empty() && cells == self.len()
    }

    /// The centre of a flat "plus": elements that are exactly the union,
    /// over the axes, of the whole segment through one point along that
    /// axis from the least to the largest offset ([`Self::extrema`]), as
    /// scipy's `generate_binary_structure(rank, 1)` is (moved by an origin,
    /// with arms of any length). `None` for other elements.
    pub fn plus_centre(&self) -> Option<Vec<isize>> {
        if !self.is_flat() || self.is_empty() {
            return None;
        }
        let extrema = self.extrema();
        let members: std::collections::HashSet<&[isize]> = self.offsets.iter().map(|o| o.as_slice()).collect();
        self.offsets.iter().find_map(|centre| {
            let mut expected = std::collections::HashSet::new();
            for (axis, &(lo, hi)) in extrema.iter().enumerate() {
                for k in lo..=hi {
                    let mut point = centre.clone();
                    point[axis] = k;
                    expected.insert(point);
                }
            }
            (expected.len() == members.len() && expected.iter().all(|p| members.contains(p.as_slice())))
                .then(|| centre.clone())
        })
    }

    /// Whether the element is exactly scipy's `generate_binary_structure(
    /// rank, 1)` about offset 0: the centre and its face neighbours, flat
    /// (then `binary_fill_holes` is the background's face-connected
    /// components that do not reach the border).
    pub fn is_unit_cross(&self) -> bool {
        let rank = self.rank();
        let members: std::collections::HashSet<&[isize]> = self.offsets.iter().map(|o| o.as_slice()).collect();
        let mut cross = vec![vec![0isize; rank]];
        for axis in 0..rank {
            for step in [-1, 1] {
                let mut offset = vec![0isize; rank];
                offset[axis] = step;
                cross.push(offset);
            }
        }
        self.is_flat()
            && members.len() == cross.len()
            && self.offsets.len() == cross.len()
            && cross.iter().all(|o| members.contains(o.as_slice()))
    }

    /// Whether an element at offset 0 on every axis is active (then
    /// repeated binary erosion or dilation only shrinks or grows).
    pub fn has_centre(&self) -> bool {
        self.offsets.iter().any(|o| o.iter().all(|&v| v == 0))
    }
}

/// Checks an input array: rank 1 to [`MAX_RANK`], no empty axis.
pub fn check_input(shape: &[usize]) -> Result<()> {
    if shape.is_empty() || shape.len() > MAX_RANK {
        return Err(invalid(format!("arrays of rank 1 to {MAX_RANK} are taken, not rank {}", shape.len())));
    }
    Ok(())
}

/// The minimum (erosion) or maximum (dilation) over `footprint` of
/// `input - weight` (minimum) or `input + weight` (maximum) at every
/// position; with no active element, scipy's identity (the largest value
/// for a minimum, the smallest for a maximum).
fn min_or_max(input: ArrayViewD<'_, f64>, footprint: &Footprint, mode: Mode, cval: f64, maximum: bool) -> ArrayD<f64> {
    let shape = input.shape().to_vec();
    let rank = shape.len();
    let input = input.as_standard_layout();
    let values = input.as_slice().expect("standard layout");
    let strides: Vec<usize> = (0..rank).map(|a| shape[a + 1..].iter().product()).collect();
    let total: usize = shape.iter().product();
    let out: Vec<f64> = (0..total)
        .into_par_iter()
        .map(|flat| {
            let mut rest = flat;
            let mut position = [0isize; MAX_RANK];
            for axis in 0..rank {
                position[axis] = (rest / strides[axis]) as isize;
                rest %= strides[axis];
            }
            let mut best = if maximum { f64::NEG_INFINITY } else { f64::INFINITY };
            for (offset, &weight) in footprint.offsets.iter().zip(&footprint.weights) {
                // The value at the offset, or cval where the mode leaves the
                // array (constant).
                let value = (0..rank)
                    .try_fold(0, |index, axis| {
                        boundary(position[axis] + offset[axis], shape[axis], mode).map(|j| index + j * strides[axis])
                    })
                    .map_or(cval, |index| values[index]);
                let v = if maximum { value + weight } else { value - weight };
                if (maximum && v > best) || (!maximum && v < best) {
                    best = v;
                }
            }
            best
        })
        .collect();
    ArrayD::from_shape_vec(IxDyn(&shape), out).expect("one value per element")
}

/// The arguments every grey-scale operator takes.
#[derive(Clone, Debug)]
pub struct Grey<'a> {
    /// The structuring element.
    pub element: Element<'a>,
    /// The boundary mode.
    pub mode: Mode,
    /// The value outside the array for [`Mode::Constant`].
    pub cval: f64,
    /// The origin, one per axis.
    pub origin: Vec<isize>,
}

impl Grey<'_> {
    fn footprint(&self, rank: usize, dilation: bool) -> Result<Footprint> {
        Footprint::resolve(rank, &self.element, &self.origin, dilation)
    }
}

/// `scipy.ndimage.grey_erosion`.
pub fn grey_erosion(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    check_input(input.shape())?;
    let fp = args.footprint(input.ndim(), false)?;
    Ok(min_or_max(input, &fp, args.mode, args.cval, false))
}

/// `scipy.ndimage.grey_dilation`.
pub fn grey_dilation(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    check_input(input.shape())?;
    let fp = args.footprint(input.ndim(), true)?;
    Ok(min_or_max(input, &fp, args.mode, args.cval, true))
}

/// `scipy.ndimage.grey_opening`: the dilation of the erosion.
pub fn grey_opening(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    let eroded = grey_erosion(input, args)?;
    grey_dilation(eroded.view(), args)
}

/// `scipy.ndimage.grey_closing`: the erosion of the dilation.
pub fn grey_closing(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    let dilated = grey_dilation(input, args)?;
    grey_erosion(dilated.view(), args)
}

/// `scipy.ndimage.morphological_gradient`: dilation minus erosion.
pub fn morphological_gradient(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    Ok(grey_dilation(input.view(), args)? - grey_erosion(input, args)?)
}

/// `scipy.ndimage.morphological_laplace`: dilation plus erosion minus
/// the input, minus the input again (scipy's order: each step rounded).
pub fn morphological_laplace(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    let mut sum = grey_dilation(input.view(), args)? + grey_erosion(input.view(), args)?;
    sum -= &input;
    sum -= &input;
    Ok(sum)
}

/// `scipy.ndimage.white_tophat`: the input minus its opening.
pub fn white_tophat(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    let opened = grey_opening(input.view(), args)?;
    Ok(&input - &opened)
}

/// `scipy.ndimage.black_tophat`: the closing minus the input.
pub fn black_tophat(input: ArrayViewD<'_, f64>, args: &Grey<'_>) -> Result<ArrayD<f64>> {
    let closed = grey_closing(input.view(), args)?;
    Ok(closed - &input)
}

/// `scipy.ndimage.generate_binary_structure(rank, connectivity)`: the
/// elements of a 3^rank box within `connectivity` steps of the centre
/// (1: the cross; `rank` or more: the full box).
pub fn generate_binary_structure(rank: usize, connectivity: usize) -> Result<ArrayD<bool>> {
    check_input(&vec![3; rank])?;
    Ok(ArrayD::from_shape_fn(IxDyn(&vec![3; rank]), |at| {
        (0..rank).filter(|&axis| at[axis] != 1).count() <= connectivity
    }))
}

/// The arguments of the binary operators, as scipy's.
#[derive(Clone, Debug)]
pub struct Binary<'a> {
    /// The structuring element (scipy's default is
    /// [`generate_binary_structure`]`(rank, 1)`).
    pub structure: ArrayViewD<'a, bool>,
    /// Steps; below 1, until nothing changes (the structure must then hold
    /// its centre, moved by the origin, so that steps cannot cycle).
    pub iterations: i64,
    /// Where false, the input is kept.
    pub mask: Option<ArrayViewD<'a, bool>>,
    /// The value outside the array.
    pub border_value: bool,
    /// The origin, one per axis.
    pub origin: Vec<isize>,
}

impl Binary<'_> {
    /// The element resolved for erosion or (reflected) dilation of an
    /// array of `shape`, after scipy's checks.
    pub fn footprint(&self, shape: &[usize], dilation: bool) -> Result<Footprint> {
        check_input(shape)?;
        if !self.structure.iter().any(|&v| v) {
            return Err(invalid("the structure must not be empty"));
        }
        if let Some(mask) = &self.mask {
            if mask.shape() != shape {
                return Err(invalid(format!("the mask {:?} and the input {shape:?} differ in shape", mask.shape())));
            }
        }
        let footprint =
            Footprint::resolve(shape.len(), &Element::Footprint(self.structure.view()), &self.origin, dilation)?;
        if self.iterations < 1 && !footprint.has_centre() {
            return Err(invalid(
                "iterations < 1 needs a structure whose centre (moved by the origin) is set: others may cycle for \
                 ever; give a number of iterations",
            ));
        }
        Ok(footprint)
    }
}

/// Binary erosion (`dilation` false) or dilation steps of `input`, as
/// `args` says: each step the grey-scale filter of the 0/1 values with the
/// border as `cval`, the input kept outside the mask.
fn binary_steps(input: ArrayViewD<'_, bool>, args: &Binary<'_>, dilation: bool) -> Result<ArrayD<bool>> {
    let footprint = args.footprint(input.shape(), dilation)?;
    let cval = args.border_value as u8 as f64;
    let mut current = input.mapv(|v| v as u8 as f64);
    let mut steps = 0i64;
    loop {
        let mut next = min_or_max(current.view(), &footprint, Mode::Constant, cval, dilation);
        if let Some(mask) = &args.mask {
            ndarray::Zip::from(&mut next).and(mask).and(&current).for_each(|n, &m, &c| {
                if !m {
                    *n = c;
                }
            });
        }
        steps += 1;
        let stable = next == current;
        current = next;
        if (args.iterations >= 1 && steps >= args.iterations) || (args.iterations < 1 && stable) {
            return Ok(current.mapv(|v| v != 0.0));
        }
    }
}

/// `scipy.ndimage.binary_erosion`.
pub fn binary_erosion(input: ArrayViewD<'_, bool>, args: &Binary<'_>) -> Result<ArrayD<bool>> {
    binary_steps(input, args, false)
}

/// `scipy.ndimage.binary_dilation`.
pub fn binary_dilation(input: ArrayViewD<'_, bool>, args: &Binary<'_>) -> Result<ArrayD<bool>> {
    binary_steps(input, args, true)
}

/// `scipy.ndimage.binary_opening`: the erosions, then as many dilations.
pub fn binary_opening(input: ArrayViewD<'_, bool>, args: &Binary<'_>) -> Result<ArrayD<bool>> {
    binary_dilation(binary_erosion(input, args)?.view(), args)
}

/// `scipy.ndimage.binary_closing`: the dilations, then as many erosions.
pub fn binary_closing(input: ArrayViewD<'_, bool>, args: &Binary<'_>) -> Result<ArrayD<bool>> {
    binary_erosion(binary_dilation(input, args)?.view(), args)
}

/// `scipy.ndimage.binary_fill_holes`: the background not connected to the
/// border through `structure` (with `origin`) set to true.
pub fn binary_fill_holes(
    input: ArrayViewD<'_, bool>,
    structure: ArrayViewD<'_, bool>,
    origin: &[isize],
) -> Result<ArrayD<bool>> {
    let mask = input.mapv(|v| !v);
    let seed = ArrayD::from_elem(input.raw_dim(), false);
    let args = Binary {
        structure: structure.view(),
        iterations: -1,
        mask: Some(mask.view()),
        border_value: true,
        origin: origin.to_vec(),
    };
    Ok(binary_dilation(seed.view(), &args)?.mapv(|v| !v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_crosses_are_scipys_default_structure_only() {
        for rank in 1..=3usize {
            let cross = ArrayD::from_shape_fn(IxDyn(&vec![3; rank]), |i| (0..rank).filter(|&a| i[a] != 1).count() <= 1);
            let element = Element::Footprint(cross.view());
            let resolved = Footprint::resolve(rank, &element, &vec![0; rank], true).unwrap();
            assert!(resolved.is_unit_cross(), "rank {rank}");
            let moved = Footprint::resolve(rank, &element, &vec![1; rank], true).unwrap();
            assert!(!moved.is_unit_cross(), "rank {rank} moved");
            let full = ArrayD::from_elem(IxDyn(&vec![3; rank]), true);
            let full = Footprint::resolve(rank, &Element::Footprint(full.view()), &vec![0; rank], true).unwrap();
            assert_eq!(full.is_unit_cross(), rank == 1, "rank {rank} full");
        }
    }

    #[test]
    fn plus_centres_are_found_only_for_pluses() {
        let cross = generate_binary_structure(3, 1).unwrap();
        let resolve = |e: ArrayViewD<'_, bool>, origin: &[isize]| {
            Footprint::resolve(e.ndim(), &Element::Footprint(e), origin, false).unwrap()
        };
        assert_eq!(resolve(cross.view(), &[0, 0, 0]).plus_centre(), Some(vec![0, 0, 0]));
        assert_eq!(resolve(cross.view(), &[1, 0, -1]).plus_centre().map(|c| c.len()), Some(3));
        let full = generate_binary_structure(3, 3).unwrap();
        assert_eq!(resolve(full.view(), &[0, 0, 0]).plus_centre(), None);
        let edges = generate_binary_structure(3, 2).unwrap();
        assert_eq!(resolve(edges.view(), &[0, 0, 0]).plus_centre(), None);
        // Arms of other lengths, off centre: a plus; one cell missing: not.
        let mut long = ArrayD::from_elem(IxDyn(&[5, 3, 4]), false);
        for z in 0..5 {
            long[[z, 1, 2]] = true;
        }
        for y in 0..3 {
            long[[3, y, 2]] = true;
        }
        for x in 0..4 {
            long[[3, 1, x]] = true;
        }
        let plus = resolve(long.view(), &[0, 0, 0]);
        let centre = plus.plus_centre().expect("a plus");
        assert!(plus.offsets().contains(&centre));
        long[[0, 1, 2]] = false;
        long[[4, 1, 2]] = false;
        long[[1, 1, 2]] = false;
        assert!(resolve(long.view(), &[0, 0, 0]).plus_centre().is_some(), "shorter arms are still a plus");
        long[[1, 1, 2]] = true;
        long[[2, 1, 2]] = false;
        assert_eq!(resolve(long.view(), &[0, 0, 0]).plus_centre(), None, "a gap in an arm");
    }

    #[test]
    fn binary_operators_on_small_cases() {
        let cross = generate_binary_structure(2, 1).unwrap();
        assert_eq!(cross.iter().filter(|&&v| v).count(), 5);
        assert_eq!(generate_binary_structure(3, 3).unwrap().iter().filter(|&&v| v).count(), 27);
        let line = ndarray::arr1(&[false, true, true, true, false]).into_dyn();
        let structure = generate_binary_structure(1, 1).unwrap();
        let args =
            Binary { structure: structure.view(), iterations: 1, mask: None, border_value: false, origin: vec![0] };
        assert_eq!(
            binary_erosion(line.view(), &args).unwrap(),
            ndarray::arr1(&[false, false, true, false, false]).into_dyn()
        );
        assert_eq!(binary_dilation(line.view(), &args).unwrap(), ndarray::arr1(&[true; 5]).into_dyn());
        let until = Binary { iterations: 0, ..args.clone() };
        assert_eq!(binary_erosion(line.view(), &until).unwrap(), ndarray::arr1(&[false; 5]).into_dyn());
        // A ring with a hole: filled; a gap to the border: not.
        let mut ring = ndarray::Array2::from_elem((5, 5), false);
        for (y, x) in [(1, 1), (1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2), (3, 3)] {
            ring[(y, x)] = true;
        }
        let filled = binary_fill_holes(ring.view().into_dyn(), cross.view(), &[0, 0]).unwrap();
        assert!(filled[[2, 2]] && !filled[[0, 0]]);
        ring[(1, 2)] = false;
        let open = binary_fill_holes(ring.view().into_dyn(), cross.view(), &[0, 0]).unwrap();
        assert!(!open[[2, 2]]);
        // Until stable with a structure lacking its centre is refused.
        let ends = ndarray::arr1(&[true, false, true]).into_dyn();
        let bad = Binary { structure: ends.view(), iterations: 0, mask: None, border_value: false, origin: vec![0] };
        assert!(binary_dilation(line.view(), &bad).is_err());
    }

    #[test]
    fn footprints_know_boxes_extrema_and_centres() {
        let size = Footprint::resolve(2, &Element::Size(vec![3, 2]), &[0, 0], false).unwrap();
        assert!(size.is_box() && size.has_centre());
        assert_eq!(size.extrema(), vec![(-1, 1), (-1, 0)]);
        // Dilation reflects the element: an even extent's window moves.
        let dilation = Footprint::resolve(2, &Element::Size(vec![3, 2]), &[0, 0], true).unwrap();
        assert_eq!(dilation.extrema(), vec![(-1, 1), (0, 1)]);
        let cross = ndarray::arr2(&[[false, true, false], [true, true, true], [false, true, false]]).into_dyn();
        let cross = Footprint::resolve(2, &Element::Footprint(cross.view()), &[0, 0], false).unwrap();
        assert!(!cross.is_box() && cross.has_centre() && cross.is_flat());
        let ring = ndarray::arr2(&[[true, true, true], [true, false, true], [true, true, true]]).into_dyn();
        let ring = Footprint::resolve(2, &Element::Footprint(ring.view()), &[0, 0], false).unwrap();
        assert!(!ring.has_centre() && !ring.is_box());
        assert_eq!(ring.extrema(), vec![(-1, 1), (-1, 1)]);
        // The origin moves the element: now its centre is the bottom middle.
        let ring = ndarray::arr2(&[[true, true, true], [true, false, true], [true, true, true]]).into_dyn();
        let moved = Footprint::resolve(2, &Element::Footprint(ring.view()), &[1, 0], false).unwrap();
        assert!(moved.has_centre());
        assert_eq!(moved.extrema(), vec![(-2, 0), (-1, 1)]);
        let weights = ndarray::arr1(&[0.0, 1.0, 0.0]).into_dyn();
        let weighted =
            Footprint::resolve(1, &Element::Structure { structure: weights.view(), footprint: None }, &[0], false)
                .unwrap();
        assert!(!weighted.is_flat() && !weighted.is_box());
    }
}
