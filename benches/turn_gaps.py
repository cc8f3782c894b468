#!/usr/bin/env python3
"""Where the GPU waits in a blockwise run: reads the CLI's `-vv` log
(`gpu-waterz -vv blockwise ... 2> LOG`, gzip or plain) and prints, per step,
its wall seconds, the seconds the GPU's turns took, the idle rest, and the
idle gaps between consecutive turns.

    python3 benches/turn_gaps.py LOG [--gaps N]

At `-vv` each line starts with the seconds since the start, and each of a
turn's stage lines ("GPU block ... stages_ms=[(stage, ms), ...]") is logged
at the end of its stages, which end with a synchronisation: the line's
stages ran from its time minus their sum to its time. Lines whose intervals
touch (within 0.2 ms) are one turn. A step is the time between the "step
done" line before it and its own. From session 33's logs on, the blocks'
lines ("block's work in its step", "GPU turn") also give, per step, the
mean time a block's thread spends waiting for the GPU, in its turns and on
the host. Without timestamps (a log from before
session 29, or at -v) there is nothing to place, and the script says so.
"""

import argparse
import gzip
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
TIME = re.compile(r"^\s*([0-9.]+)s\s")
STAGES = re.compile(r'stages_ms=\[(.*?)\]')
STAGE = re.compile(r'\("[^"]*",\s*([0-9.eE+-]+)\)')
STEP = re.compile(r'step done step="([a-z_]+)" seconds=([0-9.eE+-]+)')
BLOCK = re.compile(r'block\'s work in its step step="([a-z_]+)" seconds=([0-9.eE+-]+)')
TURN = re.compile(r'GPU turn step="([a-z_]+)" waited_ms=([0-9.eE+-]+) turn_ms=([0-9.eE+-]+)')
# Touching intervals closer than this are one turn.
JOIN = 0.2e-3


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            yield ANSI.sub("", line)


def parse(path):
    """The stage intervals (start, end) in seconds, the steps (name,
    start, end), and per step each block's seconds and each GPU turn's
    (wait, length) in seconds (from session 33's logs on), from the log at
    `path`."""
    intervals, steps, blocks, waits = [], [], {}, {}
    last_step_end = 0.0
    for line in read_lines(path):
        block = BLOCK.search(line)
        if block:
            blocks.setdefault(block.group(1), []).append(float(block.group(2)))
            continue
        turn = TURN.search(line)
        if turn:
            waits.setdefault(turn.group(1), []).append((float(turn.group(2)) / 1e3, float(turn.group(3)) / 1e3))
            continue
        t = TIME.match(line)
        if not t:
            continue
        at = float(t.group(1))
        step = STEP.search(line)
        if step:
            steps.append((step.group(1), last_step_end, at))
            last_step_end = at
            continue
        stages = STAGES.search(line)
        if stages and "GPU block" in line:
            ms = sum(float(m) for m in STAGE.findall(stages.group(1)))
            intervals.append((at - ms / 1000.0, at))
    return intervals, steps, blocks, waits


def host_work(blocks, waits):
    """Per step with block lines: the blocks, their median seconds, and the
    mean seconds per block spent waiting for the GPU, in its turns, and on
    the host (the rest)."""
    for name, seconds in blocks.items():
        step_waits = waits.get(name, [])
        n = len(seconds)
        waited = sum(w for w, _ in step_waits) / n
        turn = sum(t for _, t in step_waits) / n
        host = sum(seconds) / n - waited - turn
        median = quantiles(seconds)[0]
        print(f"{name} | {n} | {median * 1e3:.1f} | {waited * 1e3:.1f} | {turn * 1e3:.1f} | {host * 1e3:.1f}")


def turns(intervals):
    """Touching intervals joined, in time order."""
    joined = []
    for start, end in sorted(intervals):
        if joined and start <= joined[-1][1] + JOIN:
            joined[-1][1] = max(joined[-1][1], end)
        else:
            joined.append([start, end])
    return joined


def quantiles(values, qs=(0.5, 0.9, 0.99, 1.0)):
    if not values:
        return []
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in qs]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--gaps", type=int, default=5, help="the longest gaps to list per step")
    args = parser.parse_args()
    intervals, steps, blocks, waits = parse(args.log)
    if not steps:
        sys.exit(f"{args.log}: no timestamped 'step done' lines (run the CLI at -vv, session 29 or later)")
    all_turns = turns(intervals)
    print(f"{len(intervals)} stage lines in {len(all_turns)} turns")
    print("step | wall s | GPU turns s | idle s | turns | gap ms (median / 90 % / 99 % / max)")
    for name, start, end in steps:
        inside = [(max(s, start), min(e, end)) for s, e in all_turns if e > start and s < end]
        busy = sum(e - s for s, e in inside)
        gaps = [(b[0] - a[1]) * 1000 for a, b in zip(inside, inside[1:])]
        q = " / ".join(f"{g:.1f}" for g in quantiles(gaps)) or "-"
        print(f"{name} | {end - start:.2f} | {busy:.2f} | {end - start - busy:.2f} | {len(inside)} | {q}")
        if inside and args.gaps:
            longest = sorted(zip(gaps, (a[1] for a in inside)), reverse=True)[: args.gaps]
            for gap, at in longest:
                print(f"    gap of {gap:.1f} ms after the turn ending at {at:.3f} s")


    if blocks:
        print("step | blocks | block ms (median) | waited ms | turn ms | host ms (means per block)")
        host_work(blocks, waits)


if __name__ == "__main__":
    main()
