//! The Sinkhorn kernels' launches: every `unsafe` of this crate. Each safe
//! function checks the buffer lengths its kernel reads and writes.

use gpu_waterz_abi::transport::*;
use gpu_waterz_runtime::{check_len, DeviceBuffer, Gpu, LaunchConfig, Result};

/// The launch of a row kernel: one block per (row, tile) work item, up to
/// 16 blocks per multiprocessor, with its shared memory for `T`.
fn row_config<T>(gpu: &Gpu, n: u64, d: u64) -> LaunchConfig {
    let works = d * n.div_ceil(TRANSPORT_TILE as u64);
    let blocks = works.min(gpu.multiprocessor_count() as u64 * 16).max(1) as u32;
    LaunchConfig {
        blocks,
        threads: TRANSPORT_THREADS,
        shared_bytes: TRANSPORT_SHARED_ELEMENTS * std::mem::size_of::<T>() as u32,
    }
}

/// Checks what a row kernel reads and writes: the `d × d` matrix, the
/// `n × d` vectors, and the `n × d` errors when asked for; returns the
/// errors' address (null without).
fn check_row_kernel<T: gpu_waterz_runtime::DeviceElement>(
    gpu: &Gpu,
    kernel: &'static str,
    matrix: (&str, &DeviceBuffer<T>),
    n: u64,
    d: u64,
    vectors: [(&str, &DeviceBuffer<T>); 3],
    err: Option<&mut DeviceBuffer<T>>,
) -> Result<*mut T> {
    gpu.check_device(matrix.1, matrix.0)?;
    check_len(kernel, matrix.0, matrix.1, d * d)?;
    for (what, b) in vectors {
        gpu.check_device(b, what)?;
        check_len(kernel, what, b, n * d)?;
    }
    match err {
        Some(e) => {
            gpu.check_device(e, "err")?;
            check_len(kernel, "err", e, n * d)?;
            Ok(e.as_mut_ptr())
        }
        None => Ok(std::ptr::null_mut()),
    }
}

