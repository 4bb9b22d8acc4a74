#!/usr/bin/python3
"""Summary of the peers study (scripts/peers.sh): reads OUT/runs.csv, OUT/nodes.csv,
OUT/speeds.csv and OUT/tasks.csv when there (Dask's task placement per round) (and OUT/earlier/<name>/runs.csv of earlier runs, for the table of configurations
tried), writes OUT/summary.csv, OUT/report.md and OUT/peers.png (gnuplot). Medians with min..max
over the verified runs only; nothing is hard-coded, every figure comes from those files.

Usage: summarize.py OUT SETUP_MD   (SETUP_MD: the setup lines scripts/peers.sh wrote)
"""
import csv
import os
import statistics
import subprocess
import sys

SYSTEMS = ["tessera", "scalapack", "dask"]
SYSTEM_TITLES = {"tessera": "Tessera", "scalapack": "ScaLAPACK", "dask": "Dask"}
SPREAD_LIMIT = 1.5  # max / min of one variant's end-to-end times above this is flagged as unsteady


def spread(values):
    """(median, min, max) or None."""
    return (statistics.median(values), min(values), max(values)) if values else None


def fmt_spread(s, digits=3):
    return "-" if s is None else f"{s[0]:.{digits}f} ({s[1]:.{digits}f}..{s[2]:.{digits}f})"


def variant_order(system, variant):
    if system == "tessera":
        order = ["model", "proportional", "dynamic", "even"]
        return (order.index(variant) if variant in order else len(order), variant)
    return (variant,)


def short_label(system, variant):
    if system == "tessera":
        return {"proportional": "prop."}.get(variant, variant)
    return variant


def load(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def summarize(rows):
    """{(config, n, system, variant): dict} in first-seen order of config and n."""
    groups = {}
    for row in rows:
        key = (row["config"], int(row["n"]), row["system"], row["variant"])
        groups.setdefault(key, []).append(row)
    summary = {}
    for key, runs in groups.items():
        ok = [r for r in runs if r["verified"] == "yes"]
        number = lambda r, column: float(r[column]) if r[column] else None  # noqa: E731
        summary[key] = {
            "runs": len(runs),
            "verified": len(ok),
            "end_to_end": spread([number(r, "end_to_end_s") for r in ok if r["end_to_end_s"]]),
            "compute": spread([number(r, "compute_s") for r in ok if r["compute_s"]]),
            "wall": spread([number(r, "command_wall_s") for r in ok if r["command_wall_s"]]),
            "load": spread([float(r["load_1min"]) for r in runs if r.get("load_1min")]),
            "failures": sorted({r["verified"] for r in runs if r["verified"] != "yes"}),
        }
    return summary


def diagnostic(variant):
    """A variant that measures a cost rather than a cluster: ScaLAPACK over shared memory (-sm)."""
    return "-sm" in variant


def best(summary, config, n, system, column="end_to_end"):
    """(variant, stats) with the lowest median of `column` among variants whose runs all verified
    (diagnostic variants left out)."""
    candidates = [(v, s) for (c, m, sy, v), s in summary.items()
                  if c == config and m == n and sy == system and s[column] and s["verified"] == s["runs"]
                  and not diagnostic(v)]
    return min(candidates, key=lambda item: item[1][column][0]) if candidates else (None, None)


def spread_ratio(s):
    return s[2] / s[1] if s and s[1] > 0 else float("nan")


def node_figures(node_rows, config, n, system, variant, phase):
    """{node: {column: (median, min, max)}} over the rounds of one variant and phase, in node order."""
    per_node = {}
    for r in node_rows:
        if (r["config"], int(r["n"]), r["system"], r["variant"], r["phase"]) != (config, n, system, variant, phase):
            continue
        entry = per_node.setdefault(r["node"], {"units": r["units"], "gflop": [], "cpu_s": [], "busy_s": [],
                                                  "throttled_s": []})
        for column in ("gflop", "cpu_s", "busy_s", "throttled_s"):
            if r[column] not in ("", None):
                entry[column].append(float(r[column]))
    return {node: {k: (spread(v) if isinstance(v, list) else v) for k, v in entry.items()}
            for node, entry in per_node.items()}


def compute_bound(node_rows, speeds, config, n, system, variant):
    """The slowest node's share of the flops over its profiled speed (s), when the shares are known."""
    figures = node_figures(node_rows, config, n, system, variant,
                           "compute" if system == "scalapack" else "end_to_end")
    times = [f["gflop"][0] / speeds[(config, node)] for node, f in figures.items()
             if f["gflop"] and (config, node) in speeds and speeds[(config, node)] > 0]
    return max(times) if times else None


def write_summary_csv(path, summary):
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["config", "n", "system", "variant", "runs", "verified",
                      "end_to_end_median_s", "end_to_end_min_s", "end_to_end_max_s",
                      "compute_median_s", "compute_min_s", "compute_max_s",
                      "command_wall_median_s", "command_wall_min_s", "command_wall_max_s"])
        for (config, n, system, variant), s in summary.items():
            cells = []
            for column in ("end_to_end", "compute", "wall"):
                cells += [f"{x:.6f}" for x in s[column]] if s[column] else ["", "", ""]
            out.writerow([config, n, system, variant, s["runs"], s["verified"], *cells])


