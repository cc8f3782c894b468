#!/usr/bin/env bash
# Several builds of the CLI on one generated volume, alternating, on one
# machine: the blockwise decode file to file, one markdown row per run.
#
#   benches/blockwise_ab.sh SHAPE BLOCK ROUNDS NAME=CLI [NAME=CLI ...]
#
# SHAPE, BLOCK: z,y,x of the generated volume (`--implicit`, made per block
# on the GPU with the default backend) and of the blocks; ROUNDS: how many
# times each CLI runs, in turns (A B C A B C ...), so that a drift of the
# machine shows in every column. Each row: the run's seconds (the CLI's
# own, then the wall time), steps 1 to 7, the GPU's busy seconds in steps
# 1, 3, 5 and the merge, the peak host memory and the output's size. $VV
# set to a NAME runs that CLI once more at -vv, its log kept in $LOGS
# (default /tmp) and summarised by benches/turn_gaps.py. $LIMIT (seconds,
# default 600) kills a run that takes longer; $OUT_DIR (default /tmp) holds
# the output, removed after each run.
set -uo pipefail
shape=$1 block=$2 rounds=$3
shift 3
limit=${LIMIT:-600} logs=${LOGS:-/tmp} out_dir=${OUT_DIR:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
echo "| CLI | seconds (wall) | steps 1 / 2 / 3 / 4 / 5 / 6 / 7 | GPU busy 1 / 3 / 5 / merge | peak host | output |"
echo "| --- | --- | --- | --- | --- | --- |"
# run NAME CLI VERBOSITY: one decode, its row printed.
run() {
    local name=$1 cli=$2 verbosity=$3 out="$out_dir/blockwise-ab.zarr"
    rm -rf "$out"
    /usr/bin/time -f "%e %M" -o "$logs/$name.time" timeout -s KILL "$limit" "$cli" "$verbosity" blockwise \
        --implicit "$shape" --block "$block" --thresholds 0.3,0.5 --out "$out" >"$logs/$name.out" 2>"$logs/$name.err"
    local rc=$? size
    size=$(du -sh "$out" 2>/dev/null | cut -f1)
    rm -rf "$out"
    python3 - "$name" "$rc" "$logs/$name.out" "$logs/$name.time" "${size:--}" <<'PY'
import json, sys
name, rc, out, timing, size = sys.argv[1:]
wall, peak = open(timing).read().split()[-2:]
try:
    s = json.loads(open(out).read().strip().splitlines()[-1])
except (ValueError, IndexError):
    print(f"| {name} | exit status {rc} | - | - | - | - |")
    sys.exit()
steps = s["step_seconds"]
order = ["local_plateaus", "settle_open_plateaus", "local_basins", "fragment_ids", "block_edges", "merge",
         "relabel_and_write"]
busy = s.get("gpu_busy_seconds") or {}
gpu = " / ".join(f"{busy.get(k, 0):.2f}" for k in ["local_plateaus", "local_basins", "block_edges", "merge"])
print(f"| {name} | {s['seconds']:.2f} ({float(wall):.2f}) | {' / '.join(f'{steps[k]:.2f}' for k in order)} | "
      f"{gpu} | {int(peak) / 1e6:.1f} GB | {size} |")
PY
}
for ((round = 1; round <= rounds; round++)); do
    for pair in "$@"; do
        run "${pair%%=*}-$round" "${pair#*=}" -v
    done
done
if [ -n "${VV:-}" ]; then
    for pair in "$@"; do
        if [ "${pair%%=*}" = "$VV" ]; then
            run "$VV-vv" "${pair#*=}" -vv
            python3 "$here/turn_gaps.py" "$logs/$VV-vv.err" --gaps 3
        fi
    done
fi
