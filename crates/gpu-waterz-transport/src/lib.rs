//! Batched entropic optimal transport by Sinkhorn's iteration.
//!
//! `n` pairs of histograms `a[t]`, `b[t]` of `d` bins share one `d × d` cost
//! matrix `M`. For each pair the solver finds the plan `P` with marginals
//! `a[t]`, `b[t]` that minimises the entropic cost
//! `<P, M> + reg * sum P ln P`, through the dual potentials `f`, `g`
//! (`P_ij = e^((f_i + g_j - M_ij) / reg)`), and returns that cost per pair
//! with the potentials. By the envelope theorem the potentials, centred,
//! are the cost's gradients with respect to the marginals (for changes that
//! keep the mass), which is how `gpu_waterz.transport` differentiates it.
//!
//! Two formulations, as in POT's `sinkhorn_knopp` and `sinkhorn_log`:
//! [`Domain::Scaling`] iterates `v = b / (K^T u)`, `u = a / (K v)` with the
//! Gibbs kernel `K = e^(-M / reg)` (fast; underflows for small `reg`), and
//! [`Domain::Log`] iterates the potentials with log-sum-exp (stable for any
//! `reg`; a zero bin's potential is `-inf`, never NaN). One iteration is
//! both half-steps; with a tolerance, every [`Config::check_every`]
//! iterations the largest L1 error of the second marginals over the pairs is
//! compared with it.
//!
//! [`solve_cpu`] is the reference (plain loops, pairs in parallel); the GPU
//! path is [`gpu::solve`] (device buffers) and [`gpu::solve_host`] (host
//! arrays). Both validate their input with one routine, [`check_problem`]
//! (the device path checks shapes and settings; values are checked where
//! they are on the host).
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod gpu;

use gpu_waterz_abi::transport::{LogSumExp, Math};
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

/// The most iterations one CUDA graph of the GPU path holds.
pub const GRAPH_ITERATIONS: usize = 25;

/// The fewest iterations for which [`CudaGraphs::Auto`] records graphs:
/// recording and instantiating one costs about as much as launching a
/// few hundred kernels from the host (0.4–0.6 ms measured on the H200),
/// so a run must replay it several times to gain.
pub const GRAPH_MIN_ITERATIONS: usize = 200;

/// Whether the GPU path replays runs of iterations between checks as CUDA
/// graphs of up to [`GRAPH_ITERATIONS`] iterations instead of launching
/// every kernel from the host (the same kernels on the same buffers, so the
/// same results).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaGraphs {
    /// For runs of at least [`GRAPH_MIN_ITERATIONS`] iterations.
    Auto,
    /// Whenever two or more iterations run without a check between them.
    On,
    /// Never.
    Off,
}

/// The iteration's formulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Domain {
    /// Scalings `u`, `v` and the Gibbs kernel (POT's `sinkhorn_knopp`).
    Scaling,
    /// Potentials and log-sum-exp (POT's `sinkhorn_log`).
    Log,
}

/// The solver's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    reg: f64,
    num_iter: usize,
    tol: f64,
    domain: Domain,
    check_every: usize,
    graphs: CudaGraphs,
}

impl Config {
    /// Entropic regularisation `reg` (> 0); then the defaults: 1000
    /// iterations at most, tolerance 1e-9 (POT's), the scaling domain, the
    /// marginal error checked every 10 iterations, CUDA graphs on the GPU
    /// for long runs ([`CudaGraphs::Auto`]).
    pub fn new(reg: f64) -> Self {
        Self { reg, num_iter: 1000, tol: 1e-9, domain: Domain::Scaling, check_every: 10, graphs: CudaGraphs::Auto }
    }

    /// The most iterations (default 1000).
    pub fn num_iter(mut self, num_iter: usize) -> Self {
        self.num_iter = num_iter;
        self
    }

