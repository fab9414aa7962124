"""Plots rapidqa-eval's JSON results: hit rate against false-hit rate on a
question stream (fixed thresholds as a curve, the error-bound mode's targets
as points) and the abstention curves (in-domain accuracy against the
out-of-domain fallback rate over the threshold), one column per set.

    plot_answer_quality.py --result NAME=FILE.json [--result ...] --title T --out FILE.png
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--result", action="append", required=True, help="NAME=rapidqa-eval --json output")
    parser.add_argument("--title", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    results = []
    for item in args.result:
        name, _, path = item.partition("=")
        with open(path, encoding="utf-8") as f:
            results.append((name, json.load(f)))

    fig, axes = plt.subplots(2, len(results), figsize=(5.5 * len(results), 9), squeeze=False)
    for column, (name, r) in enumerate(results):
        ax = axes[0][column]
        rows = r["semantic_stream"]["rows"]
        fixed = sorted((x for x in rows if x["mode"] == "fixed"), key=lambda x: x["false_hit_rate"])
        ax.plot([x["false_hit_rate"] for x in fixed], [x["hit_rate"] for x in fixed], "o-", color="gray",
                label="fixed thresholds")
        for x in fixed:
            ax.annotate(f'{x["threshold"]:.2f}', (x["false_hit_rate"], x["hit_rate"]), fontsize=7,
                        textcoords="offset points", xytext=(3, -9), color="gray")
        for x in (x for x in rows if x["mode"] == "error-bound"):
            low, high = x["false_hit_rate_95"]
            ax.errorbar([x["false_hit_rate"]], [x["hit_rate"]],
                        xerr=[[x["false_hit_rate"] - low], [high - x["false_hit_rate"]]], fmt="s", capsize=3,
                        label=f'error bound, target {x["target"]:.3f}')
            ax.axvline(x["target"], linestyle=":", linewidth=0.8, color=ax.lines[-1].get_color())
        ax.set_xlabel("false-hit rate (wrong hits / decisions)")
        ax.set_ylabel("hit rate (right hits / decisions)")
        ax.set_title(f'{name}: semantic cache, {r["semantic_stream"]["decisions"]} decisions')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

        ax = axes[1][column]
        abstention = r["abstention"]
        for key, label, style in (("by_confidence", "calibrated confidence", "s-"),
                                  ("by_cosine", "raw cosine", "o--")):
            points = abstention[key]
            ax.plot([p["out_of_domain_fallback"] for p in points], [p["in_domain_accuracy"] for p in points], style,
                    label=label)
            for p in points:
                ax.annotate(f'{p["threshold"]:.2f}', (p["out_of_domain_fallback"], p["in_domain_accuracy"]),
                            fontsize=6, textcoords="offset points", xytext=(3, 3))
        ax.set_xlabel(f'out-of-domain fallback rate ({abstention["out_of_domain_questions"]} questions)')
        ax.set_ylabel("in-domain accuracy (right answers / questions)")
        ax.set_title(f"{name}: abstention over the threshold")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
