#!/usr/bin/env bash
# Compile the v1model jumbogate program for one parse-depth profile.
#   p4src/compile.sh PROFILE_BYTES OUTDIR
# Writes OUTDIR/jumbogate.json (BMv2) and OUTDIR/jumbogate.p4info.txtpb
# (and nothing else). `make p4` writes them into p4src/compiled/, where they
# are committed, so that no other machine needs p4c.
# Any compiler warning fails the build.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 PROFILE_BYTES OUTDIR" >&2
    exit 2
fi
source "$(dirname "$0")/compile-common.sh"
compile_prepare compile.sh p4c "$1" "$2"
depth=$1
# Compiled from inside p4src/ with a relative path: the BMv2 JSON records
# source file names, and the committed outputs must not depend on where
# the checkout lives.
if ! (cd "$here" && p4c --target bmv2 --arch v1model --std p4-16 \
        -DPARSE_DEPTH_BYTES="$depth" \
        --p4runtime-files "$outdir/jumbogate.p4info.txtpb" \
        -o "$outdir" v1model/jumbogate.p4) >"$log" 2>&1; then
    cat "$log" >&2
    echo "compile.sh: p4c failed for PARSE_DEPTH_BYTES=$depth" >&2
    exit 1
fi
# Every warning fails the build, except one that p4c emits for every v1model
# table backed by an action selector: the frontend gives each table an
# implicit NoAction default, which BMv2 JSON cannot attach to a table with an
# action profile. It says nothing about this program, so it is dropped here by
# its exact text; any other warning (even on next_hops) still fails.
known='\[--Wwarn=unsupported\] warning: Target does not support default_action for V1ModelIngress\.routing\.next_hops \(due to action profiles\)'
if grep -i "warning" "$log" | grep -Ev "$known" | grep -q .; then
    cat "$log" >&2
    echo "compile.sh: p4c reported warnings for PARSE_DEPTH_BYTES=$depth" >&2
    exit 1
fi
# p4c also writes the preprocessed source (jumbogate.p4i) and names it in
# the JSON by its absolute path; neither belongs in the committed output.
rm -f "$outdir/jumbogate.p4i"
sed -i "s|\"program\" : \"$outdir/jumbogate.p4i\"|\"program\" : \"jumbogate.p4i\"|" "$outdir/jumbogate.json"
if grep -q "$outdir" "$outdir/jumbogate.json"; then
    echo "compile.sh: $outdir/jumbogate.json still names its directory" >&2
    exit 1
fi
echo "compile.sh: PARSE_DEPTH_BYTES=$depth -> $outdir/jumbogate.json, $outdir/jumbogate.p4info.txtpb"
