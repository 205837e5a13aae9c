#!/usr/bin/env bash
# Build the optional P4 toolchain from p4lang sources and install it into
# /usr/local: p4c (BMv2 backend) with P4Testgen, PI and BMv2's
# simple_switch_grpc; on request also bf-p4c, p4c's open-source Tofino
# backend, into /usr/local/p4c-tofino.
#
#   sudo scripts/build-p4-toolchain.sh            # everything missing
#   P4_BUILD_DIR=/srv/p4 sudo scripts/build-p4-toolchain.sh
#   P4_SOURCES_BASE=/srv/mirrors sudo scripts/build-p4-toolchain.sh
#   P4TESTGEN=0 sudo scripts/build-p4-toolchain.sh   # p4c without P4Testgen
#   BF_P4C=1 sudo scripts/build-p4-toolchain.sh      # and bf-p4c (88 min more, measured)
#   ONLY=bf-p4c sudo scripts/build-p4-toolchain.sh   # bf-p4c alone
#
# The stages, in order: pi, bmv2, p4c, p4testgen (with its Z3), bf-p4c.
# ONLY="STAGE ..." runs the stages it names and no other (their order stays
# the above); without it every stage runs but bf-p4c, which BF_P4C=1 adds,
# and p4testgen, which P4TESTGEN=0 takes away. ONLY neither builds nor
# checks the stages it leaves out: bf-p4c is best built after BMv2 (see its
# stage below). Each stage has its stamp in $P4_BUILD_DIR/stamps.
#
# P4_SOURCES_BASE replaces https://github.com for every clone, submodules
# included: a folder of OWNER/NAME git repositories (a name ending in .git
# is also looked up, as PI's .gitmodules spells some) builds offline.
#
# jumbogate needs none of it: its pipeline is committed (p4src/compiled/)
# and its software switch, jumbogate-switch, runs without it. With it,
# `make test` also runs the PTF suite, the controller and the emulation on
# BMv2 (the P4 reference model), and checks the committed compile against
# a fresh one. `make setup` and CI never run this script.
#
# Pinned commits, so that a build today equals a build next year. Idempotent:
# a step whose result is installed (the tool on PATH and its stamp file for
# the same commit) is skipped. Prints each step's time. About 80 minutes
# on two cores without P4Testgen; the build runs at low priority. PI and BMv2 come first, as
# BMv2 runs the committed compile without p4c.
set -euo pipefail

