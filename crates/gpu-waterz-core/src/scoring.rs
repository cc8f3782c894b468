//! waterz's scoring expressions beyond a single statistic: the statistics
//! of `MergeFunctions.hpp` combined by the operators of `Operators.hpp`,
//! parsed from their C++ spelling (`Divide<Subtract<MaxSize<RegionGraphType>,
//! MinSize<RegionGraphType>>, Add<...>>`).

use serde::{Deserialize, Serialize};

/// A statistic an expression reads (one of waterz's statistics providers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Statistic {
    /// `MeanAffinity<RegionGraphType, ScoreValue>` (float).
    MeanAffinity,
    /// `MaxAffinity<RegionGraphType, ScoreValue>` (float).
    MaxAffinity,
    /// `MinAffinity<RegionGraphType, ScoreValue>` (float).
    MinAffinity,
    /// `HistogramQuantileAffinity<RegionGraphType, Q, ScoreValue, Bins, InitWithMax>` (float).
    HistogramQuantile {
        /// Quantile in percent.
        quantile: u32,
        /// Histogram bins.
        bins: u32,
        /// Whether new edges start from their largest affinity.
        init_with_max: bool,
    },
    /// `QuantileAffinity<RegionGraphType, Q, ScoreValue, InitWithMax>` (float).
    Quantile {
        /// Quantile in percent.
        quantile: u32,
        /// Whether new edges start from their largest affinity.
        init_with_max: bool,
    },
    /// `MeanMaxKAffinity<RegionGraphType, K, ScoreValue>` (float).
    MeanMaxK {
        /// How many of the largest affinities.
        k: u32,
    },
    /// `ContactArea<RegionGraphType>`: faces on the boundary (size_t).
    ContactArea,
    /// `MinSize<RegionGraphType>`: voxels of the smaller region (size_t).
    MinSize,
    /// `MaxSize<RegionGraphType>`: voxels of the larger region (size_t).
    MaxSize,
    /// `Constant<RegionGraphType, C>` (int).
    Constant(i32),
}

/// waterz's unary operators (computing in the operand's type, or double
/// for integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `OneMinus`: `1.0 - x`.
    OneMinus,
    /// `Invert`: `1.0 / x`.
    Invert,
    /// `Square`: `x * x`.
    Square,
}

/// waterz's binary operators (computing in the operands' common type, or
/// double for integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `Add`.
    Add,
    /// `Subtract`.
    Subtract,
    /// `Multiply`.
    Multiply,
    /// `Divide`: `a / b`, the largest (lowest) value for a zero `b`.
    Divide,
    /// `Step`: 0 if `a < b`, else 1.
    Step,
}

/// A scoring expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScoreExpr {
    /// A statistic.
    Statistic(Statistic),
    /// An operator on one expression.
    Unary(UnaryOp, Box<ScoreExpr>),
    /// An operator on two expressions.
    Binary(BinaryOp, Box<ScoreExpr>, Box<ScoreExpr>),
}

/// One node of the C++ spelling: a name with template arguments.
#[derive(Debug)]
enum Term {
    Name(String, Vec<Term>),
}

