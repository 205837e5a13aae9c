# Sourced by compile.sh and compile-tofino.sh: the checks and set-up both
# compiles share. Call compile_prepare NAME COMPILER DEPTH OUTDIR; it exits
# with 2 on a bad profile and 1 when COMPILER is not on PATH, and sets
# `here` (p4src/), `outdir` (absolute, created) and `log` (a temporary file
# removed on exit).
compile_prepare() {
    local name=$1 compiler=$2 depth=$3
    case "$depth" in
        ''|*[!0-9]*) echo "$name: PROFILE_BYTES must be a number, got '$depth'" >&2; exit 2 ;;
    esac
    if ! command -v "$compiler" >/dev/null 2>&1; then
        echo "$name: $compiler is not on PATH; see README, 'Getting p4c and BMv2'" >&2
        exit 1
    fi
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    mkdir -p "$4"
    outdir=$(cd "$4" && pwd)
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
}
