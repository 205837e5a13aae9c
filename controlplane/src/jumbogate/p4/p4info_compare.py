"""Compare the P4Runtime face of two compiles of jumbogate.p4: v1model's and TNA's.

    python -m jumbogate.p4.p4info_compare V1MODEL.p4info.txtpb TNA.p4info.txtpb

The controller finds every object by name (finsy resolves aliases), so the
two targets must name their tables, actions, match fields, action
parameters, counters, meters, registers, action profiles and digests alike
wherever the concept is the same. IDs may differ, and so may the top-level
control each object sits in (`V1ModelIngress.` against `pipe.TnaIngress.`
or `pipe.TnaEgress.`): names are compared without it.

Every difference is printed with its reason when it is one of
EXPECTED_DIFFERENCES (each a hardware or architecture fact, said there), and
the exit status is 1 when any difference is unexplained, or when an expected
difference no longer occurs (so the list never outlives what it explains).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

# The top-level controls of each target: v1model's V1Switch blocks and TNA's
# Pipeline blocks (bf-p4c prefixes the pipeline's name, `pipe`).
_TOP_LEVEL = re.compile(
    r"^(pipe\.)?(V1Model|Tna)(Ingress|Egress|IngressParser|IngressDeparser|EgressParser|EgressDeparser|Parser|VerifyChecksum|ComputeChecksum|Deparser)\."
)


def local_name(name: str) -> str:
    """The name below the target's top-level control (`routing.next_hops`)."""
    return _TOP_LEVEL.sub("", name)


@dataclass(frozen=True)
class Difference:
    kind: str  # "only in v1model", "only in tna", "differs"
    what: str  # "table steering.merge_flows", "counter counters.paths"
    detail: str  # what differs ("" when the object is missing on one side)

    def __str__(self) -> str:
        return f"{self.kind}: {self.what}" + (f" ({self.detail})" if self.detail else "")


# (kind, what) -> why. Each is a fact of the hardware or the architecture,
# not a choice the code could undo.
EXPECTED_DIFFERENCES: dict[tuple[str, str], str] = {
    ("only in v1model", "action elephant_detector.flow_sketch.count_flow"): "a Tofino register is read and written once per packet by one stateful ALU, "
    "so each sketch row is a RegisterAction (tna/sketch.p4), not an action over six registers",
    ("only in v1model", "action elephant_detector.reported_filter.mark_reported"): "the same: the two Bloom cells are two RegisterActions on TNA",
    (
        "only in v1model",
        "register elephant_detector.flow_sketch.sketch_row0_bytes",
    ): "on Tofino a row's count and epoch share one 64-bit register pair (sketch_row0), so one stateful ALU updates both in one pass",
    ("only in v1model", "register elephant_detector.flow_sketch.sketch_row0_epoch"): "see sketch_row0_bytes",
    ("only in v1model", "register elephant_detector.flow_sketch.sketch_row1_bytes"): "see sketch_row0_bytes",
    ("only in v1model", "register elephant_detector.flow_sketch.sketch_row1_epoch"): "see sketch_row0_bytes",
    ("only in v1model", "register elephant_detector.flow_sketch.sketch_row2_bytes"): "see sketch_row0_bytes",
    ("only in v1model", "register elephant_detector.flow_sketch.sketch_row2_epoch"): "see sketch_row0_bytes",
    ("only in tna", "register elephant_detector.flow_sketch.sketch_row0"): "see sketch_row0_bytes",
    ("only in tna", "register elephant_detector.flow_sketch.sketch_row1"): "see sketch_row0_bytes",
    ("only in tna", "register elephant_detector.flow_sketch.sketch_row2"): "see sketch_row0_bytes",
    ("only in v1model", "register elephant_detector.reported_filter.reported_bloom_epoch"): "one register cannot be touched twice per packet on Tofino: "
    "the Bloom filter's two cells live in reported_bloom0 and reported_bloom1",
    ("only in tna", "register elephant_detector.reported_filter.reported_bloom0"): "see reported_bloom_epoch",
    ("only in tna", "register elephant_detector.reported_filter.reported_bloom1"): "see reported_bloom_epoch",
}