fn parse_term(s: &str, pos: &mut usize) -> Option<Term> {
    let bytes = s.as_bytes();
    let start = *pos;
    while *pos < bytes.len() && (bytes[*pos].is_ascii_alphanumeric() || bytes[*pos] == b'_' || bytes[*pos] == b'-') {
        *pos += 1;
    }
    if *pos == start {
        return None;
    }
    let name = s[start..*pos].to_string();
    let mut args = Vec::new();
    if *pos < bytes.len() && bytes[*pos] == b'<' {
        *pos += 1;
        loop {
            args.push(parse_term(s, pos)?);
            match bytes.get(*pos) {
                Some(b',') => *pos += 1,
                Some(b'>') => {
                    *pos += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    Some(Term::Name(name, args))
}

impl Term {
    fn name(&self) -> &str {
        let Term::Name(n, _) = self;
        n
    }

    fn bare(&self, name: &str) -> bool {
        let Term::Name(n, args) = self;
        n == name && args.is_empty()
    }

    fn number<T: std::str::FromStr>(&self) -> Option<T> {
        let Term::Name(n, args) = self;
        if args.is_empty() {
            n.parse().ok()
        } else {
            None
        }
    }

    fn boolean(&self) -> Option<bool> {
        match self.name() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

/// Why an expression does not parse: `Err(Some(name))` names a waterz
/// function this version does not implement.
fn to_expr(term: &Term) -> Result<ScoreExpr, Option<String>> {
    let Term::Name(name, args) = term;
    let graph = |a: Option<&Term>| a.is_some_and(|t| t.bare("RegionGraphType"));
    let value = |a: Option<&Term>| a.is_some_and(|t| t.bare("ScoreValue"));
    let stat = |s: Statistic| Ok(ScoreExpr::Statistic(s));
    let unary = |op| match args.as_slice() {
        [a] => Ok(ScoreExpr::Unary(op, Box::new(to_expr(a)?))),
        _ => Err(None),
    };
    let binary = |op| match args.as_slice() {
        [a, b] => Ok(ScoreExpr::Binary(op, Box::new(to_expr(a)?), Box::new(to_expr(b)?))),
        _ => Err(None),
    };
    match name.as_str() {
        "OneMinus" => unary(UnaryOp::OneMinus),
        "Invert" => unary(UnaryOp::Invert),
        "Square" => unary(UnaryOp::Square),
        "Add" => binary(BinaryOp::Add),
        "Subtract" => binary(BinaryOp::Subtract),
        "Multiply" => binary(BinaryOp::Multiply),
        "Divide" => binary(BinaryOp::Divide),
        "Step" => binary(BinaryOp::Step),
        "MeanAffinity" if args.len() == 2 && graph(args.first()) && value(args.get(1)) => stat(Statistic::MeanAffinity),
        "MaxAffinity" if args.len() == 2 && graph(args.first()) && value(args.get(1)) => stat(Statistic::MaxAffinity),
        "MinAffinity" if args.len() == 2 && graph(args.first()) && value(args.get(1)) => stat(Statistic::MinAffinity),
        "ContactArea" if args.len() == 1 && graph(args.first()) => stat(Statistic::ContactArea),
        "MinSize" if args.len() == 1 && graph(args.first()) => stat(Statistic::MinSize),
        "MaxSize" if args.len() == 1 && graph(args.first()) => stat(Statistic::MaxSize),
        "Constant" if args.len() == 2 && graph(args.first()) => {
            args[1].number::<i32>().map(Statistic::Constant).map(ScoreExpr::Statistic).ok_or(None)
        }
        "HistogramQuantileAffinity" if (4..=5).contains(&args.len()) && graph(args.first()) && value(args.get(2)) => {
            let quantile = args[1].number::<u32>().filter(|&q| q <= 100).ok_or(None)?;
            let bins = args[3].number::<u32>().filter(|b| (1..=65536).contains(b)).ok_or(None)?;
            let init_with_max = args.get(4).map_or(Some(true), Term::boolean).ok_or(None)?;
            stat(Statistic::HistogramQuantile { quantile, bins, init_with_max })
        }
        "QuantileAffinity" if (3..=4).contains(&args.len()) && graph(args.first()) && value(args.get(2)) => {
            let quantile = args[1].number::<u32>().filter(|&q| q <= 100).ok_or(None)?;
            let init_with_max = args.get(3).map_or(Some(true), Term::boolean).ok_or(None)?;
            stat(Statistic::Quantile { quantile, init_with_max })
        }
        "MeanMaxKAffinity" if args.len() == 3 && graph(args.first()) && value(args.get(2)) => {
            let k = args[1].number::<u32>().filter(|k| (1..=1024).contains(k)).ok_or(None)?;
            stat(Statistic::MeanMaxK { k })
        }
        "Random" => Err(Some(
            "Random (waterz draws it from the C library's rand(), whose state the whole process shares, so its \
             results cannot be reproduced)"
                .into(),
        )),
        other => Err(Some(other.to_string())),
    }
}

/// Parses waterz's C++ spelling (whitespace already folded as
/// `params::normalize` does). `Err(Some(name))` names a function this
/// version does not implement; `Err(None)` is not an expression.
pub(crate) fn parse(s: &str) -> Result<ScoreExpr, Option<String>> {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let mut pos = 0;
    let term = parse_term(&compact, &mut pos).ok_or(None)?;
    if pos != compact.len() {
        return Err(None);
    }
    to_expr(&term)
}

impl ScoreExpr {
    /// waterz's C++ spelling.
    pub fn waterz_name(&self) -> String {
        match self {
            ScoreExpr::Statistic(s) => match s {
                Statistic::MeanAffinity => "MeanAffinity<RegionGraphType, ScoreValue>".into(),
                Statistic::MaxAffinity => "MaxAffinity<RegionGraphType, ScoreValue>".into(),
                Statistic::MinAffinity => "MinAffinity<RegionGraphType, ScoreValue>".into(),
                Statistic::HistogramQuantile { quantile, bins, init_with_max } => format!(
                    "HistogramQuantileAffinity<RegionGraphType, {quantile}, ScoreValue, {bins}, {init_with_max}>"
                ),
                Statistic::Quantile { quantile, init_with_max } => {
                    format!("QuantileAffinity<RegionGraphType, {quantile}, ScoreValue, {init_with_max}>")
                }
                Statistic::MeanMaxK { k } => format!("MeanMaxKAffinity<RegionGraphType, {k}, ScoreValue>"),
                Statistic::ContactArea => "ContactArea<RegionGraphType>".into(),
                Statistic::MinSize => "MinSize<RegionGraphType>".into(),
                Statistic::MaxSize => "MaxSize<RegionGraphType>".into(),
                Statistic::Constant(c) => format!("Constant<RegionGraphType, {c}>"),
            },
            ScoreExpr::Unary(op, a) => format!("{op:?}<{}>", a.waterz_name()),
            ScoreExpr::Binary(op, a, b) => format!("{op:?}<{}, {}>", a.waterz_name(), b.waterz_name()),
        }
    }

    /// Whether the expression reads region sizes (which need the
    /// fragments' voxel counts).
    pub fn uses_sizes(&self) -> bool {
        match self {
            ScoreExpr::Statistic(s) => matches!(s, Statistic::MinSize | Statistic::MaxSize),
            ScoreExpr::Unary(_, a) => a.uses_sizes(),
            ScoreExpr::Binary(_, a, b) => a.uses_sizes() || b.uses_sizes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_waterz_spellings_and_names_what_is_missing() {
        let size_control = "Divide<Subtract<MaxSize<RegionGraphType>,MinSize<RegionGraphType>>,\
                            Add<MaxSize<RegionGraphType>,MinSize<RegionGraphType>>>";
        let e = parse(size_control).unwrap();
        assert!(e.uses_sizes());
        assert_eq!(parse(&e.waterz_name()).unwrap(), e);
        let e = parse("OneMinus<Multiply<MeanAffinity<RegionGraphType, ScoreValue>, Constant<RegionGraphType, 2>>>")
            .unwrap();
        assert!(!e.uses_sizes());
        assert_eq!(parse(&e.waterz_name()).unwrap(), e);
        assert_eq!(parse("Random<RegionGraphType>").unwrap_err().unwrap().split(' ').next(), Some("Random"));
        assert_eq!(parse("OneMinus<Foo<RegionGraphType>>").unwrap_err(), Some("Foo".into()));
        assert_eq!(parse("OneMinus<MeanAffinity<RegionGraphType,ScoreValue>").unwrap_err(), None);
        assert_eq!(parse("Add<ContactArea<RegionGraphType>>").unwrap_err(), None);
    }
}
