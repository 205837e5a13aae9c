#!/usr/bin/env python3
"""Summarise a bf-p4c compile of jumbogate as Markdown (resources.md).

    tofino_resources.py OUTDIR CHIP PROFILE_BYTES SECONDS

Reads the logs bf-p4c writes with -g (OUTDIR/pipe/logs/: metrics.json,
phv.json, table_summary.log, mau.resources.log; OUTDIR/pipe/graphs/) and
prints stages used of the chip's, the table-to-stage map, PHV containers,
memories, hash bits and the parser's longest path in states. Standard
library only, so it runs wherever bf-p4c does.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

# Match-action stages per pipeline: Tofino 1 has 12, Tofino 2 has 20.
STAGES = {"tofino": 12, "tofino2": 20}
# The border leaves room for an operator's own tables: at most this many.
STAGE_BUDGET = {"tofino": 10, "tofino2": 18}


def table_stages(summary: str) -> tuple[dict[str, int], list[tuple[int, str]]]:
    # bf-p4c places the tables several times (other PHV allocations, other
    # heuristics) and logs each attempt: the last is the one compiled.
    summary = summary[summary.rfind("Table allocation done") :]
    counts = {}
    for gress in ("ingress", "egress"):
        found = re.search(rf"Number of stages for {gress} table allocation: (\d+)", summary)
        counts[gress] = int(found.group(1)) if found else 0
    placed = [(int(stage), name.strip()) for stage, name in re.findall(r"^\|\s*(\d+)\s*\|\s*\[[^]]*\]\s*\*?\s*\|\s*([^|]+?)\s*\|$", summary, re.M)]
    return counts, placed


def resource_rows(log: str) -> dict[str, dict[str, str]]:
    """The Totals row of the first table and the Average row of the second."""
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in log.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "Stage Number":
            header = cells
        elif header and cells and cells[0] in ("Totals", "Average") and cells[0] not in rows:
            rows[cells[0]] = dict(zip(header[1:], cells[1:], strict=False))  # a short row leaves its last columns out
    return rows


def longest_parser_path(dot: str) -> int:
    """States on the longest path from start in a parser graph (no loops)."""
    # A state's label is its name, then (quoted, on further lines) what it
    # selects on.
    labels = dict(re.findall(r'^(\d+)\[label="?([\w$.]+)', dot, re.M))
    edges = defaultdict(list)
    for src, dst in re.findall(r"^(\d+) -> (\d+)", dot, re.M):
        edges[src].append(dst)
    start = next((n for n, label in labels.items() if label == "start"), None)
    if start is None:
        return 0
    memo: dict[str, int] = {}

    def depth(node: str, seen: frozenset) -> int:
        if labels.get(node) in ("accept", "reject"):
            return 0
        if node in memo:
            return memo[node]
        best = 1 + max((depth(n, seen | {node}) for n in edges[node] if n not in seen), default=0)
        memo[node] = best
        return best

    return depth(start, frozenset())


def read_or_empty(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    outdir, chip, profile, seconds = Path(argv[1]), argv[2], argv[3], argv[4]
    logs = outdir / "pipe" / "logs"
    try:
        summary = (logs / "table_summary.log").read_text()
    except OSError as error:
        print(f"tofino_resources.py: {error} (was bf-p4c run with -g?)", file=sys.stderr)
        return 1
    # A compile that placed its tables but did not fit the chip stops
    # before these: the stage map is still worth reading.
    metrics = json.loads(read_or_empty(logs / "metrics.json") or "{}")
    phv = json.loads(read_or_empty(logs / "phv.json") or '{"resources": []}')
    mau_log = read_or_empty(logs / "mau.resources.log")
    counts, placed = table_stages(summary)
    used = max(counts.values())
    rows = resource_rows(mau_log)
    totals, average = rows.get("Totals", {}), rows.get("Average", {})

    available = defaultdict(int)
    # phv.json lists the containers once per user (MAU, deparser): count the
    # MAU's, which every container has.
    for group in phv["resources"]:
        if group["group_type"] == "mau":
            available[group["bit_width"]] += group["num_containers"]
    occupied = defaultdict(int)
    bits = 0
    # Every kind of container the chip has: normal and tagalong on Tofino 1;
    # normal, mocha and dark on Tofino 2.
    for entries in metrics.get("phv", {}).values():
        for entry in entries:
            occupied[entry["bit_width"]] += entry["containers_occupied"]
            bits += entry["bits_occupied"]
    available_bits = sum(width * count for width, count in available.items())

    parser = metrics.get("parser", {})
    out = [f"# jumbogate on {chip}, parse depth {profile} bytes", ""]
    verdict = "within" if used <= STAGE_BUDGET[chip] else "OVER"
    if used > STAGES[chip]:
        verdict = f"does not fit the chip, {STAGES[chip]} stages"
    out += [
        f"bf-p4c {metrics.get('compiler_version', '?')}, {seconds} s.",
        "",
        "| resource | used | of |",
        "|---|---:|---:|",
        f"| stages (ingress) | {counts['ingress']} | {STAGES[chip]} |",
        f"| stages (egress) | {counts['egress']} | {STAGES[chip]} |",
    ]
    for width in sorted(available):
        out.append(f"| PHV {width}-bit containers | {occupied[width]} | {available[width]} |")
    out += [
        f"| PHV bits occupied | {bits} | {available_bits} |",
        f"| SRAM blocks | {totals.get('SRAM', '?')} | {average.get('SRAM', '?')} of all |",
        f"| TCAM blocks | {totals.get('TCAM', '?')} | {average.get('TCAM', '?')} of all |",
        f"| map RAMs | {totals.get('Map RAM', '?')} | {average.get('Map RAM', '?')} of all |",
        f"| hash bits | {totals.get('Hash Bit', '?')} | {average.get('Hash Bit', '?')} of all |",
        f"| gateways | {totals.get('Gateway', '?')} | {average.get('Gateway', '?')} of all |",
        f"| meter ALUs (meters, registers) | {totals.get('Meter ALU', '?')} | {average.get('Meter ALU', '?')} of all |",
        f"| stats ALUs (counters) | {totals.get('Stats ALU', '?')} | {average.get('Stats ALU', '?')} of all |",
        f"| ingress parser TCAM rows | {parser.get('ingress', {}).get('tcam_rows', '?')} | |",
        f"| egress parser TCAM rows | {parser.get('egress', {}).get('tcam_rows', '?')} | |",
    ]
    for gress in ("IngressParser", "EgressParser"):
        # Named after the top level's parser (TnaIngressParser.dot).
        for graph in sorted((outdir / "pipe" / "graphs").glob(f"*{gress}.dot")):
            states = longest_parser_path(graph.read_text())
            out.append(f"| {graph.stem} longest path (states) | {states} | |")
    out += [
        "",
        f"Stage budget: at most {STAGE_BUDGET[chip]} of {STAGES[chip]} stages (room for an operator's own tables): {verdict} ({used} used).",
        "",
        "## Stage map",
        "",
        "| stage | table |",
        "|---:|---|",
    ]
    out += [f"| {stage} | {name} |" for stage, name in sorted(placed)]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
