//! waterz's scoring expressions (`gpu_waterz_core::scoring::ScoreExpr`)
//! evaluated as its C++ templates evaluate them.
//!
//! - **Providers.** Each statistic reads a provider; a binary operator's
//!   provider is waterz's `MergeProviders` of its operands' (a chain of
//!   distinct providers; a provider new to a chain goes at its end).
//!   `MinSize` and `MaxSize` share the region-size provider.
//! - **Merges short-circuit.** waterz's `CompoundProvider` notifies its
//!   providers of an edge (node) merge with `||`: the first that reports a
//!   change stops the others, which then keep their unmerged statistics
//!   (e.g. in `Divide<ContactArea, MeanAffinity>` the mean of a merged edge
//!   is the surviving edge's own). This is replayed as is.
//! - **Types.** Affinity statistics are float, `ContactArea`, `MinSize` and
//!   `MaxSize` are `size_t`, `Constant` is `int`. An operator computes in
//!   the common type of its operands, or double when that is an integer;
//!   `OneMinus` and `Invert` compute `1.0 - x` and `1.0 / x` in double and
//!   convert back; `Divide` returns the largest (lowest) value for a
//!   divisor at most the smallest normal number. The final value is stored,
//!   queued and compared with the thresholds as a float, waterz's
//!   `ScoreValue`, whatever its type.

use crate::stats::EdgeStatistics;
use crate::ParhacError;
use gpu_waterz_core::scoring::{BinaryOp, ScoreExpr, Statistic, UnaryOp};
use gpu_waterz_core::{Arithmetic, ScoringFunction};
use gpu_waterz_graph::RegionGraph;

/// One provider of a chain.
#[derive(Clone, Debug)]
enum Provider {
    /// An affinity statistic (float), as the single-statistic scores keep it.
    Affinity(Statistic, EdgeStatistics),
    /// Faces per edge.
    ContactArea(Vec<u64>),
    /// Voxels per node.
    RegionSize(Vec<u64>),
    /// `ConstantProvider<C>`: no statistics.
    Constant(i32),
}

impl Provider {
    /// The provider type a statistic reads (`MergeProviders` compares
    /// types).
    fn key(s: Statistic) -> Statistic {
        match s {
            Statistic::MinSize => Statistic::MaxSize,
            other => other,
        }
    }

    fn matches(&self, s: Statistic) -> bool {
        let key = Self::key(s);
        match self {
            Provider::Affinity(own, _) => *own == key,
            Provider::ContactArea(_) => key == Statistic::ContactArea,
            Provider::RegionSize(_) => key == Statistic::MaxSize,
            Provider::Constant(c) => key == Statistic::Constant(*c),
        }
    }
}

/// A value in the C++ type it has.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    F32(f32),
    F64(f64),
    /// `size_t`.
    U64(u64),
    /// `int`.
    I32(i32),
}

/// The type an operator computes in: the common type, double for integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    F32,
    F64,
    Integer,
}

impl Value {
    fn kind(self) -> Kind {
        match self {
            Value::F32(_) => Kind::F32,
            Value::F64(_) => Kind::F64,
            Value::U64(_) | Value::I32(_) => Kind::Integer,
        }
    }

    fn as_f32(self) -> f32 {
        match self {
            Value::F32(x) => x,
            Value::F64(x) => x as f32,
            Value::U64(x) => x as f32,
            Value::I32(x) => x as f32,
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Value::F32(x) => x as f64,
            Value::F64(x) => x,
            Value::U64(x) => x as f64,
            Value::I32(x) => x as f64,
        }
    }
}

/// `OperatorScoreType`: the operands' common type, double for integers.
fn operator_kind(a: Kind, b: Kind) -> Kind {
    match (a, b) {
        (Kind::F64, _) | (_, Kind::F64) => Kind::F64,
        (Kind::F32, _) | (_, Kind::F32) => Kind::F32,
        _ => Kind::F64,
    }
}

fn unary(op: UnaryOp, x: Value) -> Value {
    match operator_kind(x.kind(), x.kind()) {
        Kind::F32 => {
            let x = x.as_f32();
            Value::F32(match op {
                UnaryOp::OneMinus => (1.0f64 - x as f64) as f32,
                UnaryOp::Invert => (1.0f64 / x as f64) as f32,
                UnaryOp::Square => x * x,
            })
        }
        _ => {
            let x = x.as_f64();
            Value::F64(match op {
                UnaryOp::OneMinus => 1.0 - x,
                UnaryOp::Invert => 1.0 / x,
                UnaryOp::Square => x * x,
            })
        }
    }
}

