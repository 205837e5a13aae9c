#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Record real Linux TCP at 1500 bytes into a pcap the engine benchmark can
# replay (make bench TRACE=FILE):
#
#   smartnic/bench/capture.sh OUT.pcap [FLOWS] [PACKETS] [4|6]
#
# Two network namespaces joined by a veth pair at MTU 1500; the sender's
# TSO, GSO and checksum offload off (so the wire carries what a 1500-byte
# path carries: full segments and their ACK clocking, not 64 KB super
# packets), the receiver's GRO off (so nothing is merged before the
# capture). FLOWS parallel iperf3 streams (default 100) until PACKETS data
# packets (default 200000, about 300 MB) are captured, IPv4 or IPv6
# (default 4). tcpdump captures the receiver's
# side, data direction only, with the kernel's timestamps: the replay keeps
# the capture's order and spacing, several flows interleaved per burst as
# real traffic is. Needs root, iperf3 and tcpdump (make setup).
set -euo pipefail

out=${1:?usage: $0 OUT.pcap [FLOWS] [PACKETS] [4|6]}
flows=${2:-100}
packets=${3:-200000}
family=${4:-4}
case "$family" in 4|6) ;; *) echo "capture.sh: the family is 4 or 6, not '$family'" >&2; exit 2 ;; esac
for tool in iperf3 tcpdump ip ethtool; do
	command -v "$tool" >/dev/null || { echo "capture.sh: $tool is not installed (make setup)" >&2; exit 1; }
done

tag=jgcap$$
send=${tag}s
recv=${tag}r
cleanup() {
	ip netns pids "$recv" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns pids "$send" 2>/dev/null | xargs -r kill 2>/dev/null || true
	ip netns del "$send" 2>/dev/null || true
	ip netns del "$recv" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$send"
ip netns add "$recv"
ip link add "${tag}a" netns "$send" type veth peer name "${tag}b" netns "$recv"
ip -n "$send" link set lo up
ip -n "$recv" link set lo up
ip -n "$send" link set "${tag}a" mtu 1500 up
ip -n "$recv" link set "${tag}b" mtu 1500 up
ip -n "$send" addr add 10.77.0.1/24 dev "${tag}a"
ip -n "$recv" addr add 10.77.0.2/24 dev "${tag}b"
ip -n "$send" addr add fd77::1/64 dev "${tag}a" nodad
ip -n "$recv" addr add fd77::2/64 dev "${tag}b" nodad
ip netns exec "$send" ethtool -K "${tag}a" tso off gso off tx off >/dev/null
ip netns exec "$recv" ethtool -K "${tag}b" gro off >/dev/null
if [ "$family" = 4 ]; then server=10.77.0.2; else server=fd77::2; fi

ip netns exec "$recv" iperf3 -s -D -1 -p 5201 --logfile /dev/null
ip netns exec "$recv" tcpdump -i "${tag}b" -w "$out" -s 0 -Q in -c "$packets" "tcp dst port 5201" 2>/dev/null &
dump=$!
sleep 1
ip netns exec "$send" iperf3 -c "$server" -p 5201 -P "$flows" -t 60 >/dev/null 2>&1 &
sender=$!
wait "$dump" 2>/dev/null || true
kill "$sender" 2>/dev/null || true
echo "capture.sh: $out: $packets packets of $flows IPv$family TCP flows ($(stat -c %s "$out") bytes)"
