//! Batched Sinkhorn iterations for entropic optimal transport: `n` pairs
//! of `d`-bin histograms sharing one `d × d` cost matrix. One block works
//! on one (matrix row, tile of `TRANSPORT_TILE` pairs) at a time: it reads
//! the row once and applies it to the tile's vectors, held in registers,
//! then reduces across its threads in shared memory (a fixed tree, so
//! results do not depend on timing). The float32 kernels take `e^x` and
//! `ln x` from the special-function unit, the float64 ones from
//! `gpu_waterz_abi::transport`'s code.

use crate::device::*;
use gpu_waterz_abi::transport::*;

/// Threads per block, as an index type.
const THREADS: usize = TRANSPORT_THREADS as usize;
/// Pairs per tile, as an index type.
const TILE: usize = TRANSPORT_TILE as usize;

/// The device's float32 `e^x` and `ln x`.
struct Hardware;

impl Math<f32> for Hardware {
    #[inline(always)]
    fn exp(x: f32) -> f32 {
        ex2_approx_f32(x * core::f32::consts::LOG2_E)
    }
    #[inline(always)]
    fn ln(x: f32) -> f32 {
        lg2_approx_f32(x) * core::f32::consts::LN_2
    }
}

/// The absolute value without `std`.
#[inline(always)]
fn abs<T: Real>(x: T) -> T {
    if x < T::ZERO {
        -x
    } else {
        x
    }
}

/// Calls `f(row, first_pair)` for every (row, tile) work item this block
/// owns; block-uniform, so `f` may synchronize the block.
#[inline(always)]
fn for_each_row_tile(d: u64, n: u64, mut f: impl FnMut(usize, usize)) {
    let works = d * n.div_ceil(TILE as u64);
    let mut w = block_idx_x() as u64;
    while w < works {
        f((w % d) as usize, (w / d) as usize * TILE);
        w += grid_dim_x() as u64;
    }
}

/// Sums each of the `TILE` values of every thread across the block; the
/// sums end at `shared[q * THREADS]`.
///
/// # Safety
/// All `THREADS` threads call it; `shared` holds `TILE * THREADS` values.
#[inline(always)]
unsafe fn block_sum<T: Real>(shared: *mut T, values: &[T; TILE]) {
    let tid = thread_idx_x() as usize;
    // SAFETY: indices below TILE * THREADS; barriers reached by all.
    unsafe {
        for (q, v) in values.iter().enumerate() {
            *shared.add(q * THREADS + tid) = *v;
        }
        sync_threads();
        let mut stride = THREADS / 2;
        while stride > 0 {
            if tid < stride {
                for q in 0..TILE {
                    let a = shared.add(q * THREADS + tid);
                    *a = *a + *shared.add(q * THREADS + tid + stride);
                }
            }
            sync_threads();
            stride /= 2;
        }
    }
}

/// The scaling-domain update (see `OtScalingUpdateF32Args`).
///
/// # Safety
/// As the kernels' (all pointers hold what their struct says).
#[inline(always)]
unsafe fn scaling_update<T: Real>(
    op: *const T,
    n: u64,
    d: u64,
    x_in: *const T,
    marginal: *const T,
    x_out: *mut T,
    err: *mut T,
) {
    let tid = thread_idx_x() as usize;
    let shared = dynamic_shared::<T>();
    let (n_us, d_us) = (n as usize, d as usize);
    for_each_row_tile(d, n, |i, first| {
        let valid = (n_us - first).min(TILE);
        let mut acc = [T::ZERO; TILE];
        let mut j = tid;
        while j < d_us {
            // SAFETY: i, j < d; first + q < n.
            unsafe {
                let k = *op.add(i * d_us + j);
                for (q, a) in acc.iter_mut().enumerate().take(valid) {
                    *a = *a + k * *x_in.add((first + q) * d_us + j);
                }
            }
            j += THREADS;
        }
        // SAFETY: every thread reaches it; the shared memory is launched
        // with TRANSPORT_SHARED_ELEMENTS >= TILE * THREADS values.
        unsafe { block_sum(shared, &acc) };
        if tid < valid {
            // SAFETY: pair first + tid < n, bin i < d.
            unsafe {
                let s = *shared.add(tid * THREADS);
                let index = (first + tid) * d_us + i;
                let m = *marginal.add(index);
                if !err.is_null() {
                    *err.add(index) = abs(*x_out.add(index) * s - m);
                }
                *x_out.add(index) = if m > T::ZERO { m / s } else { T::ZERO };
            }
        }
        // SAFETY: all threads; the next work item reuses the shared memory.
        unsafe { sync_threads() };
    });
}

