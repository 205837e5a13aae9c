# SPDX-License-Identifier: Apache-2.0
"""Summarise benchmark results (JSON lines from jumbogate-bench) and plot them.

usage: report.py results.json plot.png
Prints one row per scenario with the engine's ratios to rte_gro and to the
pass-through, checks the targets on the 800-flow scenario, and draws
packets per second, yield and delay per scenario.
"""

import json
import sys

TARGET_SCENARIO = "flows-800"
TARGETS = (
    # (description, value from a scenario, passes)
    ("packets/s >= 5x rte_gro (lightweight)", lambda s: ratio(s, "gro"), lambda v: v >= 5.0),
    ("packets/s >= 0.5x pass-through", lambda s: ratio(s, "pass"), lambda v: v >= 0.5),
    ("yield >= 90%", lambda s: s["paths"]["engine"]["yield_within_mtu"], lambda v: v >= 0.9),
    ("mean added delay < 25 us", lambda s: s["paths"]["engine"]["delay_mean_us"], lambda v: v < 25.0),
)
PATHS = ("engine", "gro", "gro-timed", "pass")
COLOURS = {"engine": "tab:blue", "gro": "tab:orange", "gro-timed": "tab:red", "pass": "tab:gray"}


def ratio(scenario, other):
    paths = scenario["paths"]
    if other not in paths or paths[other]["mpps"] == 0:
        return float("nan")
    return paths["engine"]["mpps"] / paths[other]["mpps"]


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def print_summary(scenarios):
    header = (
        f"{'scenario':<22}{'engine Mpps':>12}{'gro Mpps':>10}{'x gro':>7}{'x gro-t':>8}"
        f"{'pass Mpps':>10}{'x pass':>7}{'yield':>7}{'gro y*':>7}{'mean us':>8}{'p99 us':>8}{'MiB':>7}"
    )
    print()
    print(header)
    for s in scenarios:
        p = s["paths"]
        e = p["engine"]
        gro = p.get("gro")
        print(
            f"{s['scenario']:<22}{e['mpps']:>12.2f}"
            f"{(gro['mpps'] if gro else float('nan')):>10.2f}{ratio(s, 'gro'):>7.2f}"
            f"{ratio(s, 'gro-timed'):>8.2f}{p['pass']['mpps']:>10.2f}{ratio(s, 'pass'):>7.2f}"
            f"{e['yield_within_mtu']:>7.3f}{(gro['yield_any_size'] if gro else float('nan')):>7.3f}"
            f"{e['delay_mean_us']:>8.2f}{e['delay_p99_us']:>8.2f}{e['memory_mib']:>7.1f}"
        )
    print("x gro / x gro-t / x pass: engine packets per second over that path's;")
    print("gro y*: rte_gro's share of payload in packets >= 90% of the MTU at any size (up to 64 KB)")


def check_targets(scenarios):
    target = [s for s in scenarios if s["scenario"] == TARGET_SCENARIO]
    if not target:
        return
    print(f"\ntargets on {TARGET_SCENARIO}:")
    for description, value, passes in TARGETS:
        v = value(target[0])
        print(f"  {'met    ' if passes(v) else 'NOT met'} {description}: {v:.3f}")


def plot(scenarios, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot", file=sys.stderr)
        return
    names = [s["scenario"] for s in scenarios]
    width = 0.2
    fig, axes = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    for k, name in enumerate(PATHS):
        xs = [i + (k - 1.5) * width for i in range(len(names))]
        present = [s["paths"].get(name) for s in scenarios]
        axes[0].bar(
            xs,
            [p["mpps"] if p else 0 for p in present],
            width,
            label=name,
            color=COLOURS[name],
        )
        axes[1].bar(
            xs,
            [100 * p["yield_any_size"] if p else 0 for p in present],
            width,
            fill=False,
            hatch="//",
            edgecolor=COLOURS[name],
        )
        axes[1].bar(
            xs,
            [100 * p["yield_within_mtu"] if p else 0 for p in present],
            width,
            color=COLOURS[name],
        )
        axes[2].bar(
            xs,
            [p["delay_mean_us"] if p else 0 for p in present],
            width,
            color=COLOURS[name],
        )
        axes[2].scatter(
            xs,
            [p["delay_p99_us"] if p else 0 for p in present],
            marker="_",
            s=120,
            color="black",
        )
    axes[0].set_ylabel("million packets/s in")
    axes[0].legend(ncol=4)
    axes[1].set_ylabel("yield, % of payload in packets\n>= 90% of MTU (hatched: any size)")
    axes[1].axhline(90, linestyle="--", color="black", linewidth=0.8)
    axes[2].set_ylabel("added delay, us\n(bar mean, dash p99)")
    axes[2].axhline(25, linestyle="--", color="black", linewidth=0.8)
    axes[2].set_xticks(range(len(names)))
    axes[2].set_xticklabels(names, rotation=20)
    fig.suptitle("jumbogate engine vs DPDK rte_gro vs pass-through, one core")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"\nplot: {path}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    scenarios = load(sys.argv[1])
    if not scenarios:
        print("no results", file=sys.stderr)
        return 1
    print_summary(scenarios)
    check_targets(scenarios)
    plot(scenarios, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