BASE=${P4_SOURCES_BASE:-https://github.com}
WORK=${P4_BUILD_DIR:-/opt/p4-toolchain}
JOBS=${JOBS:-$(nproc)}

# p4c v1.2.4.8 builds against Debian 12's protobuf 3.21 without abseil.
P4C_COMMIT=32893b7e879db9e1c368d3568d41cb3d20c034d0       # tag v1.2.4.8
# The P4Runtime commit p4c v1.2.4.8 pins (CMakeLists.txt, FetchContent p4runtime).
P4RUNTIME_FOR_P4C=1e771c4e05c4e7e250df00212b3ca02ee3202d71
# The inja commit P4Testgen pins (backends/p4tools/modules/testgen/CMakeLists.txt).
INJA_FOR_P4C=3741c73ba78babd2ed88f2acf2fcd6dafdb878e8
# P4Testgen wants Z3 4.8.14 to 4.11 (4.12 breaks with libgc); Debian 12 has
# 4.8.12. PyPI's z3-solver wheel carries z3++.h and libz3.so: it goes into a
# prefix of its own, so that Debian's libz3 stays as it is.
Z3_WHEEL_VERSION=4.11.2.0
Z3_PREFIX=/usr/local/z3-4.11
# P4Testgen: 30 min 38 s on two cores, after p4c; P4TESTGEN=0 leaves it out.
P4TESTGEN=${P4TESTGEN:-1}
# PI and BMv2 main of the same period (BMv2's CI builds PI main).
PI_COMMIT=f96af95e090619491e3abf2df69df340c2c9cb46
BMV2_COMMIT=9674187f610c81878e3586f9a1746dcc7f903114

# bf-p4c (BF_P4C=1 or ONLY=bf-p4c): p4c's backends/tofino from a newer p4c
# than the one above, in a source folder, build folder and prefix of its
# own, so that `p4c` stays the version the committed compile was made with.
BF_P4C=${BF_P4C:-0}
BF_P4C_COMMIT=6b7ec98e77dfc71c6e1309d9a76183cb31f35a8a     # p4c tag v1.2.5.16
# What that p4c fetches, checked out here instead (FetchContent offline):
P4RUNTIME_FOR_BF_P4C=ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5  # its CMakeLists.txt pins it
ABSEIL_FOR_BF_P4C=dd4c89bd657f1e247ce5111a5c89ffe6ccfd0c92     # 20240722.1 (cmake/Abseil.cmake)
# protobuf v25.3 (cmake/Protobuf.cmake), built static and not installed:
# Debian 12's protobuf 3.21 has no CMake config, which this p4c looks for.
PROTOBUF_FOR_BF_P4C=4a2aef570deb2bfb8927426558701e8bfc26f2a4
SPDLOG_FOR_BF_P4C=53e1c9ab112aa97062ba3df8fede91c3acd248d5     # v1.8.3 (backends/tofino/cmake/spdlog.cmake)
BF_P4C_PREFIX=/usr/local/p4c-tofino
# For the build only (pyinstaller packs p4c-build-logs; the schema scripts
# need jsl and jsonschema), in a venv of the build's own: the versions p4c's
# CI installs (tools/ci-build.sh) and pyinstaller's own dependency.
BF_P4C_PYPI=(jsl==0.2.4 pyinstaller==6.11.0 jsonschema==4.23.0 pyyaml==6.0.2 packaging==24.2)
BF_P4C_VENV=$WORK/venv-bf-p4c
BF_P4C_DEBIAN_PACKAGES=(libz3-dev libgc-dev rapidjson-dev python3-venv)

ONLY=${ONLY:-}
STAGES=(pi bmv2 p4c p4testgen bf-p4c)
for stage in $ONLY; do
  [[ " ${STAGES[*]} " == *" $stage "* ]] || {
    echo "build-p4-toolchain: ONLY names an unknown stage '$stage' (stages: ${STAGES[*]})" >&2; exit 1; }
done
# wanted STAGE: the stage is asked for (it still skips what is installed).
wanted() {
  if [ -n "$ONLY" ]; then [[ " $ONLY " == *" $1 "* ]]; return; fi
  case $1 in
    p4testgen) [ "$P4TESTGEN" != 0 ] ;;
    bf-p4c) [ "$BF_P4C" = 1 ] ;;
    *) true ;;
  esac
}
# left_out STAGE NAME: says why a stage is not run.
left_out() {
  if [ -n "$ONLY" ]; then say "$2 left out (ONLY=$ONLY)"
  elif [ "$1" = p4testgen ]; then say "$2 left out (P4TESTGEN=0)"
  elif [ "$1" = bf-p4c ]; then say "$2 left out (BF_P4C=1 or ONLY=bf-p4c builds it)"
  fi
}

DEBIAN_PACKAGES=(
  cmake bison flex libfl-dev libboost-dev libboost-iostreams-dev libboost-graph-dev
  libboost-program-options-dev libboost-thread-dev libboost-filesystem-dev libgc-dev libgmp-dev
  libjudy-dev libreadline-dev libnanomsg-dev libthrift-dev thrift-compiler libxxhash-dev
  libjsoncpp-dev autoconf automake libtool libtool-bin pkg-config libgrpc++-dev libgrpc-dev
  protobuf-compiler-grpc libprotobuf-dev libprotoc-dev protobuf-compiler libpcap-dev python3
  python3-dev libssl-dev libevent-dev libffi-dev g++ make git python3-six python3-thrift
)