def plot(out_dir, summary, configs, sizes):
    """peers.png: one panel per config and n, a bar per variant coloured by system, min..max bars."""
    colours = {"tessera": "#1b9e77", "scalapack": "#d95f02", "dask": "#7570b3"}
    panels = []
    for config in configs:
        for n in sizes:
            data_path = os.path.join(out_dir, f".peers-{config}-{n}.dat")
            x = 0
            with open(data_path, "w", encoding="utf-8") as data:
                for system in SYSTEMS:
                    variants = sorted((v for (c, m, sy, v) in summary if c == config and m == n and sy == system),
                                      key=lambda v: variant_order(system, v))
                    for variant in variants:
                        s = summary[(config, n, system, variant)]["end_to_end"]
                        if s is None:
                            continue
                        data.write(f'{x} "{short_label(system, variant)}" {s[0]} {s[1]} {s[2]} '
                                   f'0x{colours[system][1:]}\n')
                        x += 1
                    x += 0.6  # a gap between systems
            panels.append((config, n, data_path if x > 0.6 * len(SYSTEMS) else None))
    rows, cols = len(configs), len(sizes)
    width, height = 640 * cols, 330 * rows + 170  # room below for long variant names and the legend
    # Margins in pixels turned into the fractions multiplot wants: room for the y label on the left,
    # each panel's title above it, its slanted tick labels below it and the legend at the bottom.
    left, right, top, bottom, gap_x, gap_y = 70 / width, 1 - 15 / width, 1 - 30 / height, 200 / height, \
        75 / width, 95 / height
    script = [
        "set terminal pngcairo size %d,%d font 'sans,10'" % (width, height),
        f"set output '{os.path.join(out_dir, 'peers.png')}'",
        "set style fill solid 0.85 border rgb '#333333'",
        "set boxwidth 0.8",
        "set grid ytics lc rgb '#dddddd'",
        "set ylabel 'end to end, s'",
        "set yrange [0:*]",
        "set xtics rotate by -40 nomirror font ',8'",
        "unset key",
        f"set multiplot layout {rows},{cols} margins {left:.4f},{right:.4f},{bottom:.4f},{top:.4f} "
        f"spacing {gap_x:.4f},{gap_y:.4f}",
    ]
    for index, (config, n, data_path) in enumerate(panels):
        script.append(f"set title '{config}, n = {n}: median, min..max'")
        if data_path is None:  # nothing verified (or not run yet): an empty, labelled panel
            script += ["unset key", "set xrange [0:1]", "set yrange [0:1]",
                       "set label 1 'no verified runs' at graph 0.5,0.5 center", "plot NaN notitle",
                       "unset label 1", "set autoscale x", "set yrange [0:*]"]
            continue
        plots = [f"'{data_path}' using 1:3:6:xtic(2) with boxes lc rgb variable notitle",
                 f"'{data_path}' using 1:4:(0):($5-$4) with vectors heads size screen 0.006,90 lc rgb '#000000' notitle"]
        if index == 0:  # the legend once, below all panels
            script.append("set key at screen 0.5,0.03 center bottom horizontal width 2")
            plots += [f"NaN with boxes lc rgb '{colours[s]}' title '{SYSTEM_TITLES[s]}'" for s in SYSTEMS]
        else:
            script.append("unset key")
        script.append("plot " + ", ".join(plots))
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)
    for config in configs:
        for n in sizes:
            os.remove(os.path.join(out_dir, f".peers-{config}-{n}.dat"))