macro_rules! binary_in {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {{
        let (a, b): ($t, $t) = ($a, $b);
        match $op {
            BinaryOp::Add => a + b,
            BinaryOp::Subtract => a - b,
            BinaryOp::Multiply => a * b,
            BinaryOp::Divide => {
                if b.abs() <= <$t>::MIN_POSITIVE {
                    if (a * b).is_sign_negative() {
                        <$t>::MIN
                    } else {
                        <$t>::MAX
                    }
                } else {
                    a / b
                }
            }
            BinaryOp::Step => {
                if a < b {
                    0.0
                } else {
                    1.0
                }
            }
        }
    }};
}

fn binary(op: BinaryOp, a: Value, b: Value) -> Value {
    match operator_kind(a.kind(), b.kind()) {
        Kind::F32 => Value::F32(binary_in!(f32, op, a.as_f32(), b.as_f32())),
        _ => Value::F64(binary_in!(f64, op, a.as_f64(), b.as_f64())),
    }
}

/// The providers an expression reads, in `MergeProviders` order.
fn provider_chain(expr: &ScoreExpr) -> Vec<Statistic> {
    match expr {
        ScoreExpr::Statistic(s) => vec![Provider::key(*s)],
        ScoreExpr::Unary(_, a) => provider_chain(a),
        ScoreExpr::Binary(_, a, b) => {
            let (x, y) = (provider_chain(a), provider_chain(b));
            match (x.len(), y.len()) {
                (1, 1) if x[0] == y[0] => x,
                (1, 1) => vec![x[0], y[0]],
                // A single provider joins a chain at its end.
                (1, _) => append_new(y, &x),
                _ => append_new(x, &y),
            }
        }
    }
}

fn append_new(mut chain: Vec<Statistic>, more: &[Statistic]) -> Vec<Statistic> {
    for s in more {
        if !chain.contains(s) {
            chain.push(*s);
        }
    }
    chain
}

/// The statistics of a scoring expression.
#[derive(Clone, Debug)]
pub struct ExpressionStatistics {
    expr: ScoreExpr,
    providers: Vec<Provider>,
}

impl ExpressionStatistics {
    /// The providers of `expr` over `graph`; `node_sizes` (voxels per node)
    /// is needed when it reads region sizes.
    pub fn new(graph: &RegionGraph, expr: ScoreExpr, node_sizes: Option<Vec<u64>>) -> Result<Self, ParhacError> {
        let mut node_sizes = node_sizes;
        let mut providers = Vec::new();
        for s in provider_chain(&expr) {
            let affinity = |scoring| EdgeStatistics::new(graph, scoring, Arithmetic::Waterz);
            providers.push(match s {
                Statistic::MeanAffinity => Provider::Affinity(s, affinity(ScoringFunction::MeanAffinity)?),
                Statistic::MaxAffinity => Provider::Affinity(s, affinity(ScoringFunction::MaxAffinity)?),
                Statistic::MinAffinity => Provider::Affinity(s, affinity(ScoringFunction::MinAffinity)?),
                Statistic::HistogramQuantile { quantile, bins, init_with_max } => Provider::Affinity(
                    s,
                    affinity(ScoringFunction::HistogramQuantile { quantile, bins, init_with_max })?,
                ),
                Statistic::Quantile { quantile, init_with_max } => {
                    Provider::Affinity(s, affinity(ScoringFunction::Quantile { quantile, init_with_max })?)
                }
                Statistic::MeanMaxK { k } => Provider::Affinity(s, affinity(ScoringFunction::MeanMaxK { k })?),
                Statistic::ContactArea => {
                    Provider::ContactArea((0..graph.n_edges()).map(|e| graph.faces(e).len() as u64).collect())
                }
                Statistic::MinSize | Statistic::MaxSize => {
                    let sizes = node_sizes.take().ok_or_else(|| {
                        ParhacError::Unsupported(
                            "region sizes (MinSize, MaxSize) without the fragments' voxel counts".into(),
                        )
                    })?;
                    if (sizes.len() as u64) < graph.n_nodes {
                        return Err(ParhacError::Unsupported(format!(
                            "{} region sizes for {} nodes",
                            sizes.len(),
                            graph.n_nodes
                        )));
                    }
                    Provider::RegionSize(sizes)
                }
                Statistic::Constant(c) => Provider::Constant(c),
            });
        }
        Ok(Self { expr, providers })
    }

