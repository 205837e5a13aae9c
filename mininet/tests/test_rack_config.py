"""mininet/rack.yaml must describe the topology that mininet/emulation/plan.py builds."""

import ipaddress

from emulation import plan
from emulation.rack import RACK_CONFIG

from jumbogate.config import load_config

CONFIG = load_config(RACK_CONFIG)


def test_ports_match_the_switch_ports_of_the_topology():
    declared = {p.port: (p.name, p.role) for p in CONFIG.ports}
    expected = {p.number: (p.name, p.role) for p in plan.SWITCH_PORTS} | {plan.CPU_PORT: ("cpu", "cpu")}
    assert declared == expected


def test_addresses_of_the_processes():
    assert CONFIG.switch.p4runtime == plan.P4RUNTIME_ADDRESS
    assert CONFIG.switch.device_id == plan.DEVICE_ID
    assert CONFIG.smartnic_control == plan.NIC_CONTROL_ADDRESS
    assert CONFIG.controller_listen == plan.CONTROLLER_ADDRESS


def test_instances_and_mtus():
    assert {i.id: (set(i.addresses), i.jumbo) for i in CONFIG.instances} == {
        i.host: ({ipaddress.ip_address(i.address.ip4), ipaddress.ip_address(i.address.ip6)}, i.jumbo) for i in plan.INSTANCES
    }
    assert (CONFIG.mtu.guest_jumbo, CONFIG.mtu.internal) == (plan.MTU_JUMBO_GUEST, plan.MTU_UNDERLAY)
    assert CONFIG.mtu.default_external == CONFIG.mtu.default_external_v6 == plan.MTU_EXTERNAL


def test_routes_use_the_real_macs():
    routes = {str(r.prefix): {(h.port, h.src_mac, h.dst_mac) for h in r.next_hops} for r in CONFIG.routes}
    uplinks = {(r.port.number, r.port.mac, r.port.peer_mac) for r in plan.ROUTERS}
    assert routes["0.0.0.0/0"] == uplinks
    assert routes["::/0"] == uplinks
    for inst in plan.INSTANCES:
        port = plan.switch_port(inst.host)
        hop = {(port.number, port.mac, port.peer_mac)}
        assert routes[f"{inst.address.ip4}/32"] == hop
        assert routes[f"{inst.address.ip6}/128"] == hop


def test_merge_services_cover_the_demo_ports_of_the_jumbo_instance_only():
    for service in CONFIG.merge_services:
        assert service.prefix.num_addresses == 1
        assert str(service.prefix.network_address) in (plan.JUMBO.address.ip4, plan.JUMBO.address.ip6)
        assert (service.port_lo, service.port_hi) == (plan.IPERF_PORTS[0], plan.IPERF_PORTS[-1])
