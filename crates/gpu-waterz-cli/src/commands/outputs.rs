//! Outputs that exist whole or not at all.
//!
//! [`Outputs`] removes the single files a command wrote when it fails
//! part-way. [`OutputFolder`] makes a whole output folder transactional: a
//! run writes into a hidden sibling staging folder and renames it into
//! place only once every file is written, so a folder holds one run's
//! complete result or its previous content, never a mix:
//! - a lock file beside the folder keeps a second run from writing into it
//!   at the same time (a lock left by a killed run is recognised by its
//!   process id and taken over);
//! - a non-empty folder is refused unless `--overwrite`, which replaces the
//!   previous result only after the new one is complete (the old folder or
//!   file is set aside, the new one renamed into place, the old one
//!   removed);
//! - leftovers of killed runs (staging folders, a set-aside previous
//!   result, temporary files of older versions) are removed, or the
//!   previous result put back, by the next run.

use anyhow::{bail, Context, Result};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

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

/// Whether process `pid` is running (on Linux, through `/proc`; elsewhere
/// every process counts as running, so a stale lock must be removed by
/// hand, as its message says).
fn process_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    if !proc.is_dir() {
        return true;
    }
    proc.join(pid.to_string()).exists()
}

/// The process id in a leftover's name `.<name>.<kind>-<pid>`.
fn leftover_pid(file_name: &str, prefix: &str) -> Option<u32> {
    file_name.strip_prefix(prefix)?.parse().ok()
}

/// An output folder (or single output file) written transactionally (see
/// the module docs).
pub struct OutputFolder {
    target: PathBuf,
    staging: PathBuf,
    previous: PathBuf,
    lock: PathBuf,
    /// The target is one file (an HDF5 output), not a folder.
    file: bool,
    committed: bool,
}