    /// Stop once every pair's second-marginal L1 error is below `tol`
    /// (default 1e-9); 0 runs all iterations without checking.
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }

    /// The formulation (default [`Domain::Scaling`]).
    pub fn domain(mut self, domain: Domain) -> Self {
        self.domain = domain;
        self
    }

    /// Iterations between error checks (default 10, at least 1).
    pub fn check_every(mut self, every: usize) -> Self {
        self.check_every = every;
        self
    }

    /// When the GPU path uses CUDA graphs (default [`CudaGraphs::Auto`]).
    pub fn cuda_graphs(mut self, graphs: CudaGraphs) -> Self {
        self.graphs = graphs;
        self
    }

    /// The regularisation.
    pub fn reg(&self) -> f64 {
        self.reg
    }
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Shapes, values or settings the solver does not take.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// The GPU side failed.
    #[error(transparent)]
    Gpu(#[from] gpu_waterz_runtime::RuntimeError),
}

/// The kind of a [`TransportError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad input or settings.
    InvalidInput,
    /// The GPU failed or is missing.
    Gpu,
}

impl TransportError {
    /// Which kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TransportError::Invalid(_) => ErrorKind::InvalidInput,
            TransportError::Gpu(_) => ErrorKind::Gpu,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = TransportError> = std::result::Result<T, E>;

fn invalid(reason: impl Into<String>) -> TransportError {
    TransportError::Invalid(reason.into())
}

/// The float types the solver takes: float32 and float64.
pub trait Float:
    gpu_waterz_abi::transport::Real + gpu_waterz_runtime::DeviceElement + std::fmt::Debug + Send + Sync + 'static
{
    /// From float64.
    fn from_f64(x: f64) -> Self;
    /// To float64.
    fn to_f64(self) -> f64;
    /// The standard library's `e^self`.
    fn exp(self) -> Self;
    /// The standard library's `ln self`.
    fn ln(self) -> Self;
}

impl Float for f32 {
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn ln(self) -> Self {
        f32::ln(self)
    }
}

impl Float for f64 {
    fn from_f64(x: f64) -> Self {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn ln(self) -> Self {
        f64::ln(self)
    }
}

/// The standard library's `e^x` and `ln x` for the CPU reference.
struct Std;

impl<T: Float> Math<T> for Std {
    fn exp(x: T) -> T {
        Float::exp(x)
    }
    fn ln(x: T) -> T {
        Float::ln(x)
    }
}

/// A solved batch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Solution<T> {
    /// Each pair's entropic cost `<P, M> + reg sum P ln P`.
    pub cost: Vec<T>,
    /// The first side's potentials, `n × d` (`-inf` on zero bins).
    pub f: Array2<T>,
    /// The second side's potentials, `n × d`.
    pub g: Array2<T>,
    /// The iterations run.
    pub iterations: usize,
    /// The largest second-marginal L1 error at the last check (`None`
    /// without a tolerance).
    pub marginal_error: Option<f64>,
}

/// Checks a problem's shapes, values and settings, the one routine both
/// paths use: `a` and `b` are `n × d` with `n, d >= 1`, finite and not
/// negative; `m` is `d × d` and finite; `reg` finite and positive; the
/// tolerance finite and not negative; `check_every >= 1`.
pub fn check_problem<T: Float>(
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    m: ArrayView2<'_, T>,
    config: &Config,
) -> Result<()> {
    check_shapes(a.dim(), b.dim(), m.dim())?;
    check_settings(config)?;
    let histogram = |x: &T| x.to_f64() >= 0.0 && x.to_f64().is_finite();
    if !a.iter().all(histogram) {
        return Err(invalid("a must hold finite values >= 0 (histograms)"));
    }
    if !b.iter().all(histogram) {
        return Err(invalid("b must hold finite values >= 0 (histograms)"));
    }
    if m.iter().any(|v| !v.to_f64().is_finite()) {
        return Err(invalid("M must be finite"));
    }
    Ok(())
}

/// The shape part of [`check_problem`] (for device input, whose values are
/// checked on the host only when it is there).
pub fn check_shapes(a: (usize, usize), b: (usize, usize), m: (usize, usize)) -> Result<()> {
    let (n, d) = a;
    if n == 0 || d == 0 {
        return Err(invalid(format!("a must be n × d with n, d >= 1, not {n} × {d}")));
    }
    if b != a {
        return Err(invalid(format!("b must have a's shape {n} × {d}, not {} × {}", b.0, b.1)));
    }
    if m != (d, d) {
        return Err(invalid(format!("M must be {d} × {d} (the bins of a and b), not {} × {}", m.0, m.1)));
    }
    if (d as u64).checked_mul(d as u64).is_none_or(|dd| dd > (1u64 << 40)) {
        return Err(invalid(format!("d = {d} bins is too many")));
    }
    Ok(())
}

/// The settings part of [`check_problem`].
pub fn check_settings(config: &Config) -> Result<()> {
    if !(config.reg.is_finite() && config.reg > 0.0) {
        return Err(invalid(format!("reg must be finite and > 0, not {}", config.reg)));
    }
    if !(config.tol.is_finite() && config.tol >= 0.0) {
        return Err(invalid(format!("tol must be finite and >= 0, not {}", config.tol)));
    }
    if config.check_every == 0 {
        return Err(invalid("check_every must be at least 1"));
    }
    Ok(())
}

/// Whether to check the marginal error at iteration `it` (0-based).
fn checks_at(config: &Config, it: usize) -> bool {
    config.tol > 0.0 && it > 0 && it.is_multiple_of(config.check_every)
}

/// One pair's iterates in the reference: scalings `(u, v)` or potentials
/// `(f, g)`, by the domain.
struct PairState<T> {
    first: Vec<T>,
    second: Vec<T>,
}

impl<T: Float> PairState<T> {
    fn new(d: usize, domain: Domain) -> Self {
        let start = match domain {
            Domain::Scaling => T::from_f64(1.0 / d as f64),
            Domain::Log => T::ZERO,
        };
        Self { first: vec![start; d], second: vec![start; d] }
    }

