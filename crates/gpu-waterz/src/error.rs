//! The facade's one error type.

use gpu_waterz_runtime::RuntimeError;

/// What kind of failure an [`Error`] is; match on this, not on messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input is malformed: shapes, values, thresholds, labels.
    InvalidInput,
    /// The chosen backend cannot honour the configuration (for example a
    /// scoring function the GPU backend does not implement).
    Unsupported,
    /// No usable GPU: no driver, no such device.
    NoGpu,
    /// The GPU has too little free memory for the volume.
    OutOfMemory,
    /// A CUDA driver call or a kernel launch failed.
    Gpu,
}

/// An error of the gpu-waterz pipeline: a [`kind`](Error::kind) to match on
/// and a message that says what to change.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    fn wrap(kind: ErrorKind, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self { kind, message: source.to_string(), source: Some(Box::new(source)) }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The message already says what the source says; the source is kept
        // for callers that want the stage's own error value.
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The kind of a GPU runtime failure.
fn runtime_kind(e: &RuntimeError) -> ErrorKind {
    match e {
        RuntimeError::NoDriver { .. } | RuntimeError::NoDevice { .. } => ErrorKind::NoGpu,
        RuntimeError::OutOfMemory { .. } => ErrorKind::OutOfMemory,
        RuntimeError::InvalidLaunch { .. } => ErrorKind::InvalidInput,
        _ => ErrorKind::Gpu,
    }
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        Self::wrap(runtime_kind(&e), e)
    }
}

impl From<gpu_waterz_core::CoreError> for Error {
    fn from(e: gpu_waterz_core::CoreError) -> Self {
        Self::wrap(ErrorKind::InvalidInput, e)
    }
}

impl From<gpu_waterz_eval::EvalError> for Error {
    fn from(e: gpu_waterz_eval::EvalError) -> Self {
        let kind = match &e {
            gpu_waterz_eval::EvalError::Gpu(r) => runtime_kind(r),
            _ => ErrorKind::InvalidInput,
        };
        Self::wrap(kind, e)
    }
}

impl From<gpu_waterz_watershed::WatershedError> for Error {
    fn from(e: gpu_waterz_watershed::WatershedError) -> Self {
        use gpu_waterz_watershed::WatershedError as E;
        let kind = match &e {
            E::Gpu(r) => runtime_kind(r),
            _ => ErrorKind::InvalidInput,
        };
        Self::wrap(kind, e)
    }
}

impl From<gpu_waterz_graph::GraphError> for Error {
    fn from(e: gpu_waterz_graph::GraphError) -> Self {
        use gpu_waterz_graph::GraphError as E;
        let kind = match &e {
            E::Gpu(r) => runtime_kind(r),
            _ => ErrorKind::InvalidInput,
        };
        Self::wrap(kind, e)
    }
}

impl From<gpu_waterz_parhac::ParhacError> for Error {
    fn from(e: gpu_waterz_parhac::ParhacError) -> Self {
        use gpu_waterz_parhac::ParhacError as E;
        let kind = match &e {
            E::Runtime(r) => runtime_kind(r),
            E::TooManyNodes { .. } | E::Unsupported(_) => ErrorKind::Unsupported,
            _ => ErrorKind::InvalidInput,
        };
        Self::wrap(kind, e)
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
