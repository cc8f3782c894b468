//! Captured launch sequences (CUDA graphs): the launches a closure queues,
//! recorded once and replayed with one call, which saves the host's
//! per-launch cost on runs of many small launches.

use crate::{DriverContext, Gpu, Result, RuntimeError};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// A recorded sequence of launches (see [`Gpu::capture`]). It reads and
/// writes the buffers the recorded launches were given, which must outlive
/// it.
pub struct Graph {
    graph: cudarc::driver::CudaGraph,
    /// The stream it was recorded on, which replays it.
    replay: Arc<CudaStream>,
    /// The device's stream, which every other launch uses.
    device: Arc<CudaStream>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").finish_non_exhaustive()
    }
}

impl Gpu {
    /// Records the launches that `record` makes on this thread into a
    /// graph instead of running them (they go to a stream of the graph's
    /// own: the device's default stream cannot be captured). Inside,
    /// nothing may synchronize, copy or allocate: those fail the capture,
    /// which is reported as an error (and nothing runs).
    pub fn capture(&self, record: impl FnOnce() -> Result<()>) -> Result<Graph> {
        let replay = self.ctx.new_stream().context(|| "creating a stream to record a graph on".into())?;
        replay
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .context(|| "beginning a graph capture".into())?;
        let thread = std::thread::current().id();
        self.capturing.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((thread, Arc::clone(&replay)));
        let recorded = record();
        self.capturing.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).retain(|(t, _)| *t != thread);
        let ended = replay.end_capture(CUgraphInstantiate_flags(0)).context(|| "ending a graph capture".into());
        recorded?;
        match ended? {
            Some(graph) => Ok(Graph { graph, replay, device: Arc::clone(&self.stream) }),
            None => Err(RuntimeError::InvalidLaunch { kernel: "graph", reason: "nothing was captured".into() }),
        }
    }

    /// The stream this thread's launches go to: the device's, or while
    /// this thread records a graph, the graph's.
    pub(crate) fn launch_stream(&self) -> cudarc::driver::sys::CUstream {
        let capturing = self.capturing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if capturing.is_empty() {
            return self.stream.cu_stream();
        }
        let thread = std::thread::current().id();
        match capturing.iter().find(|(t, _)| *t == thread) {
            Some((_, stream)) => stream.cu_stream(),
            None => self.stream.cu_stream(),
        }
    }
}

impl Graph {
    /// Replays the recorded launches after everything queued on the device
    /// so far, and before anything queued after this call.
    pub fn launch(&self) -> Result<()> {
        self.replay.join(&self.device).context(|| "ordering a graph after the device's work".into())?;
        self.graph.launch().context(|| "launching a graph".into())?;
        self.device.join(&self.replay).context(|| "ordering the device's work after a graph".into())
    }
}
