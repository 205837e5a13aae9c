"""What differs when the switch is a Tofino: the pipeline blob, the ICMP signal's mirror sessions, the sketch's epoch.

The controller drives a Tofino through a P4Runtime server such as
Stratum's (stratum-bf or stratum-bfrt) as it drives BMv2 and
jumbogate-switch, with the P4Info bf-p4c writes for the TNA top level
(`make p4-tofino`, `--p4runtime-force-std-externs`). Three things change,
chosen by `switch.target` in rack.yaml:

- The pipeline blob (ForwardingPipelineConfig.p4_device_config) is
  Stratum's BfPipelineConfig, built from bf-p4c's output directory: the
  program's name, bfrt.json, and one profile, "pipe", with its
  context.json and tofino.bin (tofino2.bin on Tofino 2) for every pipe.
  It is the protobuf format both stratum-bf and stratum-bfrt take
  (stratum/hal/lib/barefoot/bf.proto, from 2020 on); PI's older binary
  packing, which stratum-bfrt refuses, is not made.
- The ICMP signal is a truncated mirrored copy (p4src/tna/signal.p4): each
  port with a role gets a clone session that sends to that port and
  truncates to SIGNAL_TRUNCATE_BYTES, written through P4Runtime's packet
  replication engine (CloneSessionEntry).
- The sketch's epoch is 2^30 ns, 1,074 ms (the TNA program slices Tofino's
  nanosecond timestamp), not v1model's 2^20 us, 1,049 ms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import finsy as fy
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .p4 import defines

TARGETS = ("v1model", "tofino", "tofino2")

# p4src/tna/signal.p4: the mirror header, Ethernet, and the quote of the
# offending packet the PHV holds.
SIGNAL_TRUNCATE_BYTES = defines.SIGNAL_TRUNCATE_BYTES


def sketch_epoch_ms(target: str) -> int:
    """The elephant sketch's epoch on `target`, rounded to the millisecond, as the compiled program fixes it."""
    if target == "v1model":
        return round((1 << defines.ELEPHANT_EPOCH_LOG2_US) / 1000)  # microseconds
    # Tofino: bits [ELEPHANT_EPOCH_LOG2_US + 10 ...] of the nanosecond timestamp.
    return round((1 << (defines.ELEPHANT_EPOCH_LOG2_US + 10)) / 1_000_000)


def signal_session(port: int, target: str) -> int:
    """The mirror session the TNA program sends a port's signals to (SIGNAL_SESSION in p4src/tna/signal.p4):
    Tofino 1 numbers sessions with 10 bits, 512 + the port; Tofino 2 with 8, the port's low 8 bits."""
    return port & 0xFF if target == "tofino2" else 512 | port


def signal_sessions(ports: list[int], target: str) -> list[fy.P4CloneSessionEntry]:
    """One clone session per port with a role: to that port, truncated to what the signal needs."""
    return [fy.P4CloneSessionEntry(signal_session(port, target), packet_length_bytes=SIGNAL_TRUNCATE_BYTES, replicas=[(port, 0)]) for port in ports]


def _bf_pipeline_config_class():
    """Stratum's BfPipelineConfig, declared here field for field (its .proto is not a dependency)."""
    file = descriptor_pb2.FileDescriptorProto(name="jumbogate/stratum_bf.proto", package="stratum.hal.barefoot", syntax="proto3")
    message = file.message_type.add(name="BfPipelineConfig")
    profile = message.nested_type.add(name="Profile")
    field = descriptor_pb2.FieldDescriptorProto
    for number, name, kind, label in (
        (1, "profile_name", field.TYPE_STRING, field.LABEL_OPTIONAL),
        (2, "context", field.TYPE_BYTES, field.LABEL_OPTIONAL),
        (3, "binary", field.TYPE_BYTES, field.LABEL_OPTIONAL),
        (4, "pipe_scope", field.TYPE_UINT32, field.LABEL_REPEATED),
    ):
        profile.field.add(number=number, name=name, type=kind, label=label)
    message.field.add(number=1, name="p4_name", type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    message.field.add(number=2, name="bfruntime_info", type=field.TYPE_BYTES, label=field.LABEL_OPTIONAL)
    message.field.add(
        number=3, name="profiles", type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED, type_name=".stratum.hal.barefoot.BfPipelineConfig.Profile"
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("stratum.hal.barefoot.BfPipelineConfig"))


BfPipelineConfig = _bf_pipeline_config_class()


def pipeline_files(outdir: Path, target: str) -> dict[str, Path]:
    """The files of bf-p4c's output directory that the blob and the controller need."""
    binary = "tofino2.bin" if target == "tofino2" else "tofino.bin"
    return {
        "p4info": outdir / "jumbogate.p4info.txtpb",
        "bfrt": outdir / "bfrt.json",
        "context": outdir / "pipe" / "context.json",
        "binary": outdir / "pipe" / binary,
    }


def missing_files(outdir: Path, target: str) -> list[Path]:
    return [path for path in pipeline_files(outdir, target).values() if not path.exists()]


def device_config(outdir: Path, target: str, p4_name: str = "jumbogate") -> bytes:
    """The BfPipelineConfig blob for bf-p4c's output in `outdir`: one profile, on every pipe (an empty scope)."""
    files = pipeline_files(outdir, target)
    missing = missing_files(outdir, target)
    if missing:
        raise FileNotFoundError(f"{outdir} lacks {', '.join(str(p.relative_to(outdir)) for p in missing)}: is it bf-p4c's output (make p4-tofino)?")
    config = BfPipelineConfig(p4_name=p4_name, bfruntime_info=files["bfrt"].read_bytes())
    config.profiles.add(profile_name="pipe", context=files["context"].read_bytes(), binary=files["binary"].read_bytes())
    return config.SerializeToString()


PIPELINE_CONFIG_FILE = "pipeline_config.pb"


def main(argv: list[str] | None = None) -> int:
    """python -m jumbogate.tofino pack OUTDIR TARGET: write the blob beside bf-p4c's output (make p4-tofino does),
    for a server that loads its pipeline from a file and for inspection; the controller builds the same bytes."""
    parser = argparse.ArgumentParser(prog="python -m jumbogate.tofino", description=main.__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pack = commands.add_parser("pack", help=f"write OUTDIR/{PIPELINE_CONFIG_FILE}, Stratum's BfPipelineConfig")
    pack.add_argument("outdir", type=Path, help="bf-p4c's output directory (p4src/compile-tofino.sh)")
    pack.add_argument("target", choices=[target for target in TARGETS if target != "v1model"])
    args = parser.parse_args(argv)
    try:
        blob = device_config(args.outdir, args.target)
    except FileNotFoundError as err:
        print(f"jumbogate.tofino: {err}", file=sys.stderr)
        return 2
    out = args.outdir / PIPELINE_CONFIG_FILE
    out.write_bytes(blob)
    print(f"{out}: {len(blob):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