def idle_workers_line(rows):
    """What the cluster's tessera-workers used while the peers ran, from the idle_tessera_workers_cpu_s column
    (per ScaLAPACK run; per Dask round, repeated on each of its chunk rows)."""
    seen = {}
    for r in rows:
        value = r.get("idle_tessera_workers_cpu_s", "")
        if r["system"] == "tessera" or value == "":
            continue
        key = (r["config"], r["n"], r["round"], r["system"], r["variant"] if r["system"] == "scalapack" else "")
        seen[key] = float(value)
    if not seen:
        return "Their CPU time was not recorded in this run."
    scalapack = [v for k, v in seen.items() if k[3] == "scalapack"]
    dask = [v for k, v in seen.items() if k[3] == "dask"]
    return (f"Measured around every peer run (utime + stime of the four workers, 10 ms ticks): at most "
            f"{max(scalapack, default=0):.2f} CPU s during a ScaLAPACK run ({len(scalapack)} runs, {sum(scalapack):.2f} s "
            f"in all) and at most {max(dask, default=0):.2f} CPU s during a whole Dask round ({len(dask)} rounds, "
            f"{sum(dask):.2f} s in all).")


def fmt_ratio(peer, tessera):
    return "-" if peer is None or tessera is None or tessera[0] <= 0 else f"{peer[0] / tessera[0]:.2f}x"


def variant_row(config, n, system, variant, s, bound, label=""):
    verified = f"{s['verified']}/{s['runs']}" + (f" ({', '.join(s['failures'])})" if s["failures"] else "")
    ratio = spread_ratio(s["end_to_end"])
    steady = "-" if ratio != ratio else (f"{ratio:.2f}" if ratio <= SPREAD_LIMIT else f"**{ratio:.2f}**")
    return (f"| {label}{config} | {n} | {SYSTEM_TITLES[system]} | {variant} | {verified} | "
            f"{fmt_spread(s['end_to_end'])} | {steady} | {fmt_spread(s['compute'])} | "
            f"{'-' if bound is None else f'{bound:.2f}'} | {fmt_spread(s['wall'])} | {fmt_spread(s['load'], 2)} |")