/// The log-domain update (see `OtLogUpdateF32Args`).
///
/// # Safety
/// As the kernels'.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn log_update<T: Real, M: Math<T>>(
    c: *const T,
    n: u64,
    d: u64,
    reg: T,
    p_in: *const T,
    marginal: *const T,
    p_out: *mut T,
    err: *mut T,
) {
    let tid = thread_idx_x() as usize;
    let shared = dynamic_shared::<T>();
    let (n_us, d_us) = (n as usize, d as usize);
    let inv_reg = T::ONE / reg;
    for_each_row_tile(d, n, |i, first| {
        let valid = (n_us - first).min(TILE);
        let mut states = [LogSumExp::<T>::EMPTY; TILE];
        let mut j = tid;
        while j < d_us {
            // SAFETY: i, j < d; first + q < n.
            unsafe {
                let cost = *c.add(i * d_us + j);
                for (q, s) in states.iter_mut().enumerate().take(valid) {
                    let p = *p_in.add((first + q) * d_us + j);
                    let term = if p == T::NEG_INFINITY { p } else { (p - cost) * inv_reg };
                    *s = s.push::<M>(term);
                }
            }
            j += THREADS;
        }
        // SAFETY: indices below 2 * TILE * THREADS (the launched shared
        // memory); barriers reached by all threads.
        unsafe {
            for (q, s) in states.iter().enumerate() {
                *shared.add(q * THREADS + tid) = s.max;
                *shared.add((TILE + q) * THREADS + tid) = s.sum;
            }
            sync_threads();
            let mut stride = THREADS / 2;
            while stride > 0 {
                if tid < stride {
                    for q in 0..TILE {
                        let a = LogSumExp {
                            max: *shared.add(q * THREADS + tid),
                            sum: *shared.add((TILE + q) * THREADS + tid),
                        };
                        let b = LogSumExp {
                            max: *shared.add(q * THREADS + tid + stride),
                            sum: *shared.add((TILE + q) * THREADS + tid + stride),
                        };
                        let m = a.merge::<M>(b);
                        *shared.add(q * THREADS + tid) = m.max;
                        *shared.add((TILE + q) * THREADS + tid) = m.sum;
                    }
                }
                sync_threads();
                stride /= 2;
            }
        }
        if tid < valid {
            // SAFETY: pair first + tid < n, bin i < d.
            unsafe {
                let state = LogSumExp { max: *shared.add(tid * THREADS), sum: *shared.add((TILE + tid) * THREADS) };
                let lse = state.value::<M>();
                let index = (first + tid) * d_us + i;
                let m = *marginal.add(index);
                if !err.is_null() {
                    let old = *p_out.add(index);
                    let plan = if old == T::NEG_INFINITY || lse == T::NEG_INFINITY {
                        T::ZERO
                    } else {
                        M::exp(old * inv_reg + lse)
                    };
                    *err.add(index) = abs(plan - m);
                }
                *p_out.add(index) = log_domain_potential::<T, M>(m, reg, lse);
            }
        }
        // SAFETY: all threads; the next work item reuses the shared memory.
        unsafe { sync_threads() };
    });
}

