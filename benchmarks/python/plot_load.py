#!/usr/bin/env python3
"""Plot rapidqa-load results: p99 latency and goodput against offered load per
mode (from a `sweep` CSV), and p99 per second around a rate step (from a
`step` CSV).

Usage:  python3 benchmarks/python/plot_load.py --sweep sweep.csv [--step step.csv] --out load.png

Needs matplotlib (Debian: python3-matplotlib).
"""

import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--step")
    ap.add_argument("--target", type=float, default=100.0, help="p99 target in ms, drawn as a line")
    ap.add_argument("--title", default="rapidqa-load")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    rows = read(a.sweep)
    panels = 3 if a.step else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    for mode in modes:
        pts = sorted((float(r["offered_qps"]), float(r["p99_ms"]), float(r["goodput"])) for r in rows if r["mode"] == mode)
        axes[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
        axes[1].plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=mode)
    axes[0].axhline(a.target, color="grey", linestyle="--", linewidth=1, label=f"target {a.target:.0f} ms")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("offered load (questions/s, Poisson)")
    axes[0].set_ylabel("p99 latency (ms)")
    axes[0].set_title("p99 latency against load")
    axes[0].legend()
    axes[1].set_xlabel("offered load (questions/s, Poisson)")
    axes[1].set_ylabel("goodput (answers/s within the deadline)")
    axes[1].set_title("goodput against load")
    axes[1].legend()
    if a.step:
        step = read(a.step)
        secs = [int(r["second"]) for r in step]
        axes[2].plot(secs, [float(r["p99_ms"]) for r in step], marker=".", label="p99")
        axes[2].plot(secs, [float(r["p50_ms"]) for r in step], marker=".", label="p50")
        axes[2].axhline(a.target, color="grey", linestyle="--", linewidth=1, label="target")
        ax2 = axes[2].twinx()
        ax2.bar(secs, [100 * float(r["degraded_fraction"]) for r in step], color="red", alpha=0.25,
                label="degraded %")
        ax2.set_ylabel("answers degraded (%)")
        ax2.legend(loc="upper right")
        offered = [float(r["offered_qps"]) for r in step]
        for i in range(1, len(offered)):
            if offered[i] != offered[i - 1]:
                axes[2].axvline(secs[i] - 0.5, color="black", linewidth=1, alpha=0.5)
                axes[2].text(secs[i] - 0.3, a.target * 0.9, f"{offered[i-1]:.0f} -> {offered[i]:.0f} q/s", fontsize=8)
        axes[2].set_xlabel("second")
        axes[2].set_ylabel("latency (ms)")
        axes[2].set_title("a load step with the AutoTuner")
        axes[2].legend(loc="upper left")
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot_load: wrote {a.out}")


if __name__ == "__main__":
    main()
