#!/usr/bin/env bash
# The blockwise decode at scale, file to file with the CLI, and the
# comparison with the whole-volume decode where the volume fits.
#
#   benches/blockwise_scale.sh GPU_WATERZ SHAPE BLOCK [compare]
#
# GPU_WATERZ: the CLI binary; SHAPE: z,y,x of the generated volume
# (`ImplicitCells`, made per block: on the GPU with --backend gpu); BLOCK:
# z,y,x. With `compare`, the same volume is also written as a uint8 .npy
# (`generate --implicit --uint8`), decoded whole (`segment`) and blockwise
# from that file, and the outputs are compared with `evaluate` (VOI 0 and
# Rand 1 where the partitions are identical). Each command's wall time and
# peak host memory come from /usr/bin/time; the blockwise summaries give
# the steps' seconds and the peak device memory. Work in $WORK (default: a
# folder under /tmp); outputs there are removed at the end. $BACKEND picks
# the blockwise steps' backend (default gpu; cpu for a dry run anywhere).
set -euo pipefail
gw=$1 shape=$2 block=$3 mode=${4:-} backend=${BACKEND:-gpu}
work=${WORK:-$(mktemp -d /tmp/blockwise-scale.XXXXXX)}
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
timed() { /usr/bin/time -f "  wall %e s, peak host memory %M KB" "$@"; }
echo "== blockwise --implicit $shape --block $block --backend $backend"
timed "$gw" blockwise --implicit "$shape" --block "$block" --thresholds 0.3,0.5 --backend "$backend" \
    --out "$work/generated.zarr"
rm -rf "$work/generated.zarr"
if [ "$mode" = compare ]; then
    echo "== generate --implicit --shape $shape --uint8"
    timed "$gw" generate --implicit --shape "$shape" --uint8 --out-affinities "$work/a.npy" \
        --out-ground-truth "$work/gt.npy"
    rm -f "$work/gt.npy"
    echo "== segment (whole volume)"
    timed "$gw" segment --affinities "$work/a.npy" --thresholds 0.3,0.5 --out "$work/whole.zarr"
    echo "== blockwise --affinities (file)"
    timed "$gw" blockwise --affinities "$work/a.npy" --block "$block" --thresholds 0.3,0.5 --backend "$backend" \
        --out "$work/blocks.zarr"
    for array in segmentation_0 segmentation_1; do
        echo "== evaluate $array: blockwise against whole"
        "$gw" evaluate --segmentation "$work/blocks.zarr/$array" --ground-truth "$work/whole.zarr/$array"
    done
fi
