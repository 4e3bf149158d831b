//! The timing loop the micro-benchmarks share (`bench-validation`, `bench-sse`), included by
//! `#[path]`: each example is a crate of its own.

use std::time::{Duration, Instant};

/// Batches per measurement; the figure is their median.
pub const BATCHES: usize = 15;

/// Median nanoseconds per call of `f`, over `BATCHES` batches sized to take about `budget` in all.
pub fn time<F: FnMut()>(budget: Duration, mut f: F) -> f64 {
    // Calibrate: how many calls fit in one batch.
    let probe = Instant::now();
    let mut n = 0u64;
    while probe.elapsed() < Duration::from_millis(20) {
        f();
        n += 1;
    }
    let per_call = probe.elapsed().as_secs_f64() / n as f64;
    let batch = ((budget.as_secs_f64() / BATCHES as f64 / per_call) as u64).max(1);
    let mut samples: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[BATCHES / 2]
}