impl OutputFolder {
    /// Takes the folder `target` for this run: the lock, the clean-up of
    /// killed runs' leftovers, and a fresh staging folder. Fails at once
    /// when another run holds the lock, when `target` is a file, or when it
    /// is a non-empty folder and `overwrite` is not set.
    /// With `file`, the target is one file: the staging location is then a
    /// file, not created here, and an existing target counts as non-empty.
    pub fn begin(target: &Path, overwrite: bool, file: bool) -> Result<Self> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| n != "." && n != "..")
            .with_context(|| format!("the output {} must name a folder or file", target.display()))?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
        let pid = std::process::id();
        let lock = parent.join(format!(".{name}.gpu-waterz-lock"));
        take_lock(&lock, target)?;
        let mut folder = Self {
            target: target.to_path_buf(),
            staging: parent.join(format!(".{name}.staging-{pid}")),
            previous: parent.join(format!(".{name}.previous-{pid}")),
            lock,
            file,
            committed: false,
        };
        folder.clean_up_leftovers(&parent, &name)?;
        if folder.file && folder.target.exists() {
            if folder.target.is_dir() {
                bail!("the output {} is a folder, not a file", folder.target.display());
            }
            if !overwrite {
                bail!(
                    "the output {} exists: pass --overwrite to replace it once the new result is complete, or choose \
                     another path",
                    folder.target.display()
                );
            }
        } else if folder.target.exists() {
            if !folder.target.is_dir() {
                bail!("the output {} is a file, not a folder", folder.target.display());
            }
            let mut entries = std::fs::read_dir(&folder.target)
                .with_context(|| format!("reading {}", folder.target.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>();
            if !entries.is_empty() && !overwrite {
                entries.sort();
                let more = if entries.len() > 4 { ", …" } else { "" };
                entries.truncate(4);
                bail!(
                    "the output {} is not empty (it holds {}{more}): pass --overwrite to replace it once the new result \
                     is complete, or choose another folder",
                    folder.target.display(),
                    entries.join(", ")
                );
            }
        }
        if !folder.file {
            std::fs::create_dir(&folder.staging).with_context(|| format!("creating {}", folder.staging.display()))?;
        }
        Ok(folder)
    }

    /// Where this run writes its files (or its one file), renamed to the
    /// target on [`OutputFolder::commit`].
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Removes what killed runs left beside the target: staging folders
    /// (incomplete results), and a previous result set aside by a run killed
    /// between its two renames, which is put back when the target is
    /// missing. Inside the target, temporary files of older versions go.
    /// Runs with the lock held, so every such leftover is a dead run's.
    fn clean_up_leftovers(&mut self, parent: &Path, name: &str) -> Result<()> {
        let staging_prefix = format!(".{name}.staging-");
        let previous_prefix = format!(".{name}.previous-");
        for entry in std::fs::read_dir(parent).with_context(|| format!("reading {}", parent.display()))? {
            let Ok(entry) = entry else { continue };
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if leftover_pid(&file_name, &staging_prefix).is_some() {
                remove_any(&path).with_context(|| format!("removing the incomplete result {}", path.display()))?;
            } else if leftover_pid(&file_name, &previous_prefix).is_some() {
                if self.target.exists() {
                    remove_any(&path).with_context(|| format!("removing the replaced result {}", path.display()))?;
                } else {
                    std::fs::rename(&path, &self.target).with_context(|| {
                        format!("putting the previous result {} back as {}", path.display(), self.target.display())
                    })?;
                }
            }
        }
        if self.target.is_dir() {
            for entry in std::fs::read_dir(&self.target)?.filter_map(|e| e.ok()) {
                let file_name = entry.file_name().to_string_lossy().into_owned();
                let temporary = file_name.starts_with('.')
                    && file_name.rsplit_once(".tmp-").is_some_and(|(_, pid)| pid.parse::<u32>().is_ok());
                if temporary {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(())
    }

    /// Puts the staging folder (or file) in place of the target: at once
    /// when the target is absent or an empty folder; else the previous
    /// result is set aside, the new one renamed into place, and the
    /// previous one removed. With
    /// `durable`, every file is flushed to the disk first.
    pub fn commit(mut self, durable: bool) -> Result<()> {
        if durable {
            gpu_waterz_cli::io::sync_tree(&self.staging)
                .with_context(|| format!("flushing {} to the disk", self.staging.display()))?;
        }
        if self.file {
            // A rename onto an existing file would replace it in one step,
            // but ext4 (auto_da_alloc) starts writing the new file back
            // within such a rename and frees the old one there: 0.35 s for
            // 1 GiB on the device machine, against 0.16 s to remove the old
            // file alone and nothing for a rename onto no file
            // (docs/BENCHMARKS.md, session 44). So a file too is set aside
            // first; a run killed between the renames has it put back.
            if std::fs::symlink_metadata(&self.target).is_ok_and(|m| m.is_file()) {
                std::fs::rename(&self.target, &self.previous)
                    .with_context(|| format!("setting the previous result {} aside", self.target.display()))?;
            }
        } else if self.target.is_dir() {
            let empty = std::fs::read_dir(&self.target)?.next().is_none();
            if empty {
                std::fs::remove_dir(&self.target)
                    .with_context(|| format!("replacing the empty {}", self.target.display()))?;
            } else {
                std::fs::rename(&self.target, &self.previous)
                    .with_context(|| format!("setting the previous result {} aside", self.target.display()))?;
            }
        }
        std::fs::rename(&self.staging, &self.target)
            .with_context(|| format!("moving the result into {}", self.target.display()))?;
        self.committed = true;
        if self.previous.exists() {
            remove_any(&self.previous)
                .with_context(|| format!("removing the replaced result {}", self.previous.display()))?;
        }
        Ok(())
    }
}

impl Drop for OutputFolder {
    fn drop(&mut self) {
        if !self.committed {
            let _ = remove_any(&self.staging);
            if self.previous.exists() && !self.target.exists() {
                let _ = std::fs::rename(&self.previous, &self.target);
            }
        }
        let _ = std::fs::remove_file(&self.lock);
    }
}

/// Removes a file or a folder with its content.
fn remove_any(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Creates the lock file `lock` (holding this process's id) for `target`;
/// takes over a lock whose process is gone, fails on a live one.
fn take_lock(lock: &Path, target: &Path) -> Result<()> {
    for _ in 0..2 {
        match OpenOptions::new().write(true).create_new(true).open(lock) {
            Ok(mut f) => {
                write!(f, "{}", std::process::id()).with_context(|| format!("writing {}", lock.display()))?;
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let holder = std::fs::read_to_string(lock).unwrap_or_default();
                match holder.trim().parse::<u32>() {
                    Ok(pid) if process_alive(pid) => bail!(
                        "another gpu-waterz run (process {pid}) is writing into {}; wait for it, or remove {} if \
                         no such process runs",
                        target.display(),
                        lock.display()
                    ),
                    // A killed run's lock (or one cut short while written).
                    _ => std::fs::remove_file(lock)
                        .with_context(|| format!("removing the stale lock {}", lock.display()))?,
                }
            }
            Err(e) => return Err(e).with_context(|| format!("creating the lock {}", lock.display())),
        }
    }
    bail!("could not take the lock {} for {}", lock.display(), target.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpu-waterz-outputs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn a_result_appears_whole_and_replaces_only_when_complete() {
        let dir = scratch("whole");
        let target = dir.join("out");
        let run = OutputFolder::begin(&target, false, false).unwrap();
        std::fs::write(run.path().join("a"), "1").unwrap();
        assert!(!target.exists(), "nothing shows before the commit");
        run.commit(false).unwrap();
        assert_eq!(files(&target), ["a"]);
        assert_eq!(files(&dir), ["out"], "no lock or staging left");
        // Non-empty: refused without --overwrite, before anything is written.
        let e = OutputFolder::begin(&target, false, false).err().unwrap().to_string();
        assert!(e.contains("not empty") && e.contains("--overwrite"), "{e}");
        // A failed run keeps the previous result.
        let run = OutputFolder::begin(&target, true, false).unwrap();
        std::fs::write(run.path().join("b"), "2").unwrap();
        drop(run);
        assert_eq!(files(&target), ["a"]);
        assert_eq!(files(&dir), ["out"]);
        // A complete one replaces it, stale files included.
        let run = OutputFolder::begin(&target, true, false).unwrap();
        std::fs::write(run.path().join("c"), "3").unwrap();
        run.commit(true).unwrap();
        assert_eq!(files(&target), ["c"]);
        assert_eq!(files(&dir), ["out"]);
    }

    #[test]
    fn a_file_replaces_the_previous_one_through_a_name_aside() {
        let dir = scratch("file");
        let target = dir.join("out.npy");
        let run = OutputFolder::begin(&target, false, true).unwrap();
        std::fs::write(run.path(), "1").unwrap();
        run.commit(false).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "1");
        // Refused without --overwrite; a failed run keeps the file.
        let e = OutputFolder::begin(&target, false, true).err().unwrap().to_string();
        assert!(e.contains("exists") && e.contains("--overwrite"), "{e}");
        let run = OutputFolder::begin(&target, true, true).unwrap();
        std::fs::write(run.path(), "2").unwrap();
        drop(run);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "1");
        assert_eq!(files(&dir), ["out.npy"]);
        // A complete one replaces it: the old file set aside, then removed.
        let run = OutputFolder::begin(&target, true, true).unwrap();
        std::fs::write(run.path(), "3").unwrap();
        run.commit(false).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "3");
        assert_eq!(files(&dir), ["out.npy"], "no previous file, staging or lock left");
        // A run killed between the two renames: its set-aside file comes
        // back when the target is missing.
        std::fs::rename(&target, dir.join(".out.npy.previous-4294967294")).unwrap();
        let e = OutputFolder::begin(&target, false, true).err().unwrap().to_string();
        assert!(e.contains("exists"), "the previous file is back: {e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "3");
        assert_eq!(files(&dir), ["out.npy"]);
    }

    #[test]
    fn a_live_lock_is_refused_and_dead_runs_leftovers_are_cleaned() {
        let dir = scratch("locks");
        let target = dir.join("out");
        let first = OutputFolder::begin(&target, false, false).unwrap();
        let e = OutputFolder::begin(&target, false, false).err().unwrap().to_string();
        assert!(e.contains("another gpu-waterz run"), "{e}");
        drop(first);
        // A killed run: its lock (a process id that does not run), its
        // staging folder, a set-aside previous result with the target gone,
        // and an older version's temporary file.
        std::fs::write(dir.join(".out.gpu-waterz-lock"), "4294967294").unwrap();
        std::fs::create_dir(dir.join(".out.staging-4294967294")).unwrap();
        std::fs::create_dir(dir.join(".out.previous-4294967294")).unwrap();
        std::fs::write(dir.join(".out.previous-4294967294").join("summary.json"), "{}").unwrap();
        let run = OutputFolder::begin(&target, false, false).err().unwrap().to_string();
        assert!(run.contains("not empty"), "the previous result is back: {run}");
        assert_eq!(files(&target), ["summary.json"]);
        assert_eq!(files(&dir), ["out"]);
        std::fs::write(target.join(".segmentation_0.npy.tmp-77"), "x").unwrap();
        let run = OutputFolder::begin(&target, true, false).unwrap();
        assert_eq!(files(&target), ["summary.json"], "older temporary files go");
        drop(run);
    }
}
