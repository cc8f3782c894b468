//! Parameters of the stages, validated once.

use crate::{CoreError, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Merge thresholds: finite, strictly ascending. Any finite value is
/// waterz's: merging continues while the best score is below the threshold,
/// so one below every score merges nothing and one above every score merges
/// every connected region.
///
/// waterz passes thresholds to its C++ as float32 and compares float32
/// scores with them; [`Thresholds::as_f32`] gives those values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds(Vec<f64>);

impl Thresholds {
    /// Validates thresholds in the order given: unsorted, duplicated or
    /// non-finite values are an error.
    pub fn new(thresholds: &[f64]) -> Result<Self> {
        let err = |reason: String| CoreError::Thresholds { thresholds: thresholds.to_vec(), reason };
        if thresholds.is_empty() {
            return Err(err("at least one threshold is needed".into()));
        }
        for &t in thresholds {
            if !t.is_finite() {
                return Err(err(format!("{t} is not a finite number")));
            }
        }
        for pair in thresholds.windows(2) {
            if pair[1] == pair[0] {
                return Err(err(format!("{} appears twice", pair[0])));
            }
            if pair[1] < pair[0] {
                return Err(err(format!("they must be ascending, but {} comes before {}", pair[0], pair[1])));
            }
        }
        if thresholds.windows(2).any(|p| p[0] as f32 == p[1] as f32) {
            return Err(err("two of them are equal in float32, waterz's precision".into()));
        }
        Ok(Self(thresholds.to_vec()))
    }

    /// The thresholds, ascending.
    pub fn values(&self) -> &[f64] {
        &self.0
    }

    /// The thresholds as waterz's C++ sees them (float32).
    pub fn as_f32(&self) -> Vec<f32> {
        self.0.iter().map(|&t| t as f32).collect()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: construction requires at least one.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Checks waterz's watershed thresholds: finite, in `[0, 1]`, `low < high`.
pub fn check_watershed_thresholds(low: f64, high: f64) -> Result<crate::WatershedParams> {
    let err = |reason| CoreError::WatershedThresholds { low, high, reason };
    if !low.is_finite() || !high.is_finite() {
        return Err(err("both must be finite numbers"));
    }
    if !(0.0..=1.0).contains(&low) || !(0.0..=1.0).contains(&high) {
        return Err(err("both must be in [0, 1]"));
    }
    if low >= high {
        return Err(err("aff_threshold_low must be smaller than aff_threshold_high"));
    }
    Ok(crate::WatershedParams { aff_threshold_low: low as f32, aff_threshold_high: high as f32 })
}

/// How edge statistics are accumulated and compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Arithmetic {
    /// waterz's own arithmetic, bit for bit: float32 running means, float32
    /// scores. The CPU reference in this mode reproduces stock waterz.
    #[default]
    Waterz,
    /// Exact, order-independent arithmetic, as the GPU computes: integer
    /// contact counts and fixed-point affinity sums (see
    /// `gpu_waterz_abi::stats`), scores in float64 from those integers.
    Exact,
}

/// An edge scoring function. Edges are merged while their score is below
/// the threshold; all of these are `1 - statistic`, as waterz's `OneMinus`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ScoringFunction {
    /// `OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>`, waterz's default.
    MeanAffinity,
    /// `OneMinus<MaxAffinity<RegionGraphType, ScoreValue>>`.
    MaxAffinity,
    /// `OneMinus<MinAffinity<RegionGraphType, ScoreValue>>`.
    MinAffinity,
    /// `OneMinus<HistogramQuantileAffinity<RegionGraphType, Q, ScoreValue, Bins, InitWithMax>>`.
    HistogramQuantile {
        /// The quantile, in percent (0 to 100).
        quantile: u32,
        /// The number of histogram bins over `[0, 1]`.
        bins: u32,
        /// Whether a new edge starts from its maximum affinity alone
        /// (waterz's default, `true`).
        init_with_max: bool,
    },
    /// `OneMinus<QuantileAffinity<RegionGraphType, Q, ScoreValue[, InitWithMax]>>`:
    /// the exact quantile of the face affinities (waterz's
    /// `VectorQuantileProvider`).
    Quantile {
        /// The quantile, in percent (0 to 100).
        quantile: u32,
        /// Whether a new edge starts from its maximum affinity alone
        /// (waterz's default, `true`).
        init_with_max: bool,
    },
    /// `OneMinus<MeanMaxKAffinity<RegionGraphType, K, ScoreValue>>`: the
    /// mean of the `k` largest face affinities.
    MeanMaxK {
        /// How many of the largest affinities (1 to 1024).
        k: u32,
    },
    /// Any other combination of waterz's statistics and operators
    /// (`crate::scoring`), e.g. its size control
    /// `Divide<Subtract<MaxSize<...>, MinSize<...>>, Add<MaxSize<...>, MinSize<...>>>`.
    Expression(Box<crate::scoring::ScoreExpr>),
}

const SUPPORTED: &str = "mean, max, min, quantile-<Q>[-<bins>][-noinit], exact-quantile-<Q>[-noinit], \
mean-max-<K>, or waterz's spellings OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>, \
OneMinus<MaxAffinity<...>>, OneMinus<MinAffinity<...>>, \
OneMinus<HistogramQuantileAffinity<RegionGraphType, Q, ScoreValue, Bins[, InitWithMax]>>, \
OneMinus<QuantileAffinity<RegionGraphType, Q, ScoreValue[, InitWithMax]>>, \
OneMinus<MeanMaxKAffinity<RegionGraphType, K, ScoreValue>>, and their combinations with ContactArea, \
MinSize, MaxSize, Constant<RegionGraphType, C> by OneMinus, Invert, Square, Add, Subtract, Multiply, Divide, Step";

/// waterz's canonical spelling: C++ whitespace folded, none around `<>,`.
fn normalize(s: &str) -> String {
    let folded: Vec<&str> = s.split_whitespace().collect();
    let mut out = folded.join(" ");
    for punct in ["<", ">", ","] {
        out = out.replace(&format!(" {punct}"), punct).replace(&format!("{punct} "), punct);
    }
    out
}

impl ScoringFunction {
    /// waterz's C++ spelling of this function.
    pub fn waterz_name(&self) -> String {
        match self {
            Self::MeanAffinity => "OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>".into(),
            Self::MaxAffinity => "OneMinus<MaxAffinity<RegionGraphType, ScoreValue>>".into(),
            Self::MinAffinity => "OneMinus<MinAffinity<RegionGraphType, ScoreValue>>".into(),
            Self::HistogramQuantile { quantile, bins, init_with_max } => format!(
                "OneMinus<HistogramQuantileAffinity<RegionGraphType, {quantile}, ScoreValue, {bins}, {init_with_max}>>"
            ),
            Self::Quantile { quantile, init_with_max } => {
                format!("OneMinus<QuantileAffinity<RegionGraphType, {quantile}, ScoreValue, {init_with_max}>>")
            }
            Self::MeanMaxK { k } => format!("OneMinus<MeanMaxKAffinity<RegionGraphType, {k}, ScoreValue>>"),
            Self::Expression(e) => e.waterz_name(),
        }
    }

    fn parse_exact_quantile(given: &str, q: &str, init: Option<&str>) -> Result<Self> {
        let quantile: u32 = q.parse().map_err(|_| Self::unsupported(given))?;
        let init_with_max = match init {
            None | Some("true") => true,
            Some("false") => false,
            Some(_) => return Err(Self::unsupported(given)),
        };
        if quantile > 100 {
            return Err(Self::unsupported(given));
        }
        Ok(Self::Quantile { quantile, init_with_max })
    }

    fn parse_max_k(given: &str, k: &str) -> Result<Self> {
        match k.parse::<u32>() {
            Ok(k) if (1..=1024).contains(&k) => Ok(Self::MeanMaxK { k }),
            _ => Err(Self::unsupported(given)),
        }
    }

    fn unsupported(given: &str) -> CoreError {
        CoreError::ScoringFunction { given: given.to_string(), supported: SUPPORTED }
    }

    fn parse_quantile(given: &str, q: &str, bins: &str, init: Option<&str>) -> Result<Self> {
        let quantile: u32 = q.parse().map_err(|_| Self::unsupported(given))?;
        let bins: u32 = bins.parse().map_err(|_| Self::unsupported(given))?;
        let init_with_max = match init {
            None | Some("true") => true,
            Some("false") => false,
            Some(_) => return Err(Self::unsupported(given)),
        };
        if quantile > 100 || !(1..=65536).contains(&bins) {
            return Err(Self::unsupported(given));
        }
        Ok(Self::HistogramQuantile { quantile, bins, init_with_max })
    }
}

impl FromStr for ScoringFunction {
    type Err = CoreError;

    fn from_str(given: &str) -> Result<Self> {
        let s = normalize(given);
        let short = s.to_ascii_lowercase();
        match short.as_str() {
            "mean" => return Ok(Self::MeanAffinity),
            "max" => return Ok(Self::MaxAffinity),
            "min" => return Ok(Self::MinAffinity),
            _ => {}
        }
        if let Some(rest) = short.strip_prefix("exact-quantile-") {
            let parts: Vec<&str> = rest.split('-').collect();
            return match parts.as_slice() {
                [q] => Self::parse_exact_quantile(given, q, None),
                [q, "noinit"] => Self::parse_exact_quantile(given, q, Some("false")),
                _ => Err(Self::unsupported(given)),
            };
        }
        if let Some(k) = short.strip_prefix("mean-max-") {
            return Self::parse_max_k(given, k);
        }
        if let Some(rest) = short.strip_prefix("quantile-") {
            let parts: Vec<&str> = rest.split('-').collect();
            return match parts.as_slice() {
                [q] => Self::parse_quantile(given, q, "256", None),
                [q, b] => Self::parse_quantile(given, q, b, None),
                [q, b, "noinit"] => Self::parse_quantile(given, q, b, Some("false")),
                _ => Err(Self::unsupported(given)),
            };
        }
        let s = s.replace(
            "EdgeStatisticValue<RegionGraphType,MeanAffinityProvider<RegionGraphType,ScoreValue>>",
            "MeanAffinity<RegionGraphType,ScoreValue>",
        );
        match s.as_str() {
            "OneMinus<MeanAffinity<RegionGraphType,ScoreValue>>" => return Ok(Self::MeanAffinity),
            "OneMinus<MaxAffinity<RegionGraphType,ScoreValue>>" => return Ok(Self::MaxAffinity),
            "OneMinus<MinAffinity<RegionGraphType,ScoreValue>>" => return Ok(Self::MinAffinity),
            _ => {}
        }
        if let Some(inner) =
            s.strip_prefix("OneMinus<HistogramQuantileAffinity<RegionGraphType,").and_then(|r| r.strip_suffix(">>"))
        {
            let parts: Vec<&str> = inner.split(',').collect();
            return match parts.as_slice() {
                [q, "ScoreValue", b] => Self::parse_quantile(given, q, b, None),
                [q, "ScoreValue", b, init] => Self::parse_quantile(given, q, b, Some(init)),
                _ => Err(Self::unsupported(given)),
            };
        }
        if let Some(inner) =
            s.strip_prefix("OneMinus<QuantileAffinity<RegionGraphType,").and_then(|r| r.strip_suffix(">>"))
        {
            let parts: Vec<&str> = inner.split(',').collect();
            return match parts.as_slice() {
                [q, "ScoreValue"] => Self::parse_exact_quantile(given, q, None),
                [q, "ScoreValue", init] => Self::parse_exact_quantile(given, q, Some(init)),
                _ => Err(Self::unsupported(given)),
            };
        }
        if let Some(inner) =
            s.strip_prefix("OneMinus<MeanMaxKAffinity<RegionGraphType,").and_then(|r| r.strip_suffix(">>"))
        {
            return match inner.split(',').collect::<Vec<_>>().as_slice() {
                [k, "ScoreValue"] => Self::parse_max_k(given, k),
                _ => Err(Self::unsupported(given)),
            };
        }
        match crate::scoring::parse(&s) {
            Ok(expr) => Ok(Self::Expression(Box::new(expr))),
            Err(Some(missing)) => Err(CoreError::ScoringFunction {
                given: format!("{given} (not implemented: {missing})"),
                supported: SUPPORTED,
            }),
            Err(None) => Err(Self::unsupported(given)),
        }
    }
}

impl fmt::Display for ScoringFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.waterz_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_must_be_sorted_unique_and_finite() {
        assert!(Thresholds::new(&[0.1, 0.3, 0.5]).is_ok());
        // waterz takes any threshold: its README's example is [0, 100, 200].
        assert!(Thresholds::new(&[-1.0, 0.0, 100.0, 200.0, 1e300]).is_ok());
        for (bad, needle) in [
            (vec![], "at least one"),
            (vec![0.5, 0.1], "ascending"),
            (vec![0.1, 0.1], "twice"),
            (vec![f64::NAN], "finite"),
            (vec![f64::INFINITY], "finite"),
            (vec![0.1, 0.1 + 1e-12], "float32"),
        ] {
            let e = Thresholds::new(&bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn watershed_thresholds() {
        assert!(check_watershed_thresholds(0.0001, 0.9999).is_ok());
        assert!(check_watershed_thresholds(0.5, 0.5).unwrap_err().to_string().contains("smaller"));
        assert!(check_watershed_thresholds(f64::NAN, 0.5).unwrap_err().to_string().contains("finite"));
        assert!(check_watershed_thresholds(-1.0, 0.5).unwrap_err().to_string().contains("[0, 1]"));
    }

    #[test]
    fn parses_waterz_spellings() {
        let mean: ScoringFunction = "OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>".parse().unwrap();
        assert_eq!(mean, ScoringFunction::MeanAffinity);
        let mean: ScoringFunction = " OneMinus< MeanAffinity<RegionGraphType,ScoreValue> >".parse().unwrap();
        assert_eq!(mean, ScoringFunction::MeanAffinity);
        let q: ScoringFunction =
            "OneMinus<HistogramQuantileAffinity<RegionGraphType, 75, ScoreValue, 256, false>>".parse().unwrap();
        assert_eq!(q, ScoringFunction::HistogramQuantile { quantile: 75, bins: 256, init_with_max: false });
        let q: ScoringFunction =
            "OneMinus<HistogramQuantileAffinity<RegionGraphType, 50, ScoreValue, 256>>".parse().unwrap();
        assert_eq!(q, ScoringFunction::HistogramQuantile { quantile: 50, bins: 256, init_with_max: true });
        assert_eq!("max".parse::<ScoringFunction>().unwrap(), ScoringFunction::MaxAffinity);
        let exact = "OneMinus<QuantileAffinity<RegionGraphType, 25, ScoreValue, false>>".parse::<ScoringFunction>();
        assert_eq!(exact.unwrap(), ScoringFunction::Quantile { quantile: 25, init_with_max: false });
        let exact = "exact-quantile-50".parse::<ScoringFunction>().unwrap();
        assert_eq!(exact, ScoringFunction::Quantile { quantile: 50, init_with_max: true });
        let maxk = "OneMinus<MeanMaxKAffinity<RegionGraphType, 10, ScoreValue>>".parse::<ScoringFunction>();
        assert_eq!(maxk.unwrap(), ScoringFunction::MeanMaxK { k: 10 });
        assert_eq!("mean-max-3".parse::<ScoringFunction>().unwrap(), ScoringFunction::MeanMaxK { k: 3 });
        for bad in ["mean-max-0", "exact-quantile-101", "OneMinus<MeanMaxKAffinity<RegionGraphType, x, ScoreValue>>"] {
            assert!(bad.parse::<ScoringFunction>().is_err(), "{bad}");
        }
        for f in [ScoringFunction::Quantile { quantile: 30, init_with_max: false }, ScoringFunction::MeanMaxK { k: 4 }]
        {
            assert_eq!(f.waterz_name().parse::<ScoringFunction>().unwrap(), f);
        }
        assert_eq!(
            "quantile-90".parse::<ScoringFunction>().unwrap(),
            ScoringFunction::HistogramQuantile { quantile: 90, bins: 256, init_with_max: true }
        );
        for s in [ScoringFunction::MeanAffinity, ScoringFunction::MinAffinity, q] {
            assert_eq!(s.waterz_name().parse::<ScoringFunction>().unwrap(), s);
        }
    }

    #[test]
    fn rejects_unknown_functions_by_name() {
        let e = "OneMinus<Random<RegionGraphType>>".parse::<ScoringFunction>().unwrap_err();
        assert!(e.to_string().contains("not implemented: Random"), "{e}");
        assert!("quantile-101".parse::<ScoringFunction>().is_err());
    }
}