/// Each row's part of every pair's entropic cost (see `OtCostF32Args`).
///
/// # Safety
/// As the kernels'.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn cost<T: Real, M: Math<T>>(c: *const T, n: u64, d: u64, reg: T, f: *const T, g: *const T, partial: *mut T) {
    let tid = thread_idx_x() as usize;
    let shared = dynamic_shared::<T>();
    let (n_us, d_us) = (n as usize, d as usize);
    for_each_row_tile(d, n, |i, first| {
        let valid = (n_us - first).min(TILE);
        let mut acc = [T::ZERO; TILE];
        let mut fi = [T::ZERO; TILE];
        for (q, v) in fi.iter_mut().enumerate().take(valid) {
            // SAFETY: pair first + q < n, bin i < d.
            *v = unsafe { *f.add((first + q) * d_us + i) };
        }
        let mut j = tid;
        while j < d_us {
            // SAFETY: i, j < d; first + q < n.
            unsafe {
                let cij = *c.add(i * d_us + j);
                for (q, a) in acc.iter_mut().enumerate().take(valid) {
                    *a = *a + cost_term::<T, M>(fi[q], *g.add((first + q) * d_us + j), cij, reg);
                }
            }
            j += THREADS;
        }
        // SAFETY: every thread reaches it; enough shared memory.
        unsafe { block_sum(shared, &acc) };
        if tid < valid {
            // SAFETY: pair first + tid < n, bin i < d.
            unsafe { *partial.add((first + tid) * d_us + i) = *shared.add(tid * THREADS) };
        }
        // SAFETY: all threads; the next work item reuses the shared memory.
        unsafe { sync_threads() };
    });
}