    fn provider(&self, s: Statistic) -> &Provider {
        self.providers.iter().find(|p| p.matches(s)).expect("every statistic has its provider")
    }

    /// Evaluates `expr` for edge `e`, joining `ends`.
    fn eval(&self, expr: &ScoreExpr, at: (usize, [u64; 2])) -> Value {
        let (e, [u, v]) = at;
        match expr {
            ScoreExpr::Statistic(s) => match self.provider(*s) {
                Provider::Affinity(_, stats) => Value::F32(stats.value(e)),
                Provider::ContactArea(area) => Value::U64(area[e]),
                Provider::RegionSize(sizes) => {
                    let (a, b) = (sizes[u as usize], sizes[v as usize]);
                    Value::U64(if *s == Statistic::MinSize { a.min(b) } else { a.max(b) })
                }
                Provider::Constant(c) => Value::I32(*c),
            },
            ScoreExpr::Unary(op, a) => unary(*op, self.eval(a, at)),
            ScoreExpr::Binary(op, a, b) => binary(*op, self.eval(a, at), self.eval(b, at)),
        }
    }

    /// The score of edge `e`, joining `ends`: the expression's value
    /// converted to float, the type waterz's merging stores and compares
    /// every score in (`ScoreValue`).
    pub fn score(&self, e: usize, ends: [u64; 2]) -> f64 {
        self.eval(&self.expr, (e, ends)).as_f32() as f64
    }

    /// `CompoundProvider::notifyEdgeMerge`: the providers in order until
    /// one reports a change.
    pub fn merge_edge(&mut self, from: usize, to: usize) -> bool {
        for p in &mut self.providers {
            let changed = match p {
                Provider::Affinity(_, stats) => stats.merge_edge(from, to),
                Provider::ContactArea(area) => {
                    area[to] += area[from];
                    true
                }
                Provider::RegionSize(_) | Provider::Constant(_) => false,
            };
            if changed {
                return true;
            }
        }
        false
    }

    /// `CompoundProvider::notifyNodeMerge`: only region sizes change.
    pub fn merge_node(&mut self, from: u64, to: u64) -> bool {
        for p in &mut self.providers {
            if let Provider::RegionSize(sizes) = p {
                sizes[to as usize] += sizes[from as usize];
                sizes[from as usize] = 0;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ScoreExpr {
        match s.parse::<ScoringFunction>().unwrap() {
            ScoringFunction::Expression(e) => *e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn providers_chain_as_waterz_merges_their_types() {
        let e = parse("Divide<Subtract<MaxSize<RegionGraphType>,MinSize<RegionGraphType>>,Add<MaxSize<RegionGraphType>,MinSize<RegionGraphType>>>");
        assert_eq!(provider_chain(&e), vec![Statistic::MaxSize]);
        let e = parse("Add<ContactArea<RegionGraphType>, Multiply<MeanAffinity<RegionGraphType, ScoreValue>, MaxSize<RegionGraphType>>>");
        // A single provider joins the chain of the other operand at its end.
        assert_eq!(provider_chain(&e), vec![Statistic::MeanAffinity, Statistic::MaxSize, Statistic::ContactArea]);
    }

    #[test]
    fn operators_compute_in_cpp_types() {
        assert_eq!(binary(BinaryOp::Divide, Value::U64(1), Value::U64(2)), Value::F64(0.5));
        assert_eq!(binary(BinaryOp::Add, Value::F32(0.5), Value::U64(3)), Value::F32(3.5));
        assert_eq!(binary(BinaryOp::Divide, Value::F32(1.0), Value::F32(0.0)), Value::F32(f32::MAX));
        assert_eq!(binary(BinaryOp::Divide, Value::F64(-1.0), Value::U64(0)), Value::F64(f64::MIN));
        assert_eq!(binary(BinaryOp::Step, Value::I32(1), Value::I32(2)), Value::F64(0.0));
        assert_eq!(unary(UnaryOp::OneMinus, Value::F32(0.25)), Value::F32(0.75));
        assert_eq!(unary(UnaryOp::Invert, Value::U64(4)), Value::F64(0.25));
        assert_eq!(unary(UnaryOp::Square, Value::I32(3)), Value::F64(9.0));
    }
}