def _load(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


def _describe(info: p4i.P4Info) -> dict[str, str]:
    """Every named object, keyed "kind local-name", valued by what must match."""
    objects: dict[str, str] = {}
    actions_by_id = {a.preamble.id: local_name(a.preamble.name) for a in info.actions}
    profiles_by_id = {p.preamble.id: local_name(p.preamble.name) for p in info.action_profiles}
    for table in info.tables:
        fields = ", ".join(f"{f.name}:{p4i.MatchField.MatchType.Name(f.match_type).lower()}/{f.bitwidth}" for f in table.match_fields)
        actions = ", ".join(sorted(actions_by_id[a.id] for a in table.action_refs))
        profile = profiles_by_id.get(table.implementation_id, "")
        idle = "idle-timeout" if table.idle_timeout_behavior else ""
        objects[f"table {local_name(table.preamble.name)}"] = (
            f"keys [{fields}] actions [{actions}] size {table.size}" + (f" profile {profile}" if profile else "") + (f" {idle}" if idle else "")
        )
    for action in info.actions:
        params = ", ".join(f"{p.name}/{p.bitwidth}" for p in action.params)
        objects[f"action {local_name(action.preamble.name)}"] = f"params [{params}]"
    for counter in info.counters:
        objects[f"counter {local_name(counter.preamble.name)}"] = f"{p4i.CounterSpec.Unit.Name(counter.spec.unit).lower()} x {counter.size}"
    for meter in info.meters:
        objects[f"meter {local_name(meter.preamble.name)}"] = f"{p4i.MeterSpec.Unit.Name(meter.spec.unit).lower()} x {meter.size}"
    for register in info.registers:
        objects[f"register {local_name(register.preamble.name)}"] = f"x {register.size}"
    for profile in info.action_profiles:
        objects[f"action profile {local_name(profile.preamble.name)}"] = f"size {profile.size}" + (" selector" if profile.with_selector else "")
    for digest in info.digests:
        objects[f"digest {local_name(digest.preamble.name)}"] = text_format.MessageToString(digest.type_spec, as_one_line=True)
    return objects


def compare(v1model: p4i.P4Info, tna: p4i.P4Info) -> list[Difference]:
    mine, theirs = _describe(v1model), _describe(tna)
    differences = [Difference("only in v1model", what, "") for what in sorted(mine.keys() - theirs.keys())]
    differences += [Difference("only in tna", what, "") for what in sorted(theirs.keys() - mine.keys())]
    for what in sorted(mine.keys() & theirs.keys()):
        if mine[what] != theirs[what]:
            differences.append(Difference("differs", what, f"v1model {mine[what]}; tna {theirs[what]}"))
    return differences


def report(differences: list[Difference]) -> tuple[list[str], int]:
    """Lines to print and how many problems (unexplained or stale) there are."""
    lines: list[str] = []
    problems = 0
    seen = set()
    for difference in differences:
        key = (difference.kind, difference.what)
        seen.add(key)
        reason = EXPECTED_DIFFERENCES.get(key)
        if reason is None:
            problems += 1
            lines.append(f"UNEXPLAINED {difference}")
        else:
            lines.append(f"expected    {difference}: {reason}")
    for key in EXPECTED_DIFFERENCES.keys() - seen:
        problems += 1
        lines.append(f"STALE       {key[0]}: {key[1]} is listed as expected but no longer differs")
    return lines, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("v1model", type=Path, help="P4Info of the v1model compile (text format)")
    parser.add_argument("tna", type=Path, help="P4Info of the TNA compile (bf-p4c --p4runtime-force-std-externs)")
    args = parser.parse_args(argv)
    for path in (args.v1model, args.tna):
        if not path.is_file():
            print(f"p4info_compare: {path}: no such file", file=sys.stderr)
            return 2
    lines, problems = report(compare(_load(args.v1model), _load(args.tna)))
    print("\n".join(lines) if lines else "the two P4Infos name every object alike")
    if problems:
        print(f"p4info_compare: {problems} difference(s) without a reason", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
