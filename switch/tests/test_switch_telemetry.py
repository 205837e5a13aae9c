"""jumbogate-switch's DPDK telemetry: what it counts moves with real packets, and its buffers go back to the pool."""

from __future__ import annotations

from switch_harness import OnePortSwitch

from testlab.lab import telemetry_query
from testlab.nic_harness import PacketPort, wait_for
from testlab.nic_packets import tcp_packet


def test_telemetry_counts_packets_by_port_and_drop_reason(log_dir):
    wiring = OnePortSwitch(log_dir)
    port = None
    try:
        prefix = wiring.switch.file_prefix
        buffers_before = telemetry_query(prefix, "/jumbogate_switch/buffers")
        stats = telemetry_query(prefix, "/jumbogate_switch/stats")
        assert stats["packets_in"] == 0 and stats["drops"]["port_role_unassigned"] == 0, stats
        # No controller has given port 0 a role: every packet is dropped as
        # port-role-unassigned, and counted as received on port 0.
        port = PacketPort(wiring.ns, wiring.peer)
        port.send([tcp_packet("198.51.100.1", "10.10.0.10", 40000 + i, 80, size=100) for i in range(25)])
        stats = wait_for(lambda: (s := telemetry_query(prefix, "/jumbogate_switch/stats"))["packets_in"] >= 25 and s, "25 packets counted")
        assert stats["drops"]["port_role_unassigned"] == stats["packets_in"], stats
        assert stats["packets_out"] == 0 and stats["digests_queued"] == 0, stats
        ports = telemetry_query(prefix, "/jumbogate_switch/ports")
        assert ports["0"]["interface"] == wiring.switch_if
        assert ports["0"]["rx_packets"] == stats["packets_in"] and ports["0"]["rx_bytes"] >= 25 * 154
        assert ports["0"]["tx_packets"] == 0
        assert telemetry_query(prefix, "/jumbogate_switch/buffers") == buffers_before
    finally:
        if port:
            port.close()
        wiring.close()