def report(out_dir, setup_md, summary, configs, sizes, rows, node_rows, speeds, earlier):
    lines = ["# Peers: Tessera, ScaLAPACK and Dask under the same emulation", "",
             "Written by `scripts/peers.sh` (docs/studies.md); every figure below comes from `runs.csv`, "
             "`nodes.csv` and `speeds.csv` of this run (and, in the table of configurations tried, from the "
             "earlier runs kept under `earlier/`).", "",
             "## Setup", ""]
    lines += open(setup_md, encoding="utf-8").read().rstrip("\n").splitlines()
    lines += ["",
              "What is timed (end to end: for all three from the first byte of input sent until the whole C is back "
              "where it started; generating the inputs and checking C are outside):",
              "",
              "- **Tessera**: the report's `makespan_s` of `tessera multiply --verify freivalds` (the coordinator, "
              "outside every node's cgroup, sends A and B and collects C). Its *compute* figure is the longest any "
              "node spent in its multiply kernel (no communication), so it is a lower bound of what an in-place "
              "product would take. `command` is the wall time of the whole command (inputs, connecting, the "
              "multiply, the Freivalds check).",
              "- **ScaLAPACK**: `pdgemm_driver` under mpirun, each rank in the cgroup (and namespace) of the node it "
              "stands for: one rank per node (`PxQ`) or several in one node (`PxQ@4111`: four ranks in the "
              "desktop's cgroup, one per Pi, so that the even block-cyclic split gives the desktop 4/7 of C). "
              "Rank 0 is on the first node (the desktop) and also plays the coordinator: it generates A and B "
              "(the same matrices as Tessera's, same generator and seed), scatters them with pdgemr2d from a 1 x 1 "
              "grid to the P x Q grid (NB x NB blocks), runs pdgemm and gathers C back. *compute* is pdgemm alone "
              "(barrier, pdgemm, barrier on distributed data). The variant's last word is how a waiting rank "
              "waits: `spin` (busy polling), `yield` (sched_yield between polls: Open MPI's choice when "
              "oversubscribed, the old harness's setting) or `sleep` (an idle poll sleeps; "
              "peers/scalapack/idle_sleep.c). `command` is mpirun's wall time.",
              "- **Dask**: `A @ B` on dask arrays from a client in the root namespace, with a scheduler there and "
              "one single-thread `dask worker` per node in its cgroup and namespace; fresh workers every round, "
              "warmed by one untimed product of the same size. The variant is the chunking (`1024`: square; "
              "`RxKxC`: A in R x K chunks, B in K x C) and options: `direct` gathers C straight from the workers "
              "(otherwise it comes through the scheduler, Dask's default), `scatter` sends the inputs' chunks "
              "straight to the workers (otherwise they travel in the graph through the scheduler). Work stealing "
              "is on, as shipped. *compute* is `(A @ B).persist()` with A and B already on the workers, until every "
              "block of C exists. Inputs are NumPy uniform [-1, 1) (same distribution as Tessera's, not the same "
              "values).",
              "- Every product is checked with Freivalds' test (2 rounds, the bound of Tessera's verifier); only "
              "verified runs enter the medians. Rounds are interleaved: each round runs every variant of every "
              "system once, the order of the systems rotating from round to round.",
              "- The cluster's own idle tessera-workers stay in the same cgroups during the peers' runs; idle, they "
              "sit blocked in accept/read. " + idle_workers_line(rows), ""]

    lines += ["## Headline", "",
              "Each system's best variant (lowest median) and the ratio of a peer's best median to Tessera's best "
              "median: end to end, and compute-only (ScaLAPACK: pdgemm alone; Dask: the product on inputs already "
              "on the workers; Tessera: the slowest node's multiply time, which leaves its communication out and "
              "so favours Tessera). Medians (min..max) in seconds. Diagnostic variants (ScaLAPACK over shared "
              "memory, `-sm`: no cluster has that between machines) are left out here.", "",
              "| config | n | | Tessera best | ScaLAPACK best | Dask best | ScaLAPACK / Tessera | Dask / Tessera |",
              "|---|---|---|---|---|---|---|---|"]
    for config in configs:
        for n in sizes:
            for column, title in (("end_to_end", "end to end"), ("compute", "compute only")):
                bests = {system: best(summary, config, n, system, column) for system in SYSTEMS}
                cells = []
                for system in SYSTEMS:
                    variant, st = bests[system]
                    cells.append("-" if st is None else f"{fmt_spread(st[column])} {short_label(system, variant)}")
                tessera = bests["tessera"][1][column] if bests["tessera"][1] else None
                ratios = [fmt_ratio(bests[p][1][column] if bests[p][1] else None, tessera) for p in ("scalapack", "dask")]
                lines.append(f"| {config} | {n} | {title} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    lines += ["", "![end to end time per system](peers.png)", ""]

    lines += ["## Where the time went", "",
              "Per variant and node, medians over the rounds: the node's share of the 2 n^3 flops, `bound` (that "
              "share over the node's profiled speed: the least time it needs), its processes' CPU time and its "
              "cgroup's throttled time (cpu.stat) over the whole end-to-end command (Dask: over the timed product; "
              "ScaLAPACK: over the whole mpirun, input generation and check included), and for the compute-only "
              "timing (ScaLAPACK: pdgemm alone; Dask: the product on persisted inputs) its CPU time and, for "
              "ScaLAPACK, how long pdgemm kept its slowest rank before the closing barrier (`busy`). A node whose "
              "CPU time is well above what its share needs spent its quota on something other than multiplying "
              "(communication, or polling for messages); a node throttled for most of the run was held by its "
              "quota.", ""]
    profile_speeds = ", ".join(f"{node} {v:.2f}" for (c, node), v in speeds.items() if c in configs)
    lines += [f"Profiled speeds (GFLOP/s): {profile_speeds}.", "",
              "| config | n | system | variant | node | ranks | GFLOP | bound s | CPU s | throttled s | "
              "compute: CPU s | compute: busy s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for config in configs:
        for n in sizes:
            for system in SYSTEMS:
                variants = sorted((v for (c, m, sy, v) in summary if c == config and m == n and sy == system),
                                  key=lambda v: variant_order(system, v))
                for variant in variants:
                    whole = node_figures(node_rows, config, n, system, variant, "end_to_end")
                    alone = node_figures(node_rows, config, n, system, variant, "compute")
                    for node in dict.fromkeys(list(whole) + list(alone)):
                        f, g = whole.get(node, {}), alone.get(node, {})
                        gflop = f.get("gflop") or g.get("gflop")
                        speed = speeds.get((config, node))
                        bound = gflop[0] / speed if gflop and speed else None
                        cell = lambda x: fmt_spread(x, 2) if x else "-"  # noqa: E731
                        lines.append(f"| {config} | {n} | {SYSTEM_TITLES[system]} | {variant} | {node} | "
                                     f"{f.get('units') or g.get('units')} | {f'{gflop[0]:.1f}' if gflop else '-'} | "
                                     f"{'-' if bound is None else f'{bound:.2f}'} | {cell(f.get('cpu_s'))} | "
                                     f"{cell(f.get('throttled_s'))} | {cell(g.get('cpu_s'))} | {cell(g.get('busy_s'))} |")
    lines.append("")

    header = ["| run | config | n | system | variant | verified | end to end median (min..max) s | max/min | "
              "compute median (min..max) s | bound s | command median (min..max) s | host load median (min..max) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += dask_placement(out_dir, rows)
    lines += ["## Configurations tried", "",
              "Every variant measured, this run's and the earlier runs' kept under `earlier/` (each with its own "
              "setup, load and date in its `setup.md`). `max/min` is the spread of the end-to-end times, in bold "
              f"above {SPREAD_LIMIT:g}. `bound` is the slowest node's share of the flops over its profiled speed "
              "(ScaLAPACK: from the ranks' blocks; Tessera: from its plan's rows). `host load` is the machine's "
              "1-minute load average when the run ended: it counts the study's own processes too (the node "
              "processes, also while their quota holds them back, and the coordinator, mpirun or the Dask client "
              "and scheduler), and anyone else's jobs on the same 2 cores.", ""] + header
    runs = [("this run", summary, node_rows, speeds)] + earlier
    for label, summ, nrows, spds in runs:
        for (config, n, system, variant), st in summ.items():
            bound = compute_bound(nrows, spds, config, n, system, variant)
            lines.append(variant_row(config, n, system, variant, st, bound, label=f"{label} | "))
    lines.append("")
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def dask_placement(out_dir, rows):
    """Lines of the 'Dask's task placement' section from OUT/tasks.csv (none without it)."""
    tasks = load_optional(os.path.join(out_dir, "tasks.csv"))
    if not tasks:
        return []
    e2e = {(r["config"], r["n"], r["round"], r["variant"]): r["end_to_end_s"] for r in rows if r["system"] == "dask"}
    nodes = list(dict.fromkeys(t["node"] for t in tasks))
    lines = ["## Dask's task placement per round", "",
             "From `tasks.csv` (Dask's own task stream, `get_task_stream`, and the scheduler's confirmed steals, "
             "recorded around each timed end-to-end product): per worker, the tasks it computed by key prefix, "
             "then (`last` s: when its last task ended, from the product's first task start; `+s`/`-s`: tasks "
             "work stealing moved to / away from it).", "",
             "| config | n | variant | round | end to end s | " + " | ".join(nodes) + " |",
             "|---|---|---|---|---|" + "---|" * len(nodes)]
    cells = {}
    for t in tasks:
        if t["phase"] != "end_to_end":
            continue
        key = (t["config"], t["n"], t["variant"], t["round"])
        cells.setdefault(key, {})[t["node"]] = (f"{t['tasks']} (last {float(t['last_s']):.2f}, "
                                                f"+{t['stolen_to']}/-{t['stolen_from']})")
    for (config, n, variant, rnd) in sorted(cells, key=lambda k: (k[0], int(k[1]), k[2], int(k[3]))):
        row = cells[(config, n, variant, rnd)]
        time_s = e2e.get((config, n, rnd, variant), "")
        lines.append(f"| {config} | {n} | {variant} | {rnd} | {float(time_s):.3f} | " if time_s else
                     f"| {config} | {n} | {variant} | {rnd} | - | ")
        lines[-1] += " | ".join(row.get(node, "-") for node in nodes) + " |"
    return lines + [""]


def load_optional(path):
    return load(path) if os.path.exists(path) else []


def load_speeds(path):
    return {(r["config"], r["node"]): float(r["gflops"]) for r in load_optional(path)}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_dir, setup_md = sys.argv[1], sys.argv[2]
    rows = load(os.path.join(out_dir, "runs.csv"))
    if not rows:
        sys.exit("summarize: runs.csv holds no runs")
    node_rows = load_optional(os.path.join(out_dir, "nodes.csv"))
    speeds = load_speeds(os.path.join(out_dir, "speeds.csv"))
    earlier = []
    earlier_dir = os.path.join(out_dir, "earlier")
    for name in sorted(os.listdir(earlier_dir)) if os.path.isdir(earlier_dir) else []:
        path = os.path.join(earlier_dir, name, "runs.csv")
        if os.path.exists(path):
            earlier.append((name, summarize(load(path)), load_optional(os.path.join(earlier_dir, name, "nodes.csv")),
                            load_speeds(os.path.join(earlier_dir, name, "speeds.csv"))))
    configs = list(dict.fromkeys(r["config"] for r in rows))
    sizes = list(dict.fromkeys(int(r["n"]) for r in rows))
    summary = summarize(rows)
    write_summary_csv(os.path.join(out_dir, "summary.csv"), summary)
    plot(out_dir, summary, configs, sizes)
    report(out_dir, setup_md, summary, configs, sizes, rows, node_rows, speeds, earlier)
    print(open(os.path.join(out_dir, "report.md"), encoding="utf-8").read())


if __name__ == "__main__":
    main()
