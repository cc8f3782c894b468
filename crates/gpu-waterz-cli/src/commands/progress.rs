//! Stage progress on stderr: spinners with elapsed times on a terminal,
//! one JSON object per line for pipelines (`--progress json`), nothing
//! with `--quiet` or `--progress none`.

use anyhow::Result;
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Spinners when stderr is a terminal, else only notes.
    Auto,
    /// One JSON object per line on stderr: `{"event": "stage_start" |
    /// "stage_done" | "note", ...}`.
    Json,
    /// Nothing but warnings and errors.
    None,
}

/// Stage progress and notes on stderr.
pub struct Progress {
    mode: Mode,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Terminal,
    Plain,
    Json,
    Silent,
}

impl Progress {
    /// Progress in `mode`; `quiet` silences everything but warnings.
    pub fn new(mode: ProgressMode, quiet: bool) -> Self {
        use std::io::IsTerminal;
        let mode = match (mode, quiet) {
            (_, true) | (ProgressMode::None, _) => Mode::Silent,
            (ProgressMode::Json, _) => Mode::Json,
            (ProgressMode::Auto, _) if std::io::stderr().is_terminal() => Mode::Terminal,
            (ProgressMode::Auto, _) => Mode::Plain,
        };
        Self { mode }
    }

    /// A note for the user (such as which backend runs and why).
    pub fn note(&self, note: &str) {
        match self.mode {
            Mode::Terminal | Mode::Plain => eprintln!("gpu-waterz: {note}"),
            Mode::Json => eprintln!("{}", serde_json::json!({ "event": "note", "message": note })),
            Mode::Silent => {}
        }
    }

    /// Runs `work` as the stage `name`.
    pub fn stage<T>(&self, name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
        let start = Instant::now();
        match self.mode {
            Mode::Terminal => {
                let bar = indicatif::ProgressBar::new_spinner();
                bar.set_style(
                    indicatif::ProgressStyle::with_template("gpu-waterz: {spinner} {msg} {elapsed_precise}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                bar.set_message(name.to_string());
                bar.enable_steady_tick(Duration::from_millis(120));
                let result = work();
                bar.finish_and_clear();
                let outcome = if result.is_ok() { "" } else { " (failed)" };
                eprintln!("gpu-waterz: {name}: {:.2} s{outcome}", start.elapsed().as_secs_f64());
                result
            }
            Mode::Json => {
                eprintln!("{}", serde_json::json!({ "event": "stage_start", "stage": name }));
                let result = work();
                eprintln!(
                    "{}",
                    serde_json::json!({
                        "event": "stage_done",
                        "stage": name,
                        "seconds": start.elapsed().as_secs_f64(),
                        "ok": result.is_ok(),
                    })
                );
                result
            }
            Mode::Plain | Mode::Silent => work(),
        }
    }
}
