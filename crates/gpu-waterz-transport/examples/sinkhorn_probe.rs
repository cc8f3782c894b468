//! Times the float32 scaling-domain solve on the GPU, from device buffers
//! to the potentials and costs (what `gpu_waterz.transport.sinkhorn` runs
//! after its checks), for comparing kernel variants on one machine:
//! `sinkhorn_probe N D [ITERATIONS] [REPEATS]` prints the median of
//! REPEATS synchronised solves after three warm-ups, in milliseconds, and
//! the first pair's cost.

use gpu_waterz_runtime::Gpu;
use gpu_waterz_transport::{gpu, Config};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let (n, d) = match args[..] {
        [n, d, ..] => (n, d),
        _ => return Err("usage: sinkhorn_probe N D [ITERATIONS] [REPEATS]".into()),
    };
    let iterations = args.get(2).copied().unwrap_or(100);
    let repeats = args.get(3).copied().unwrap_or(15);
    // Histograms from a fixed linear congruential sequence, normalised; the
    // squared distance between bins on [0, 1).
    let mut state = 12345u64;
    let mut histograms = || -> Vec<f32> {
        let mut values: Vec<f64> = (0..n * d)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 + 0.05
            })
            .collect();
        for row in values.chunks_mut(d) {
            let sum: f64 = row.iter().sum();
            row.iter_mut().for_each(|v| *v /= sum);
        }
        values.into_iter().map(|v| v as f32).collect()
    };
    let (a, b) = (histograms(), histograms());
    let m: Vec<f32> = (0..d * d)
        .map(|k| {
            let (i, j) = ((k / d) as f64 / d as f64, (k % d) as f64 / d as f64);
            ((i - j) * (i - j)) as f32
        })
        .collect();
    let g = Gpu::new(0)?;
    let (a, b, m) = (g.upload(&a)?, g.upload(&b)?, g.upload(&m)?);
    let config = Config::new(0.05).num_iter(iterations).tol(0.0);
    let mut times = Vec::with_capacity(repeats);
    let mut cost = 0.0;
    for k in 0..repeats + 3 {
        g.synchronize()?;
        let start = std::time::Instant::now();
        let (report, _, _) = gpu::solve(&g, &a, &b, &m, (n, d), &config)?;
        g.synchronize()?;
        if k >= 3 {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        cost = report.cost[0];
    }
    times.sort_by(f64::total_cmp);
    println!("n {n} d {d} iterations {iterations}: median {:.3} ms (first cost {cost:.9e})", times[times.len() / 2]);
    Ok(())
}
