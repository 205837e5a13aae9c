#!/usr/bin/env bash
# Compile the TNA jumbogate program with bf-p4c for one chip and one
# parse-depth profile.
#   p4src/compile-tofino.sh CHIP PROFILE_BYTES OUTDIR
# CHIP is tofino (Tofino 1, TNA) or tofino2 (Tofino 2, T2NA). Writes bf-p4c's
# output into OUTDIR (jumbogate.p4info.txtpb with standard P4Runtime
# externs, so the controller drives it as it drives v1model; pipe/ with the
# resource logs) and OUTDIR/resources.md, the summary of what it uses.
# `make p4-tofino` runs it for both chips and both profiles into build/p4/.
# Any compiler warning fails the build, except the kinds listed below.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 tofino|tofino2 PROFILE_BYTES OUTDIR" >&2
    exit 2
fi
chip=$1
depth=$2
outdir=$3
case "$chip" in
    tofino) arch=tna ;;
    tofino2) arch=t2na ;;
    *) echo "compile-tofino.sh: CHIP must be tofino or tofino2, got '$chip'" >&2; exit 2 ;;
esac
# bf-p4c empties its output directory first: the log lives outside it
# (compile_prepare's temporary file) until the compile is done.
source "$(dirname "$0")/compile-common.sh"
compile_prepare compile-tofino.sh bf-p4c "$depth" "$outdir"
started=$(date +%s)
if ! (cd "$here" && bf-p4c -g --target "$chip" --arch "$arch" --std p4-16 \
        -DPARSE_DEPTH_BYTES="$depth" \
        --p4runtime-force-std-externs \
        --p4runtime-files "$outdir/jumbogate.p4info.txtpb" \
        -o "$outdir" tna/jumbogate.p4) >"$log" 2>&1; then
    cat "$log" >&2
    cp "$log" "$outdir/bf-p4c.log"
    # Tables placed in more stages than the chip has: the summary (and its
    # stage map) says where the program stands.
    if [ -f "$outdir/pipe/logs/table_summary.log" ]; then
        python3 "$here/tofino_resources.py" "$outdir" "$chip" "$depth" "$(( $(date +%s) - started ))" \
            >"$outdir/resources.md" && echo "compile-tofino.sh: the tables' placement is in $outdir/resources.md" >&2
    fi
    echo "compile-tofino.sh: bf-p4c failed for $chip, PARSE_DEPTH_BYTES=$depth" >&2
    exit 1
fi
seconds=$(( $(date +%s) - started ))
# Warnings that say nothing about this program, each matched by its text:
# * unused constants: defines.p4 is shared by every top level and holds
#   constants only v1model or the software target use (the v1model compile,
#   which uses them, fails on its own warnings);
# * "may be uninitialized" for the epoch the RegisterActions read (set
#   before the sketch runs; the frontend's flow analysis does not follow
#   RegisterAction bodies) and for the ingress parser's metadata (zeroed by
#   @pa_auto_init_metadata, which the frontend does not know);
# * no standard P4Info for DynHash: the Hash units have no P4Runtime face
#   on either target;
# * the compiler's own padding states for Tofino's minimum parse depth;
# * the untyped Mirror() is deprecated, but the typed constructor fails on
#   Tofino 1 (tna/jumbogate.p4 says more);
# * abseil's notice that its log is not initialised yet, printed by the
#   P4Runtime serializer: a line of the library's, not a diagnostic;
# * the count bf-p4c prints at the end ("0 errors, 17 warnings generated."),
#   each of which the lines above matched.
known='\[--Wwarn=unused\] warning: .* is unused'
known="$known|warning: epoch may be uninitialized"
known="$known|warning: out parameter 'md' may be uninitialized when 'TnaIngressParser' terminates"
known="$known|warning: No known conversion to standard P4Info for 'DynHash' extern type"
known="$known|warning: Parser state min_parse_depth_accept_loop will be unrolled"
known="$known|Mirror must be specified with the value of the mirror_type"
known="$known|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
known="$known|^[0-9]+ errors?, [0-9]+ warnings? generated\.$"
if grep -i "warning" "$log" | grep -Ev "$known" | grep -q .; then
    cat "$log" >&2
    echo "compile-tofino.sh: bf-p4c reported warnings for $chip, PARSE_DEPTH_BYTES=$depth" >&2
    exit 1
fi
cp "$log" "$outdir/bf-p4c.log"
python3 "$here/tofino_resources.py" "$outdir" "$chip" "$depth" "$seconds" >"$outdir/resources.md"
echo "compile-tofino.sh: $chip PARSE_DEPTH_BYTES=$depth -> $outdir ($seconds s; resources.md)"
