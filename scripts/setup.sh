#!/usr/bin/env bash
# make setup: install and build everything jumbogate needs on Debian 12 (run as root).
# Idempotent: each step checks what is already there and says what it did.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

# Debian packages. DPDK 22.11 for the SmartNIC, grpc++ for its control server,
# clang for the fuzz target, Mininet and the network tools for the emulation,
# python3-cryptography for the throwaway certificates of TLS in tests (pki.py),
# etcd for the controller's store (its tests start their own, on free ports),
# prometheus for promtool, which checks and tests deploy/prometheus/'s alert
# rules (no test uses its server), nftables for the fleet's fault run (it cuts
# a controller off from etcd).
DEB_PACKAGES=(
  build-essential pkg-config meson ninja-build clang clang-format libclang-rt-14-dev
  dpdk dpdk-dev libdpdk-dev libpcap-dev libnuma-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3 python3-venv python3-dev python3-cryptography etcd-server etcd-client prometheus nftables
  mininet iproute2 iputils-ping ethtool iperf3 tshark tcpdump bridge-utils procps psmisc
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
lock=controlplane/requirements.lock
stamp=.venv/.lock-installed
if [ ! -f "$stamp" ] || ! cmp -s "$lock" "$stamp"; then
  say "installing pinned Python packages from $lock"
  .venv/bin/pip install -q --disable-pip-version-check -r "$lock"
  cp "$lock" "$stamp"
else
  say "Python packages match $lock"
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

# The compiled pipeline (p4src/compiled/) is committed: nothing here needs
# p4c. Where p4c is present, `make test` checks that the committed files
# equal a fresh compile.
say "done"