say() { printf 'build-p4-toolchain: %s\n' "$*"; }
started=$SECONDS
step_start=$SECONDS
step() { say "$* (at $(( (SECONDS - started) / 60 )) min)"; step_start=$SECONDS; }
done_step() { say "$1 done in $(( (SECONDS - step_start) / 60 )) min $(( (SECONDS - step_start) % 60 )) s"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "build-p4-toolchain: run as root (it installs Debian packages and into /usr/local)" >&2
  exit 1
fi
mkdir -p "$WORK/src" "$WORK/build" "$WORK/stamps"

# checkout REPO DIR COMMIT: a clone of one pinned commit.
checkout() {
  local repo=$1 dir=$2 commit=$3
  if [ ! -d "$dir/.git" ]; then
    git clone --quiet --no-checkout "$BASE/$repo" "$dir"
  fi
  git -C "$dir" fetch --quiet origin "$commit" 2>/dev/null || true
  # A mirror may leave out its largest files (p4c's slides, say): they are
  # left out of the work tree too, which the build never reads.
  local absent
  absent=$(git -C "$dir" ls-tree -r "$commit" | awk '$2 == "blob" {print $3, $4}' \
    | git -C "$dir" cat-file --batch-check='%(objectname) %(rest)' 2>/dev/null | awk '$2 == "missing" {print $1}' || true)
  if [ -n "$absent" ]; then
    say "$repo: the source lacks $(wc -l <<<"$absent") file(s), left out of the checkout:"
    local patterns=('/*')
    while read -r hash; do
      path=$(git -C "$dir" ls-tree -r "$commit" | awk -v h="$hash" '$3 == h {print $4}')
      say "  $path"
      patterns+=("!/$path")
    done <<<"$absent"
    git -C "$dir" sparse-checkout set --no-cone "${patterns[@]}"
  fi
  git -C "$dir" -c advice.detachedHead=false checkout --quiet --force "$commit"
}

installed() {  # TOOL STAMP: the tool is on PATH and was built from this commit
  command -v "$1" >/dev/null 2>&1 && [ -f "$WORK/stamps/$2" ]
}

step "Debian packages"
wanted bf-p4c && DEBIAN_PACKAGES+=("${BF_P4C_DEBIAN_PACKAGES[@]}")
missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
done_step "Debian packages"

if ! wanted pi; then
  left_out pi PI
elif [ -f "$WORK/stamps/pi-$PI_COMMIT" ]; then
  say "PI $PI_COMMIT is installed: skipped"
else
  step "PI"
  checkout p4lang/PI "$WORK/src/PI" "$PI_COMMIT"
  # The submodules PI needs with --with-proto (not openconfig/public).
  git -C "$WORK/src/PI" -c protocol.file.allow=always -c url."$BASE/".insteadOf=https://github.com/ \
    submodule update --quiet --init proto/p4runtime proto/openconfig/gnmi third_party/googletest third_party/uthash
  (cd "$WORK/src/PI" && ./autogen.sh >/dev/null 2>&1 \
    && ./configure --with-proto --without-internal-rpc --without-cli --without-bmv2 >/dev/null \
    && nice -n 15 make -j"$JOBS" >/dev/null && make install >/dev/null && ldconfig)
  touch "$WORK/stamps/pi-$PI_COMMIT"
  done_step "PI"
fi

if ! wanted bmv2; then
  left_out bmv2 BMv2
elif installed simple_switch_grpc "bmv2-$BMV2_COMMIT"; then
  say "BMv2 $BMV2_COMMIT is installed: skipped"
else
  step "BMv2 (simple_switch_grpc)"
  checkout p4lang/behavioral-model "$WORK/src/behavioral-model" "$BMV2_COMMIT"
  (cd "$WORK/src/behavioral-model" && ./autogen.sh >/dev/null 2>&1 \
    && ./configure --with-pi >/dev/null \
    && nice -n 15 make -j"$JOBS" >/dev/null && make install >/dev/null && ldconfig)
  touch "$WORK/stamps/bmv2-$BMV2_COMMIT"
  done_step "BMv2"
fi

if ! wanted p4testgen; then
  say "no Z3 needed: P4Testgen is not built"
elif [ -f "$Z3_PREFIX/stamp-$Z3_WHEEL_VERSION" ]; then
  say "Z3 $Z3_WHEEL_VERSION is installed in $Z3_PREFIX: skipped"
else
  step "Z3 $Z3_WHEEL_VERSION for P4Testgen (PyPI's z3-solver wheel)"
  pip=$(command -v pip3 || true)
  [ -x "$(dirname "$0")/../.venv/bin/pip" ] && pip="$(dirname "$0")/../.venv/bin/pip"
  [ -n "$pip" ] || { say "no pip to download z3-solver with: run 'make setup' first (it makes .venv)"; exit 1; }
  rm -rf "$WORK/z3" && mkdir -p "$WORK/z3"
  "$pip" download --quiet --no-deps "z3-solver==$Z3_WHEEL_VERSION" -d "$WORK/z3"
  (cd "$WORK/z3" && python3 -m zipfile -e z3_solver-*.whl wheel)
  rm -rf "$Z3_PREFIX" && mkdir -p "$Z3_PREFIX"
  cp -r "$WORK/z3/wheel/z3/include" "$WORK/z3/wheel/z3/lib" "$Z3_PREFIX/"
  touch "$Z3_PREFIX/stamp-$Z3_WHEEL_VERSION"
  done_step "Z3"
fi

# p4c's configuration, shared by its build and P4Testgen's: offline
# (FetchContent reads the checked-out P4Runtime), Debian's protobuf.
p4c_options=(-DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_BUILD_TYPE=Release -DENABLE_BMV2=ON -DENABLE_EBPF=OFF
  -DENABLE_UBPF=OFF -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF -DENABLE_GTESTS=OFF -DP4C_USE_PREINSTALLED_PROTOBUF=ON
  -DFETCHCONTENT_FULLY_DISCONNECTED=ON -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$WORK/src/p4runtime-for-p4c")
if ! wanted p4c; then
  left_out p4c p4c
elif installed p4c "p4c-$P4C_COMMIT"; then
  say "p4c $P4C_COMMIT is installed: skipped"
else
  step "p4c (BMv2 backend)"
  checkout p4lang/p4c "$WORK/src/p4c" "$P4C_COMMIT"
  checkout p4lang/p4runtime "$WORK/src/p4runtime-for-p4c" "$P4RUNTIME_FOR_P4C"
  mkdir -p "$WORK/build/p4c"
  (cd "$WORK/build/p4c" && cmake "$WORK/src/p4c" "${p4c_options[@]}" -DENABLE_TEST_TOOLS=OFF >/dev/null \
    && nice -n 15 make -j"$JOBS" >/dev/null && make install >/dev/null)
  touch "$WORK/stamps/p4c-$P4C_COMMIT"
  done_step "p4c"
fi

# P4Testgen in a build folder of its own: turning it on in p4c's adds IR
# classes, which would rebuild all of p4c. Only the p4testgen target is
# built (the BMv2 target); it finds p4c's installed p4include.
if ! wanted p4testgen; then
  left_out p4testgen P4Testgen
elif installed p4testgen "p4testgen-$P4C_COMMIT"; then
  say "p4testgen $P4C_COMMIT is installed: skipped"
else
  step "P4Testgen (p4c's backends/p4tools)"
  checkout p4lang/p4c "$WORK/src/p4c" "$P4C_COMMIT"
  checkout p4lang/p4runtime "$WORK/src/p4runtime-for-p4c" "$P4RUNTIME_FOR_P4C"
  checkout pantor/inja "$WORK/src/inja-for-p4c" "$INJA_FOR_P4C"
  mkdir -p "$WORK/build/p4testgen"
  (cd "$WORK/build/p4testgen" && cmake "$WORK/src/p4c" "${p4c_options[@]}" \
      -DENABLE_TEST_TOOLS=ON -DENABLE_TOOLS_TARGET_EBPF=OFF \
      -DENABLE_TOOLS_TARGET_PNA=OFF -DTOOLS_USE_PREINSTALLED_Z3=ON -DZ3_INCLUDE_DIR="$Z3_PREFIX/include" \
      -DZ3_LIBRARY="$Z3_PREFIX/lib/libz3.so" -DCMAKE_INSTALL_RPATH="$Z3_PREFIX/lib" \
      -DCMAKE_BUILD_RPATH="$Z3_PREFIX/lib" -DFETCHCONTENT_SOURCE_DIR_INJA="$WORK/src/inja-for-p4c" >/dev/null \
    && nice -n 15 make -j"$JOBS" p4testgen >/dev/null)
  install -m 755 "$WORK/build/p4testgen/backends/p4tools/modules/testgen/p4testgen" /usr/local/bin/p4testgen
  install -m 644 "$WORK/src/p4c/backends/p4tools/modules/testgen/p4include/testgen.p4" /usr/local/share/p4c/p4include/
  touch "$WORK/stamps/p4testgen-$P4C_COMMIT"
  done_step "P4Testgen"
fi

# bf-p4c, p4c's open-source Tofino backend, with every other backend off.
# Configure it after BMv2 is installed: p4c records whether simple_switch
# exists, and configuring again once it does rebuilds everything. Its
# build's output goes to $WORK/build/bf-p4c.log; after an error, running
# the script again resumes in the same build folder.
if ! wanted bf-p4c; then
  left_out bf-p4c bf-p4c
elif installed bf-p4c "bf-p4c-$BF_P4C_COMMIT"; then
  say "bf-p4c $BF_P4C_COMMIT is installed: skipped"
else
  step "bf-p4c (p4c $BF_P4C_COMMIT's backends/tofino, into $BF_P4C_PREFIX)"
  command -v simple_switch >/dev/null \
    || say "no simple_switch on PATH: p4c records that, and a BMv2 built later makes its next configure rebuild all"
  src=$WORK/src/p4c-tofino
  # A checkout already at its commit is left as it is: checking it out again
  # would touch the files changed below and rebuild what includes them.
  checkout_at() { [ "$(git -C "$2" rev-parse -q --verify HEAD 2>/dev/null)" = "$3" ] || checkout "$@"; }
  checkout_at p4lang/p4c "$src" "$BF_P4C_COMMIT"
  checkout_at gabime/spdlog "$src/backends/tofino/third_party/spdlog" "$SPDLOG_FOR_BF_P4C"
  checkout_at p4lang/p4runtime "$WORK/src/p4runtime-for-bf-p4c" "$P4RUNTIME_FOR_BF_P4C"
  checkout_at abseil/abseil-cpp "$WORK/src/abseil-for-bf-p4c" "$ABSEIL_FOR_BF_P4C"
  checkout_at protocolbuffers/protobuf "$WORK/src/protobuf-for-bf-p4c" "$PROTOBUF_FOR_BF_P4C"

  # Three changes this p4c needs on Debian 12. Each sed changes nothing the
  # second time; each grep checks that the change is in place.
  # 1. Accept Debian's Z3 4.8.12 (it asks for 4.8.14; building Z3 takes an hour).
  sed -i 's/set(Z3_MIN_VERSION "4\.8\.14")/set(Z3_MIN_VERSION "4.8.12")/' "$src/cmake/Z3.cmake"
  # 2. GCC 12's std::erase_if calls the two predicates of
  #    ControlFlowVisitor::init_join_flows with a const reference.
  sed -i 's/\[this\](flow_join_points_t::value_type &el)/[this](const flow_join_points_t::value_type \&el)/' \
    "$src/ir/visitor.cpp"
  # 3. The driver joins each command into text: find_file's PosixPath for the
  #    assembler (and for the two tools found beside it) made it crash.
  sed -i -E "s/self\.add_command\('(assembler|bf-rt-verifier|p4c-gen-conf)', (bfas|bfrt_schema|p4c_gen_conf)\)/self.add_command('\1', str(\2))/" \
    "$src/backends/tofino/bf-p4c/driver/barefoot.py"
  grep -q 'set(Z3_MIN_VERSION "4.8.12")' "$src/cmake/Z3.cmake" \
    && [ "$(grep -c '\[this\](const flow_join_points_t::value_type &el)' "$src/ir/visitor.cpp")" = 2 ] \
    && [ "$(grep -cE "add_command\('[a-z0-9-]+', str\((bfas|bfrt_schema|p4c_gen_conf)\)\)" \
            "$src/backends/tofino/bf-p4c/driver/barefoot.py")" = 3 ] \
    || { say "bf-p4c: a change to p4c $BF_P4C_COMMIT did not apply (see the seds above)"; exit 1; }

  # The build's Python tools, in a venv of its own, first on PATH. Debian's
  # python3: pyinstaller packs its libpython into p4c-build-logs.
  [ -x "$BF_P4C_VENV/bin/pip" ] || /usr/bin/python3 -m venv "$BF_P4C_VENV"
  "$BF_P4C_VENV/bin/pip" install --quiet --disable-pip-version-check "${BF_P4C_PYPI[@]}"

  bf_p4c_options=(-DCMAKE_INSTALL_PREFIX="$BF_P4C_PREFIX" -DCMAKE_BUILD_TYPE=Release -DENABLE_TOFINO=ON
    -DP4C_DRIVER_NAME=bf-p4c -DCMAKE_UNITY_BUILD=ON -DENABLE_BMV2=OFF -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF
    -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF -DENABLE_P4TEST=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_P4FMT=OFF
    -DENABLE_GTESTS=OFF -DENABLE_TEST_TOOLS=OFF -DUSE_PREINSTALLED_Z3=ON -DP4C_USE_PREINSTALLED_BDWGC=ON
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON
    -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$WORK/src/abseil-for-bf-p4c"
    -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$WORK/src/protobuf-for-bf-p4c"
    -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$WORK/src/p4runtime-for-bf-p4c")
  mkdir -p "$WORK/build/bf-p4c"
  say "bf-p4c: the build's output goes to $WORK/build/bf-p4c.log"
  (cd "$WORK/build/bf-p4c" && export PATH="$BF_P4C_VENV/bin:$PATH" \
    && cmake "$src" "${bf_p4c_options[@]}" >>"$WORK/build/bf-p4c.log" \
    && nice -n 15 make -j"$JOBS" >>"$WORK/build/bf-p4c.log" \
    && make install >>"$WORK/build/bf-p4c.log")
  ln -sfn "$BF_P4C_PREFIX/bin/bf-p4c" /usr/local/bin/bf-p4c
  ln -sfn "$BF_P4C_PREFIX/bin/p4c-barefoot" /usr/local/bin/p4c-barefoot
  touch "$WORK/stamps/bf-p4c-$BF_P4C_COMMIT"
  done_step "bf-p4c"
fi

! wanted p4c || say "p4c: $(p4c --version 2>&1 | head -1)"
! wanted p4testgen || say "p4testgen: $(command -v p4testgen)"
! wanted bmv2 || say "simple_switch_grpc: $(command -v simple_switch_grpc)"
! wanted bf-p4c || say "bf-p4c: $(bf-p4c --version 2>&1 | head -1)"
say "total $(( (SECONDS - started) / 60 )) min"
