//! Per-stage wall times of device work, for profiling.

use crate::device::Gpu;
use crate::Result;

/// Per-stage wall times of device work: when enabled, each
/// [`StageTimer::mark`] synchronizes the stream and records the time since
/// the previous mark; when disabled it does nothing (and adds no sync).
#[derive(Debug)]
pub struct StageTimer {
    gpu: Gpu,
    enabled: bool,
    last: std::time::Instant,
    stages: Vec<(&'static str, f64)>,
    max_used_bytes: u64,
}

impl StageTimer {
    /// A timer that records only when `enabled`.
    pub fn new(gpu: &Gpu, enabled: bool) -> Result<Self> {
        if enabled {
            gpu.synchronize()?;
        }
        Ok(Self { gpu: gpu.clone(), enabled, last: std::time::Instant::now(), stages: Vec::new(), max_used_bytes: 0 })
    }

    /// Ends stage `name`.
    pub fn mark(&mut self, name: &'static str) -> Result<()> {
        if self.enabled {
            self.gpu.synchronize()?;
            let now = std::time::Instant::now();
            self.stages.push((name, (now - self.last).as_secs_f64() * 1e3));
            let (free, total) = self.gpu.memory_info()?;
            self.max_used_bytes = self.max_used_bytes.max(total - free);
            self.last = std::time::Instant::now();
        }
        Ok(())
    }

    /// The most device memory in use (all processes) seen at a mark.
    pub fn max_used_bytes(&self) -> u64 {
        self.max_used_bytes
    }

    /// The recorded stages and their milliseconds.
    pub fn stages(&self) -> &[(&'static str, f64)] {
        &self.stages
    }
}