/// The kernels of one float type.
pub(crate) trait Kernels: Sized + gpu_waterz_runtime::DeviceElement {
    /// `out = f(m)`, `out_t` its transpose (`ot_prepare_*`).
    fn prepare(
        gpu: &Gpu,
        m: &DeviceBuffer<Self>,
        d: u64,
        reg: Self,
        exponentiate: bool,
        out: &mut DeviceBuffer<Self>,
        out_t: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
    /// A scaling-domain half-step (`ot_scaling_update_*`).
    #[allow(clippy::too_many_arguments)]
    fn scaling_update(
        gpu: &Gpu,
        op: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        x_in: &DeviceBuffer<Self>,
        marginal: &DeviceBuffer<Self>,
        x_out: &mut DeviceBuffer<Self>,
        err: Option<&mut DeviceBuffer<Self>>,
    ) -> Result<()>;
    /// A log-domain half-step (`ot_log_update_*`).
    #[allow(clippy::too_many_arguments)]
    fn log_update(
        gpu: &Gpu,
        c: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        reg: Self,
        p_in: &DeviceBuffer<Self>,
        marginal: &DeviceBuffer<Self>,
        p_out: &mut DeviceBuffer<Self>,
        err: Option<&mut DeviceBuffer<Self>>,
    ) -> Result<()>;
    /// Scalings to potentials in place (`ot_potentials_*`).
    fn potentials(gpu: &Gpu, x: &mut DeviceBuffer<Self>, len: u64, reg: Self) -> Result<()>;
    /// Each (pair, row)'s part of the entropic cost (`ot_cost_*`).
    #[allow(clippy::too_many_arguments)]
    fn cost(
        gpu: &Gpu,
        c: &DeviceBuffer<Self>,
        n: u64,
        d: u64,
        reg: Self,
        f: &DeviceBuffer<Self>,
        g: &DeviceBuffer<Self>,
        partial: &mut DeviceBuffer<Self>,
    ) -> Result<()>;
}

macro_rules! kernels {
    ($real:ty, $prepare:ident, $scaling:ident, $log:ident, $potentials:ident, $cost:ident) => {
        impl Kernels for $real {
            fn prepare(
                gpu: &Gpu,
                m: &DeviceBuffer<Self>,
                d: u64,
                reg: Self,
                exponentiate: bool,
                out: &mut DeviceBuffer<Self>,
                out_t: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                const K: &str = stringify!($prepare);
                let dd = d * d;
                for (what, b) in [("m", m as &DeviceBuffer<Self>), ("out", out), ("out_t", out_t)] {
                    gpu.check_device(b, what)?;
                    check_len(K, what, b, dd)?;
                }
                let args = $prepare {
                    m: m.as_ptr(),
                    d,
                    reg,
                    exponentiate: exponentiate as u32,
                    out: out.as_mut_ptr(),
                    out_t: out_t.as_mut_ptr(),
                };
                // SAFETY: the three buffers hold d * d values (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(dd), args) }
            }

            fn scaling_update(
                gpu: &Gpu,
                op: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                x_in: &DeviceBuffer<Self>,
                marginal: &DeviceBuffer<Self>,
                x_out: &mut DeviceBuffer<Self>,
                err: Option<&mut DeviceBuffer<Self>>,
            ) -> Result<()> {
                let vectors = [("x_in", x_in), ("marginal", marginal), ("x_out", &*x_out)];
                let err = check_row_kernel(gpu, stringify!($scaling), ("op", op), n, d, vectors, err)?;
                let args = $scaling {
                    op: op.as_ptr(),
                    n,
                    d,
                    x_in: x_in.as_ptr(),
                    marginal: marginal.as_ptr(),
                    x_out: x_out.as_mut_ptr(),
                    err,
                };
                // SAFETY: `op` holds d * d values, the vectors n * d, `err`
                // n * d or is null (checked); the launch has
                // TRANSPORT_THREADS threads and the shared memory for Self.
                unsafe { gpu.launch(row_config::<Self>(gpu, n, d), args) }
            }

            fn log_update(
                gpu: &Gpu,
                c: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                reg: Self,
                p_in: &DeviceBuffer<Self>,
                marginal: &DeviceBuffer<Self>,
                p_out: &mut DeviceBuffer<Self>,
                err: Option<&mut DeviceBuffer<Self>>,
            ) -> Result<()> {
                let vectors = [("p_in", p_in), ("marginal", marginal), ("p_out", &*p_out)];
                let err = check_row_kernel(gpu, stringify!($log), ("c", c), n, d, vectors, err)?;
                let args = $log {
                    c: c.as_ptr(),
                    n,
                    d,
                    reg,
                    p_in: p_in.as_ptr(),
                    marginal: marginal.as_ptr(),
                    p_out: p_out.as_mut_ptr(),
                    err,
                };
                // SAFETY: as in `scaling_update`.
                unsafe { gpu.launch(row_config::<Self>(gpu, n, d), args) }
            }

            fn potentials(gpu: &Gpu, x: &mut DeviceBuffer<Self>, len: u64, reg: Self) -> Result<()> {
                gpu.check_device(x, "x")?;
                check_len(stringify!($potentials), "x", x, len)?;
                let args = $potentials { x: x.as_mut_ptr(), len, reg };
                // SAFETY: `x` holds `len` values (checked).
                unsafe { gpu.launch(gpu.grid_stride_config(len), args) }
            }

            fn cost(
                gpu: &Gpu,
                c: &DeviceBuffer<Self>,
                n: u64,
                d: u64,
                reg: Self,
                f: &DeviceBuffer<Self>,
                g: &DeviceBuffer<Self>,
                partial: &mut DeviceBuffer<Self>,
            ) -> Result<()> {
                let vectors = [("f", f), ("g", g), ("partial", &*partial)];
                check_row_kernel(gpu, stringify!($cost), ("c", c), n, d, vectors, None)?;
                let args =
                    $cost { c: c.as_ptr(), n, d, reg, f: f.as_ptr(), g: g.as_ptr(), partial: partial.as_mut_ptr() };
                // SAFETY: as in `scaling_update`.
                unsafe { gpu.launch(row_config::<Self>(gpu, n, d), args) }
            }
        }
    };
}

kernels!(f32, OtPrepareF32Args, OtScalingUpdateF32Args, OtLogUpdateF32Args, OtPotentialsF32Args, OtCostF32Args);
kernels!(f64, OtPrepareF64Args, OtScalingUpdateF64Args, OtLogUpdateF64Args, OtPotentialsF64Args, OtCostF64Args);
