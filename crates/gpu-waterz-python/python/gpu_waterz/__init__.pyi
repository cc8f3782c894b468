from typing import Any, Iterator, Sequence, TypedDict

import numpy as np
from numpy.typing import NDArray

class Metrics(TypedDict):
    voi_split: float
    voi_merge: float
    rand_split: float
    rand_merge: float

class CudaVolume:
    """A uint64 segmentation in device memory (``__cuda_array_interface__``)."""

    __cuda_array_interface__: dict[str, Any]
    device: int
    def numpy(self) -> NDArray[np.uint64]: ...

def agglomerate(
    affs: NDArray[np.float32] | NDArray[np.uint8] | Any,
    thresholds: Sequence[float],
    gt: NDArray[np.integer] | None = None,
    fragments: NDArray[np.integer] | None = None,
    aff_threshold_low: float = 0.0001,
    aff_threshold_high: float = 0.9999,
    return_merge_history: bool = False,
    return_region_graph: bool = False,
    scoring_function: str = "OneMinus<MeanAffinity<RegionGraphType, ScoreValue>>",
    discretize_queue: int = 0,
    force_rebuild: bool = False,
    *,
    epsilon: float | None = None,
    backend: str = "auto",
    max_gpu_bytes: int | None = None,
) -> Iterator[tuple | NDArray[np.uint64] | Any]:
    """waterz's generator; numpy segmentations are one array relabelled in
    place per threshold, as in waterz; with CUDA input (torch, cupy) the
    segmentations are new device arrays of the same library (torch: int64)."""
    ...
__version__: str

def evaluate(segmentation: NDArray[np.uint64], gt: NDArray[np.uint64]) -> Metrics: ...
def empty_cache() -> None: ...

from . import watershed as watershed
