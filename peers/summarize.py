#!/usr/bin/python3
"""Summary of the peers study (scripts/peers.sh): reads OUT/runs.csv, writes OUT/summary.csv,
OUT/report.md and OUT/peers.png (gnuplot). Medians with min..max over the verified runs only;
nothing is hard-coded, every figure comes from runs.csv.

Usage: summarize.py OUT SETUP_MD   (SETUP_MD: the setup lines scripts/peers.sh wrote)
"""
import csv
import os
import statistics
import subprocess
import sys

SYSTEMS = ["tessera", "scalapack", "dask"]
SYSTEM_TITLES = {"tessera": "Tessera", "scalapack": "ScaLAPACK", "dask": "Dask"}
TARGETS = {"scalapack": 2.0, "dask": 1.5}  # the claim checked: Tessera's best this many times faster


def spread(values):
    """(median, min, max) or None."""
    return (statistics.median(values), min(values), max(values)) if values else None


def fmt_spread(s, digits=3):
    return "-" if s is None else f"{s[0]:.{digits}f} ({s[1]:.{digits}f}..{s[2]:.{digits}f})"


def variant_order(system, variant):
    if system == "tessera":
        order = ["model", "proportional", "dynamic", "even"]
        return (order.index(variant) if variant in order else len(order), variant)
    if system == "scalapack":
        grid, nb = variant.split("-nb")
        return (-int(grid.split("x")[0]), int(nb))  # 2x2 before 1x4, NB ascending
    return (int(variant.removeprefix("chunk")) if variant.startswith("chunk") else 1 << 30, variant)


def short_label(system, variant):
    if system == "tessera":
        return {"proportional": "prop."}.get(variant, variant)
    if system == "scalapack":
        grid, nb = variant.split("-nb")
        return f"{grid}/{nb}"
    return variant.removeprefix("chunk")


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


def best(summary, config, n, system):
    """(variant, stats) with the lowest median end-to-end time among variants whose runs all verified."""
    candidates = [(v, s) for (c, m, sy, v), s in summary.items()
                  if c == config and m == n and sy == system and s["end_to_end"] and s["verified"] == s["runs"]]
    return min(candidates, key=lambda item: item[1]["end_to_end"][0]) if candidates else (None, None)


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
    width, height = 560 * cols, 330 * rows + 60
    # Margins in pixels turned into the fractions multiplot wants: room for the y label on the left,
    # each panel's title above it, its slanted tick labels below it and the legend at the bottom.
    left, right, top, bottom, gap_x, gap_y = 70 / width, 1 - 15 / width, 1 - 30 / height, 90 / height, \
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