/// Declares the float32 and float64 kernels of one operation.
macro_rules! transport_kernels {
    ($($real:ty, $math:ty: $prepare:ident $prepare_args:ident, $scaling:ident $scaling_args:ident,
       $log:ident $log_args:ident, $potentials:ident $potentials_args:ident, $cost:ident $cost_args:ident;)*) => {$(
        kernel! {
            /// Copies a `d × d` matrix and its transpose, exponentiated as
            /// `e^(-x / reg)` (the Gibbs kernel, in float64 arithmetic) when
            /// `exponentiate` is 1.
            ///
            /// # Safety
            /// `m`, `out` and `out_t` hold `d * d` values; `d * d` fits u64.
            ///
            /// # Parameters
            /// - `m`, `d`: the matrix; `reg`: the regularisation;
            /// - `exponentiate`: 1 for the Gibbs kernel, 0 for a copy;
            /// - `out`, `out_t`: the result and its transpose.
            ///
            /// # Thread mapping
            /// Grid-stride loop over the `d * d` entries.
            pub unsafe extern "ptx-kernel" fn $prepare(
                m: *const $real,
                d: u64,
                reg: $real,
                exponentiate: u32,
                out: *mut $real,
                out_t: *mut $real,
            ) as $prepare_args {
                let du = d as usize;
                // SAFETY: k < d * d, so i, j < d.
                grid_stride(d * d, |k| unsafe {
                    let (i, j) = (k as usize / du, k as usize % du);
                    let x = *m.add(k as usize);
                    let v = if exponentiate == 1 { exp_f64(-(x as f64) / reg as f64) as $real } else { x };
                    *out.add(k as usize) = v;
                    *out_t.add(j * du + i) = v;
                });
            }
        }

        kernel! {
            /// One scaling-domain half-step for every pair: `x_out =
            /// marginal / (op x_in)` bin by bin (0 where the marginal is 0),
            /// with the marginal error of the old `x_out` on request.
            ///
            /// # Safety
            /// `op` holds `d * d` values; `x_in`, `marginal` and `x_out` `n * d`;
            /// `err` `n * d` or null; launched with `TRANSPORT_THREADS`
            /// threads and `TRANSPORT_SHARED_ELEMENTS` values of shared memory.
            ///
            /// # Parameters
            /// - `op`: the Gibbs kernel (or its transpose); `n`, `d`: pairs and bins;
            /// - `x_in`: the other side's scalings; `marginal`: this side's histograms;
            /// - `x_out`: this side's scalings (read, then written); `err`: errors or null.
            ///
            /// # Thread mapping
            /// A block per (row, tile of `TRANSPORT_TILE` pairs), grid-stride
            /// over them; its threads stride over the row's columns.
            pub unsafe extern "ptx-kernel" fn $scaling(
                op: *const $real,
                n: u64,
                d: u64,
                x_in: *const $real,
                marginal: *const $real,
                x_out: *mut $real,
                err: *mut $real,
            ) as $scaling_args {
                // SAFETY: the kernel's contract.
                unsafe { scaling_update::<$real>(op, n, d, x_in, marginal, x_out, err) }
            }
        }

        kernel! {
            /// One log-domain half-step for every pair: `p_out = reg ln
            /// marginal - reg logsumexp((p_in - c) / reg)` bin by bin, the
            /// log-sum-exp in one pass (running maximum and rescaled sum,
            /// merged across the block from the empty state), with the
            /// marginal error of the old `p_out` on request.
            ///
            /// # Safety
            /// As `ot_scaling_update_*`, with `c` the cost matrix (or its
            /// transpose) and `reg > 0`.
            ///
            /// # Parameters
            /// - `c`: the cost rows; `n`, `d`: pairs and bins; `reg`: the regularisation;
            /// - `p_in`: the other side's potentials; `marginal`: this side's histograms;
            /// - `p_out`: this side's potentials (read, then written); `err`: errors or null.
            ///
            /// # Thread mapping
            /// As `ot_scaling_update_*`.
            pub unsafe extern "ptx-kernel" fn $log(
                c: *const $real,
                n: u64,
                d: u64,
                reg: $real,
                p_in: *const $real,
                marginal: *const $real,
                p_out: *mut $real,
                err: *mut $real,
            ) as $log_args {
                // SAFETY: the kernel's contract.
                unsafe { log_update::<$real, $math>(c, n, d, reg, p_in, marginal, p_out, err) }
            }
        }

        kernel! {
            /// Scalings to potentials in place: `x = reg ln x` (-inf for 0).
            ///
            /// # Safety
            /// `x` holds `len` values.
            ///
            /// # Parameters
            /// - `x`, `len`: the values; `reg`: the regularisation.
            ///
            /// # Thread mapping
            /// Grid-stride loop, one value per iteration.
            pub unsafe extern "ptx-kernel" fn $potentials(x: *mut $real, len: u64, reg: $real) as $potentials_args {
                // SAFETY: k < len.
                grid_stride(len, |k| unsafe {
                    let v = x.add(k as usize);
                    *v = reg * <$math as Math<$real>>::ln(*v);
                });
            }
        }

        kernel! {
            /// Row `i`'s part of every pair's entropic cost, `sum_j plan_ij
            /// (f_i + g_j)` with `plan_ij = e^((f_i + g_j - c_ij) / reg)`.
            ///
            /// # Safety
            /// `c` holds `d * d` values; `f`, `g` and `partial` `n * d`;
            /// launched as `ot_scaling_update_*`.
            ///
            /// # Parameters
            /// - `c`: the cost matrix; `n`, `d`: pairs and bins; `reg`: the regularisation;
            /// - `f`, `g`: the potentials; `partial`: one value per (pair, row).
            ///
            /// # Thread mapping
            /// As `ot_scaling_update_*`.
            pub unsafe extern "ptx-kernel" fn $cost(
                c: *const $real,
                n: u64,
                d: u64,
                reg: $real,
                f: *const $real,
                g: *const $real,
                partial: *mut $real,
            ) as $cost_args {
                // SAFETY: the kernel's contract.
                unsafe { cost::<$real, $math>(c, n, d, reg, f, g, partial) }
            }
        }
    )*};
}

transport_kernels! {
    f32, Hardware: ot_prepare_f32 OtPrepareF32Args, ot_scaling_update_f32 OtScalingUpdateF32Args,
        ot_log_update_f32 OtLogUpdateF32Args, ot_potentials_f32 OtPotentialsF32Args, ot_cost_f32 OtCostF32Args;
    f64, Software: ot_prepare_f64 OtPrepareF64Args, ot_scaling_update_f64 OtScalingUpdateF64Args,
        ot_log_update_f64 OtLogUpdateF64Args, ot_potentials_f64 OtPotentialsF64Args, ot_cost_f64 OtCostF64Args;
}
