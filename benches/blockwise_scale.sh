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
# Rand 1 where the partitions are identical).
#
# Each command's stdout and stderr (the CLI at -v: each step's seconds as
# it ends) go to files in $LOGS (default: the work folder's logs/), and
# are shown once the command ends, so that a run cut off by a time limit
# still leaves what it had written. $LIMIT (seconds, default 3000) kills
# each command that runs longer. Host and device memory are sampled every
# 2 s into $LOGS/memory.log (seconds, device MiB used, host GiB used).
# Each command's wall time and peak host memory come from /usr/bin/time;
# the blockwise summaries give the steps' seconds, the GPU's busy seconds
# per step and the peak device memory. Work in $WORK (default: a folder
# under /tmp); outputs there are removed at the end, the logs kept. $BACKEND
# picks the blockwise steps' backend (default gpu; cpu for a dry run
# anywhere).
set -uo pipefail
gw=$1 shape=$2 block=$3 mode=${4:-} backend=${BACKEND:-gpu} limit=${LIMIT:-3000}
work=${WORK:-$(mktemp -d /tmp/blockwise-scale.XXXXXX)}
logs=${LOGS:-$work/logs}
mkdir -p "$work" "$logs"
sampler=
if [ -r /proc/meminfo ]; then
    (
        start=$(date +%s)
        while true; do
            device=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
            host=$(free -g | awk '/^Mem/{print $3}')
            echo "$(($(date +%s) - start)) ${device:--} $host"
            sleep 2
        done
    ) >"$logs/memory.log" &
    sampler=$!
fi
cleanup() {
    [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
    rm -rf "$work"/*.zarr "$work"/*.npy
}
trap cleanup EXIT
status=0
# run NAME COMMAND...: runs the command with its output in $logs/NAME.*,
# then shows the summary lines.
run() {
    local name=$1
    shift
    echo "== $name: $*"
    /usr/bin/time -f "  wall %e s, peak host memory %M KB" -o "$logs/$name.time" \
        timeout -s KILL "$limit" "$@" >"$logs/$name.out" 2>"$logs/$name.err"
    local rc=$?
    [ "$rc" -ne 0 ] && { echo "  exit status $rc"; status=1; }
    tail -c 4000 "$logs/$name.out"
    grep -a "step done" "$logs/$name.err" | sed 's/\x1b\[[0-9;]*m//g' | tail -8
    [ "$rc" -ne 0 ] && tail -5 "$logs/$name.err"
    cat "$logs/$name.time"
    return 0
}
run blockwise-implicit "$gw" -v blockwise --implicit "$shape" --block "$block" --thresholds 0.3,0.5 \
    --backend "$backend" --out "$work/generated.zarr"
rm -rf "$work/generated.zarr"
if [ "$mode" = compare ]; then
    run generate "$gw" generate --implicit --shape "$shape" --uint8 --out-affinities "$work/a.npy" \
        --out-ground-truth "$work/gt.npy"
    rm -f "$work/gt.npy"
    run segment "$gw" segment --affinities "$work/a.npy" --thresholds 0.3,0.5 --out "$work/whole.zarr"
    run blockwise-file "$gw" -v blockwise --affinities "$work/a.npy" --block "$block" --thresholds 0.3,0.5 \
        --backend "$backend" --out "$work/blocks.zarr"
    for array in segmentation_0 segmentation_1; do
        run "evaluate-$array" "$gw" evaluate --segmentation "$work/blocks.zarr/$array" \
            --ground-truth "$work/whole.zarr/$array"
    done
fi
echo "== logs in $logs; memory (s, device MiB, host GiB), the highest host use:"
sort -k3 -n "$logs/memory.log" 2>/dev/null | tail -1
exit $status