    /// The second side's half-step; returns the L1 error of the second
    /// marginal before it when `check`.
    fn second_half(
        &mut self,
        b: &[T],
        m: ArrayView2<'_, T>,
        kernel: Option<&Array2<T>>,
        config: &Config,
        check: bool,
    ) -> f64 {
        let d = b.len();
        let mut err = 0.0;
        match kernel {
            Some(k) => {
                for j in 0..d {
                    let s = (0..d).fold(T::ZERO, |acc, i| acc + k[(i, j)] * self.first[i]);
                    if check {
                        err += (self.second[j] * s - b[j]).to_f64().abs();
                    }
                    self.second[j] = if b[j] > T::ZERO { b[j] / s } else { T::ZERO };
                }
            }
            None => {
                let reg = T::from_f64(config.reg);
                let inv_reg = T::ONE / reg;
                let new: Vec<T> = (0..d)
                    .map(|j| {
                        let l = log_sum_exp(&self.first, |i| m[(i, j)], inv_reg);
                        if check {
                            let old = self.second[j];
                            let plan = if old == T::NEG_INFINITY || l == T::NEG_INFINITY {
                                T::ZERO
                            } else {
                                Std::exp(old * inv_reg + l)
                            };
                            err += (plan - b[j]).to_f64().abs();
                        }
                        gpu_waterz_abi::transport::log_domain_potential::<T, Std>(b[j], reg, l)
                    })
                    .collect();
                self.second = new;
            }
        }
        err
    }

    /// The first side's half-step.
    fn first_half(&mut self, a: &[T], m: ArrayView2<'_, T>, kernel: Option<&Array2<T>>, config: &Config) {
        let d = a.len();
        match kernel {
            Some(k) => {
                for i in 0..d {
                    let s = (0..d).fold(T::ZERO, |acc, j| acc + k[(i, j)] * self.second[j]);
                    self.first[i] = if a[i] > T::ZERO { a[i] / s } else { T::ZERO };
                }
            }
            None => {
                let reg = T::from_f64(config.reg);
                let inv_reg = T::ONE / reg;
                self.first = (0..d)
                    .map(|i| {
                        let l = log_sum_exp(&self.second, |j| m[(i, j)], inv_reg);
                        gpu_waterz_abi::transport::log_domain_potential::<T, Std>(a[i], reg, l)
                    })
                    .collect();
            }
        }
    }

