#!/usr/bin/env bash
# make setup: install and build everything jumbogate needs on Debian 12 (run as root).
# Idempotent: each step checks what is already there and says what it did.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

# What this script supports: Debian 12 (bookworm) on amd64. The Debian
# package names below are bookworm's (DPDK 22.11, libclang-rt-14-dev, grpc++
# 1.51), and the Python lock files' hashes are of the wheels PyPI serves for
# its CPython 3.11 on x86_64. JUMBOGATE_ANY_DISTRO=1 goes on elsewhere, at the
# operator's risk (package names, versions and wheels may not match).
distro="unknown"
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  distro="$(. /etc/os-release && echo "${ID:-unknown} ${VERSION_ID:-?}${VERSION_CODENAME:+ ($VERSION_CODENAME)}")"
fi
arch="$(dpkg --print-architecture 2>/dev/null || uname -m)"
case "$distro $arch" in
  "debian 12"*" amd64") say "Debian 12 on amd64: supported" ;;
  *)
    if [ "${JUMBOGATE_ANY_DISTRO:-0}" = 1 ]; then
      say "WARNING: $distro on $arch is not what this script supports (Debian 12 on amd64); going on because JUMBOGATE_ANY_DISTRO=1"
    else
      echo "setup: this machine runs $distro on $arch; make setup supports Debian 12 (bookworm) on amd64 only:" >&2
      echo "setup: its Debian package names and the Python lock files' hashes are that platform's." >&2
      echo "setup: JUMBOGATE_ANY_DISTRO=1 make setup tries anyway, at your own risk." >&2
      exit 1
    fi
    ;;
esac

# Debian packages. DPDK 22.11 for the SmartNIC, grpc++ for its control server,
# clang for the fuzz target, Mininet and the network tools for the emulation,
# python3-cryptography for the throwaway certificates of TLS in tests (pki.py),
# etcd for the controller's store (its tests start their own, on free ports),
# prometheus for promtool, which checks and tests deploy/prometheus/'s alert
# rules (no test uses its server), nftables for the fleet's fault run (it cuts
# a controller off from etcd), scamper for make value's path MTU comparison.
DEB_PACKAGES=(
  build-essential pkg-config meson ninja-build clang clang-format libclang-rt-14-dev
  dpdk dpdk-dev libdpdk-dev libpcap-dev libnuma-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3 python3-venv python3-dev python3-cryptography etcd-server etcd-client prometheus nftables scamper
  mininet iproute2 iputils-ping ethtool iperf3 tshark tcpdump bridge-utils procps psmisc
  dpkg-dev debootstrap systemd
)

missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; the default (no) is fine.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages: all ${#DEB_PACKAGES[@]} present"
fi

# The Python virtualenv. It sees Debian's site packages because Mininet is
# only packaged for Debian's python3, not on PyPI.
if [ ! -x .venv/bin/python ]; then
  say "creating .venv (Debian python3, --system-site-packages)"
  /usr/bin/python3 -m venv --system-site-packages .venv
else
  say ".venv exists"
fi
# The run-time packages and those of the tests, lint, stub generation and
# plots, each pinned with its files' hashes (pip refuses a file whose hash
# differs, or a package the locks do not pin).
locks=(controlplane/requirements.lock controlplane/requirements-dev.lock)
stamp=.venv/.lock-installed
if [ ! -f "$stamp" ] || ! cat "${locks[@]}" | cmp -s - "$stamp"; then
  say "installing pinned Python packages from ${locks[*]} (hashes checked)"
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes -r "${locks[0]}" -r "${locks[1]}"
  cat "${locks[@]}" >"$stamp"
else
  say "Python packages match ${locks[*]}"
fi
if ! .venv/bin/python -c 'import jumbogate' 2>/dev/null; then
  say "installing the jumbogate package (editable)"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e controlplane
else
  say "jumbogate package installed"
fi

# p4rt-conformance/'s own venv: p4lang's p4runtime bindings need protobuf
# < 3.21, which .venv's packages do not take.
p4rt_lock=p4rt-conformance/requirements.txt
p4rt_stamp=.venv-p4rt/.lock-installed
if [ ! -x .venv-p4rt/bin/python ]; then
  say "creating .venv-p4rt (the P4Runtime conformance suite's)"
  /usr/bin/python3 -m venv .venv-p4rt
fi
if [ ! -f "$p4rt_stamp" ] || ! cmp -s "$p4rt_lock" "$p4rt_stamp"; then
  say "installing $p4rt_lock into .venv-p4rt"
  .venv-p4rt/bin/pip install -q --disable-pip-version-check -r "$p4rt_lock"
  cp "$p4rt_lock" "$p4rt_stamp"
else
  say ".venv-p4rt matches $p4rt_lock"
fi

make --no-print-directory proto
make --no-print-directory native

# Linux's own GRO selftest (tools/testing/selftests/net/gro.c), the judge of
# the merge rules in smartnic/tests/integration/test_linux_gro_selftest.py:
# taken from Debian's linux-source package of the newest kernel it offers,
# built into build/linux-gro/, never committed. Without it that test skips
# and says why.
gro_dir=build/linux-gro
if [ ! -x "$gro_dir/gro" ]; then
  source_pkg=$(apt-cache search --names-only '^linux-source-[0-9.]+$' 2>/dev/null | awk '{print $1}' | sort -V | tail -n 1)
  if [ -z "$source_pkg" ]; then
    say "no linux-source package is offered: the kernel's GRO selftest will be skipped"
  else
    say "building the kernel's GRO selftest from $source_pkg (takes a minute: the source tarball is read through)"
    work=$(mktemp -d)
    if (cd "$work" && apt-get download -qq "$source_pkg" >/dev/null 2>&1) &&
       dpkg-deb --fsys-tarfile "$work"/"$source_pkg"_*.deb |
         tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
         tar -xJ -C "$work" --wildcards --strip-components=3 \
           '*/tools/testing/selftests/net/gro.c' '*/tools/testing/selftests/kselftest.h' &&
       mkdir -p "$gro_dir" && gcc -O2 -o "$gro_dir/gro" "$work/selftests/net/gro.c"; then
      echo "$source_pkg" > "$gro_dir/source"
      say "built $gro_dir/gro from $source_pkg"
    else
      say "could not build the kernel's GRO selftest from $source_pkg: its test will be skipped"
    fi
    rm -rf "$work"
  fi
else
  say "the kernel's GRO selftest is built ($(cat "$gro_dir/source" 2>/dev/null))"
fi

# grpcurl, the tool operators reach the gRPC servers' reflection with
# (docs/operations.md): a test lists the operator API's services through it.
# Debian 12 does not package it; Go builds it from the Go module proxy into
# build/tools/ when Go is installed, else that test skips and says why.
GRPCURL_VERSION=v1.9.3
if [ ! -x build/tools/grpcurl ] && ! command -v grpcurl >/dev/null; then
  if command -v go >/dev/null; then
    say "building grpcurl $GRPCURL_VERSION with Go into build/tools/ (takes a few minutes)"
    if GOBIN="$PWD/build/tools" GOFLAGS=-mod=mod go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" >/dev/null 2>&1; then
      say "built build/tools/grpcurl"
    else
      say "could not build grpcurl: its test will be skipped"
    fi
  else
    say "Go is not installed: grpcurl is not built and its test will be skipped"
  fi
fi

# The compiled pipeline (p4src/compiled/) is committed: nothing here needs
# p4c. Where p4c is present, `make test` checks that the committed files
# equal a fresh compile.
say "done"
