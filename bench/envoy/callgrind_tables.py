#!/usr/bin/env python3
"""Markdown tables for docs/envoy-cpu-profile.md from one or two instruction-count runs.

usage: python3 bench/envoy/callgrind_tables.py RUN_A.jsonl [RUN_B.jsonl]

Each file is a results file of bench/envoy/callgrind.ts (`npm run bench` writes
build/bench/results.jsonl; `callgrind_run.ts` with BENCH_RESULTS writes another). Prints:
  - every ratio of each run, side by side, with its target and verdict;
  - the floor of each filter path: the hand-written job fixture against the baseline, and the
    filter against the fixture (what our code adds on top of Envoy's charge);
  - what one Envoy filter-state object and one wasm property cost on the plain path;
  - the two batches of every arm (repeatability), with the event-loop wake-ups per batch.
"""
import json
import sys


def load(path):
    figures = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                figures.append(json.loads(line))
    return figures


def key(f):
    return (f.get("filter"), f.get("variant"), f.get("path"), bool(f.get("control")))


def arms(figures):
    return {key(f): f for f in figures if f.get("figure") == "envoy_instructions" and "value" in f}


def ratios(figures):
    out = {}
    for f in figures:
        if f.get("figure") == "envoy_instructions_ratio" and "value" in f:
            out[(f["filter"], f["path"], f["variant"], f.get("baseline_filter"), f["baseline"], bool(f.get("control")))] = f
    return out


def n(value):
    return f"{round(value):,}"


def main(paths):
    runs = [load(p) for p in paths]
    names = ["run 1", "run 2"][: len(runs)]
    print("| arm ÷ baseline | path | " + " | ".join(f"{name}: arm vs baseline (ratio)" for name in names) + " | target |")
    print("|---|---|" + "---|" * len(runs) + "---|")
    all_ratios = [ratios(r) for r in runs]
    for k in all_ratios[0]:
        filt, path, variant, base_filter, baseline, control = k
        cells = []
        for rs in all_ratios:
            f = rs.get(k)
            cells.append(f"{n(f['arm_value'])} vs {n(f['baseline_value'])} (**{f['value']:.3f}**)" if f else "not measured")
        target = all_ratios[0][k].get("target", "-")
        label = f"{'control' if control else filt} {variant} ÷ {base_filter if base_filter != filt else ''} {baseline}".replace("  ", " ")
        print(f"| {label} | {path} | " + " | ".join(cells) + f" | {target} |")

    print()
    print("Per-value cost on the plain path (fixtures, instructions per connection over newconn_min):")
    for name, r in zip(names, runs):
        a = arms(r)
        base = a.get(("fixture_newconn_min", "with", "plain", False))
        fs = a.get(("fixture_newconn_fs", "with", "plain", False))
        prop = a.get(("fixture_newconn_prop", "with", "plain", False))
        without = a.get(("passthrough_mtls", "without", "plain", False))
        if base and fs and prop and without:
            print(f"- {name}: without {n(without['value'])}, newconn_min {n(base['value'])} (+{n(base['value'] - without['value'])}), "
                  f"one set_envoy_filter_state +{n(fs['value'] - base['value'])}, one set_property +{n(prop['value'] - base['value'])}")

    print()
    print("| arm | path | " + " | ".join(f"{name}: batch 1 / batch 2 (deviation; wake-ups)" for name in names) + " |")
    print("|---|---|" + "---|" * len(runs))
    repeats = [{key(f): f for f in r if f.get("figure") == "envoy_instructions_repeat"} for r in runs]
    for k in repeats[0]:
        cells = []
        for rep in repeats:
            f = rep.get(k)
            if not f:
                cells.append("not measured")
                continue
            wake = f.get("wakeups_per_batch")
            cells.append(f"{n(f['per_run'][0])} / {n(f['per_run'][1])} ({f['deviation'] * 100:.2f}%" + (f"; {wake[0]} / {wake[1]}" if wake else "") + ")")
        filt, variant, path, control = k
        print(f"| {'control' if control else filt} {variant} | {path} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
