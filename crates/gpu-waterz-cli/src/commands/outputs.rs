//! Output files that exist whole or not at all, across several files.

use std::path::PathBuf;

/// The files a command has written so far; removed when dropped without
/// [`Outputs::keep`], so that a failure part-way leaves no output.
#[derive(Default)]
pub struct Outputs(Vec<PathBuf>);

impl Outputs {
    /// Records a written file.
    pub fn push(&mut self, path: PathBuf) {
        self.0.push(path);
    }

    /// Keeps every file: the command succeeded.
    pub fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}