def report(out_dir, setup_md, summary, configs, sizes, rows):
    lines = ["# Peers: Tessera, ScaLAPACK and Dask under the same emulation", "",
             "Written by `scripts/peers.sh` (docs/studies.md); every figure below comes from `runs.csv` of this run.", "",
             "## Setup", ""]
    lines += open(setup_md, encoding="utf-8").read().rstrip("\n").splitlines()
    lines += ["",
              "What is timed (all three from the first byte of input sent until the whole C is back where it "
              "started; generating the inputs and checking C are outside):",
              "",
              "- **Tessera**: the report's `makespan_s` of `tessera multiply --verify freivalds` (the coordinator, "
              "outside every node's cgroup, sends A and B and collects C). `command` is the wall time of the whole "
              "command (inputs, connecting, the multiply, the Freivalds check).",
              "- **ScaLAPACK**: `pdgemm_driver` under mpirun, one rank per node in the node's cgroup and namespace; "
              "rank 0 stands for the first node (the desktop) and also plays the coordinator: it generates A and B "
              "(the same matrices as Tessera's, same generator and seed), scatters them with pdgemr2d from a 1 x 1 "
              "grid to the p x q grid (even 2D block-cyclic, NB x NB blocks), runs pdgemm and gathers C back. "
              "`pdgemm alone` is barrier, pdgemm, barrier on distributed data. `command` is mpirun's wall time.",
              "- **Dask**: `(da.from_array(A, chunks) @ da.from_array(B, chunks)).compute()` from a client in the "
              "root namespace, with a scheduler there and one single-thread `dask worker` per node in its cgroup "
              "and namespace (fresh workers every round, one small untimed product first). Inputs are NumPy "
              "uniform [-1, 1) (same distribution as Tessera's, not the same values).",
              "- Every product is checked with Freivalds' test (2 rounds, the bound of Tessera's verifier); only "
              "verified runs enter the medians. Rounds are interleaved: each round runs every variant of every "
              "system once, the order of the systems rotating from round to round.",
              "- The cluster's own idle tessera-workers stay in the same cgroups during the peers' runs; idle, they "
              "sit blocked in accept/read. " + idle_workers_line(rows), ""]

    lines += ["## Headline", "",
              "Ratios are a peer's best median over Tessera's best median (end to end); the targets are "
              f"{TARGETS['scalapack']:g}x over ScaLAPACK and {TARGETS['dask']:g}x over Dask.", "",
              "| config | n | Tessera best s | ScaLAPACK best s | Dask best s | ScaLAPACK / Tessera | "
              f"{TARGETS['scalapack']:g}x met | Dask / Tessera | {TARGETS['dask']:g}x met |",
              "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for config in configs:
        for n in sizes:
            bests = {system: best(summary, config, n, system) for system in SYSTEMS}
            tessera_variant, tessera = bests["tessera"]
            cells = []
            for system in SYSTEMS:
                variant, s = bests[system]
                cells.append("-" if s is None else f"{fmt_spread(s['end_to_end'])} {short_label(system, variant)}")
            ratio_cells = []
            for peer in ("scalapack", "dask"):
                _, s = bests[peer]
                if tessera is None or s is None:
                    ratio_cells += ["-", "-"]
                    continue
                ratio = s["end_to_end"][0] / tessera["end_to_end"][0]
                met = ratio >= TARGETS[peer]
                verdicts.append((config, n, peer, ratio, met))
                ratio_cells += [f"{ratio:.2f}x", "yes" if met else "**no**"]
            lines.append(f"| {config} | {n} | " + " | ".join(cells) + " | " + " | ".join(ratio_cells) + " |")
    met = sum(1 for v in verdicts if v[4])
    lines += ["", f"Targets met in {met} of {len(verdicts)} comparisons."]
    missed = [v for v in verdicts if not v[4]]
    if missed:
        lines.append("Missed: " + "; ".join(
            f"{c} n = {n} against {SYSTEM_TITLES[p]}: {r:.2f}x of {TARGETS[p]:g}x" for c, n, p, r, _ in missed) + ".")
    lines += ["", "![end to end time per system](peers.png)", ""]

    lines += ["## Every variant", "",
              "`host load` is the machine's 1-minute load average when the run ended, a rough gauge of "
              "competition: it counts the study's own processes too (the four node processes, also while their "
              "quota holds them back, and the coordinator, mpirun or the Dask client and scheduler), and other "
              "users' jobs on the same 2 cores.", "",
              "| config | n | system | variant | verified | end to end median (min..max) s | "
              "pdgemm alone median (min..max) s | command median (min..max) s | host load median (min..max) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for config in configs:
        for n in sizes:
            for system in SYSTEMS:
                variants = sorted((v for (c, m, sy, v) in summary if c == config and m == n and sy == system),
                                  key=lambda v: variant_order(system, v))
                for variant in variants:
                    s = summary[(config, n, system, variant)]
                    verified = f"{s['verified']}/{s['runs']}" + (f" ({', '.join(s['failures'])})" if s["failures"] else "")
                    lines.append(f"| {config} | {n} | {SYSTEM_TITLES[system]} | {variant} | {verified} | "
                                 f"{fmt_spread(s['end_to_end'])} | {fmt_spread(s['compute'])} | {fmt_spread(s['wall'])} | "
                                 f"{fmt_spread(s['load'], 2)} |")
    lines.append("")
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_dir, setup_md = sys.argv[1], sys.argv[2]
    rows = load(os.path.join(out_dir, "runs.csv"))
    if not rows:
        sys.exit("summarize: runs.csv holds no runs")
    configs = list(dict.fromkeys(r["config"] for r in rows))
    sizes = list(dict.fromkeys(int(r["n"]) for r in rows))
    summary = summarize(rows)
    write_summary_csv(os.path.join(out_dir, "summary.csv"), summary)
    plot(out_dir, summary, configs, sizes)
    report(out_dir, setup_md, summary, configs, sizes, rows)
    print(open(os.path.join(out_dir, "report.md"), encoding="utf-8").read())


if __name__ == "__main__":
    main()
