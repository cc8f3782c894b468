//! Stage progress on stderr.

use anyhow::Result;
use std::time::Instant;

/// Stage progress on stderr: a line per stage, completed in place with its
/// time, when stderr is a terminal and `--quiet` is not given.
pub struct Progress {
    enabled: bool,
    quiet: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        Self { enabled: !quiet && std::io::stderr().is_terminal(), quiet }
    }

    /// A note for the user (such as which backend runs and why), on stderr
    /// unless `--quiet` is given.
    pub fn note(&self, note: &str) {
        if !self.quiet {
            eprintln!("gpu-waterz: {note}");
        }
    }

    /// Runs `work` as the stage `name`.
    pub fn stage<T>(&self, name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
        if !self.enabled {
            return work();
        }
        eprint!("gpu-waterz: {name} ...");
        let start = Instant::now();
        let result = work();
        eprintln!("\rgpu-waterz: {name} ... {:.2} s", start.elapsed().as_secs_f64());
        result
    }
}