    /// The potentials `(f, g)`.
    fn potentials(self, config: &Config) -> (Vec<T>, Vec<T>) {
        match config.domain {
            Domain::Scaling => {
                let reg = T::from_f64(config.reg);
                let to_potential = |x: T| reg * Std::ln(x);
                (
                    self.first.into_iter().map(to_potential).collect(),
                    self.second.into_iter().map(to_potential).collect(),
                )
            }
            Domain::Log => (self.first, self.second),
        }
    }
}

/// `ln sum_k e^((p_k - c(k)) / reg)` over `k`, `-inf` terms skipped.
fn log_sum_exp<T: Float>(p: &[T], c: impl Fn(usize) -> T, inv_reg: T) -> T {
    p.iter()
        .enumerate()
        .fold(LogSumExp::<T>::EMPTY, |s, (k, &pk)| {
            s.push::<Std>(if pk == T::NEG_INFINITY { pk } else { (pk - c(k)) * inv_reg })
        })
        .value::<Std>()
}

/// The entropic cost of one pair from its potentials.
fn pair_cost<T: Float>(f: &[T], g: &[T], m: ArrayView2<'_, T>, reg: T) -> T {
    let d = f.len();
    let mut total = 0.0f64;
    for i in 0..d {
        let row = (0..d)
            .fold(T::ZERO, |acc, j| acc + gpu_waterz_abi::transport::cost_term::<T, Std>(f[i], g[j], m[(i, j)], reg));
        total += row.to_f64();
    }
    T::from_f64(total)
}

/// Solves every pair on the CPU (the reference; pairs in parallel).
pub fn solve_cpu<T: Float>(
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    m: ArrayView2<'_, T>,
    config: &Config,
) -> Result<Solution<T>> {
    check_problem(a, b, m, config)?;
    let (n, d) = a.dim();
    let reg = T::from_f64(config.reg);
    let kernel = (config.domain == Domain::Scaling).then(|| m.mapv(|x| T::from_f64((-x.to_f64() / config.reg).exp())));
    let a = a.as_standard_layout();
    let b = b.as_standard_layout();
    let (a, b) = (a.as_slice().expect("standard layout"), b.as_slice().expect("standard layout"));
    let kernel = kernel.as_ref();
    // All pairs step together, and stop together, as on the GPU.
    let mut states: Vec<PairState<T>> = (0..n).map(|_| PairState::new(d, config.domain)).collect();
    let mut iterations = 0;
    let mut marginal_error = None;
    for it in 0..config.num_iter {
        let check = checks_at(config, it);
        let errors: Vec<f64> = states
            .par_iter_mut()
            .enumerate()
            .map(|(t, s)| s.second_half(&b[t * d..(t + 1) * d], m, kernel, config, check))
            .collect();
        if check {
            let worst = errors.iter().cloned().fold(0.0, f64::max);
            marginal_error = Some(worst);
            if worst < config.tol {
                // This iteration's second half-step only refined what was
                // already within the tolerance; it is not counted.
                break;
            }
        }
        states.par_iter_mut().enumerate().for_each(|(t, s)| s.first_half(&a[t * d..(t + 1) * d], m, kernel, config));
        iterations = it + 1;
    }
    let solved: Vec<(Vec<T>, Vec<T>, T)> = states
        .into_par_iter()
        .map(|s| {
            let (f, g) = s.potentials(config);
            let cost = pair_cost(&f, &g, m, reg);
            (f, g, cost)
        })
        .collect();
    let mut f = Array2::from_elem((n, d), T::ZERO);
    let mut g = Array2::from_elem((n, d), T::ZERO);
    let mut cost = Vec::with_capacity(n);
    for (t, (ft, gt, c)) in solved.into_iter().enumerate() {
        f.row_mut(t).assign(&ndarray::ArrayView1::from(&ft));
        g.row_mut(t).assign(&ndarray::ArrayView1::from(&gt));
        cost.push(c);
    }
    Ok(Solution { cost, f, g, iterations, marginal_error })
}
