"""The rack config loader: what it accepts and every way it rejects a file."""

import copy
import ipaddress
from pathlib import Path

import pytest
import yaml

from jumbogate.config import ConfigError, load_config, parse_config

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"


@pytest.fixture
def raw() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def rejection(data: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "rack.yaml")
    return info.value


def test_example_loads_with_every_section():
    cfg = load_config(EXAMPLE)
    assert cfg.fleet_jumbo is True
    assert (cfg.mtu.internal, cfg.mtu.guest_jumbo, cfg.mtu.default_external, cfg.mtu.default_external_v6) == (9000, 8500, 1500, 1280)
    assert [p.port for p in cfg.ports_with_role("external")] == [1, 2]
    assert cfg.ports_with_role("nic")[0].port == 5
    default_v4 = next(r for r in cfg.routes if r.prefix == ipaddress.ip_network("0.0.0.0/0"))
    assert [h.port for h in default_v4.next_hops] == [1, 2]
    assert cfg.path_mtus[0].mtu == 1400
    assert cfg.merge_services[0].port_lo == 5201 and cfg.merge_services[0].port_hi == 5210
    assert cfg.smartnic_control == "127.0.0.1:50061"


def test_effective_mtu_needs_fleet_and_instance(raw):
    cfg = parse_config(raw, "rack.yaml")
    web, legacy = cfg.instance("web-1"), cfg.instance("legacy-1")
    assert cfg.effective_mtu(web) == 8500
    assert cfg.effective_mtu(legacy) == 1500
    assert cfg.effective_mtu(web, fleet_jumbo=False) == 1500


def test_defaults_fill_optional_sections(raw):
    minimal = {"switch": {"ports": [{"port": 1, "role": "external"}]}}
    cfg = parse_config(minimal, "rack.yaml")
    assert cfg.fleet_jumbo is False
    assert cfg.mtu.guest_jumbo == 8500
    assert cfg.switch.too_deep == "drop"
    assert cfg.routes == () and cfg.instances == ()


def test_jumbo_instance_with_fleet_off_is_rejected(raw):
    raw["fleet"]["jumbo"] = False
    err = rejection(raw)
    assert err.source == "rack.yaml"
    assert err.field == "instances[0].jumbo"
    assert "fleet.jumbo is off" in err.reason
    assert str(err).startswith("rack.yaml: instances[0].jumbo: ")


@pytest.mark.parametrize("value", [1279, 9217, 0, 65535])
def test_mtu_outside_range_is_rejected(raw, value):
    raw["mtu"]["guest_jumbo"] = value
    err = rejection(raw)
    assert err.field == "mtu.guest_jumbo"
    assert "outside 1280..9216" in err.reason


@pytest.mark.parametrize("value", [1280, 9216])
def test_mtu_range_is_inclusive(raw, value):
    raw["mtu"] = {"internal": 9216, "guest_jumbo": value, "default_external": 1280}
    assert parse_config(raw, "rack.yaml").mtu.guest_jumbo == value


def test_path_mtu_outside_range_is_rejected(raw):
    raw["path_mtus"][0]["mtu"] = 576
    err = rejection(raw)
    assert err.field == "path_mtus[0].mtu"


def test_path_mtu_above_the_underlay_is_rejected(raw):
    raw["path_mtus"][0]["mtu"] = 9100
    err = rejection(raw)
    assert err.field == "path_mtus[0].mtu" and "above mtu.internal 9000" in err.reason


def test_guest_jumbo_must_fit_under_internal(raw):
    raw["mtu"]["guest_jumbo"] = 9100
    err = rejection(raw)
    assert err.field == "mtu.guest_jumbo" and "does not fit under" in err.reason


@pytest.mark.parametrize("field", ["default_external", "default_external_v6"])
def test_default_external_above_guest_jumbo_is_rejected(raw, field):
    raw["mtu"][field] = 9000
    assert rejection(raw).field == f"mtu.{field}"


def test_ipv6_paths_default_to_the_ipv6_minimum_mtu(raw):
    raw["mtu"].pop("default_external_v6", None)
    cfg = parse_config(raw, "rack.yaml")
    assert (cfg.mtu.default_path_mtu(4), cfg.mtu.default_path_mtu(6)) == (cfg.mtu.default_external, 1280)
    raw["mtu"]["default_external_v6"] = 1279
    assert rejection(raw).field == "mtu.default_external_v6"


def test_port_used_twice_is_rejected(raw):
    raw["switch"]["ports"][3]["port"] = 1
    err = rejection(raw)
    assert err.field == "switch.ports[3]"
    assert "port 1 is already used by switch.ports[0]" in err.reason


def test_two_cpu_ports_are_rejected(raw):
    raw["switch"]["ports"].append({"port": 254, "role": "cpu"})
    assert "more than one port has role cpu" in rejection(raw).reason


def test_unknown_port_in_route_is_rejected(raw):
    raw["routes"][2]["next_hops"][0]["port"] = 9
    err = rejection(raw)
    assert err.field == "routes[2].next_hops[0].port"
    assert "not declared in switch.ports" in err.reason


def test_route_to_nic_port_is_rejected(raw):
    raw["routes"][2]["next_hops"][0]["port"] = 5
    assert "role nic" in rejection(raw).reason


def test_route_without_next_hops_is_rejected(raw):
    raw["routes"][0]["next_hops"] = []
    assert rejection(raw).field == "routes[0].next_hops"


def test_same_route_prefix_twice_is_rejected(raw):
    raw["routes"].append(copy.deepcopy(raw["routes"][2]))
    err = rejection(raw)
    assert err.field == f"routes[{len(raw['routes']) - 1}]"
    assert "10.10.0.10/32" in err.reason


def test_nested_route_prefixes_are_allowed(raw):
    raw["routes"].append({"prefix": "10.10.0.0/24", "next_hops": [{"port": 3, "src_mac": "02:00:00:00:00:01", "dst_mac": "02:00:00:00:00:02"}]})
    assert len(parse_config(raw, "rack.yaml").routes) == 7


def test_same_path_mtu_prefix_twice_is_rejected(raw):
    raw["path_mtus"].append({"prefix": "198.51.100.0/24", "mtu": 1300})
    assert rejection(raw).field == "path_mtus[1]"


def test_overlapping_merge_services_are_rejected(raw):
    raw["merge_services"].append({"prefix": "10.10.0.0/24", "ports": "5205-5300"})
    err = rejection(raw)
    assert err.field == "merge_services[1]"
    assert "overlaps merge_services[0]" in err.reason


def test_merge_services_with_disjoint_ports_are_allowed(raw):
    raw["merge_services"].append({"prefix": "10.10.0.0/24", "ports": 443})
    cfg = parse_config(raw, "rack.yaml")
    assert (cfg.merge_services[1].port_lo, cfg.merge_services[1].port_hi) == (443, 443)


def test_one_merge_service_port_may_be_written_as_a_string(raw):
    raw["merge_services"].append({"prefix": "10.10.0.0/24", "ports": "443"})
    cfg = parse_config(raw, "rack.yaml")
    assert (cfg.merge_services[1].port_lo, cfg.merge_services[1].port_hi) == (443, 443)


@pytest.mark.parametrize("ports", ["5210-5201", "http", "0-10", "1-70000", "0", "70000"])
def test_bad_merge_service_ports_are_rejected(raw, ports):
    raw["merge_services"][0]["ports"] = ports
    assert rejection(raw).field == "merge_services[0].ports"


def test_prefix_with_host_bits_is_rejected(raw):
    raw["routes"][0]["prefix"] = "10.0.0.1/8"
    err = rejection(raw)
    assert err.field == "routes[0].prefix" and "host bits set" in err.reason and "10.0.0.0/8" in err.reason


def test_malformed_prefix_is_rejected(raw):
    raw["path_mtus"][0]["prefix"] = "300.1.1.0/24"
    assert rejection(raw).field == "path_mtus[0].prefix"


def test_malformed_instance_address_is_rejected(raw):
    raw["instances"][1]["addresses"][1] = "fd00::zz"
    err = rejection(raw)
    assert err.field == "instances[1].addresses[1]"


def test_address_owned_by_two_instances_is_rejected(raw):
    raw["instances"][1]["addresses"][0] = "10.10.0.10"
    err = rejection(raw)
    assert err.field == "instances[1].addresses[0]" and "web-1" in err.reason


def test_duplicate_instance_id_is_rejected(raw):
    raw["instances"][1]["id"] = "web-1"
    assert rejection(raw).field == "instances[1]"


def test_bad_mac_is_rejected(raw):
    raw["routes"][0]["next_hops"][1]["dst_mac"] = "02:00:00:00:b0"
    assert rejection(raw).field == "routes[0].next_hops[1].dst_mac"


def test_unknown_field_is_rejected_with_the_known_ones(raw):
    raw["fleet"]["jumob"] = True
    err = rejection(raw)
    assert err.field == "fleet.jumob" and "known fields: jumbo" in err.reason


def test_unknown_role_is_rejected(raw):
    raw["switch"]["ports"][0]["role"] = "uplink"
    assert rejection(raw).field == "switch.ports[0].role"


def test_missing_required_section_is_rejected():
    assert rejection({"fleet": {"jumbo": True}}).field == "switch"


def test_wrong_types_are_rejected(raw):
    raw["fleet"]["jumbo"] = "yes please"
    assert rejection(raw).field == "fleet.jumbo"
    raw["fleet"]["jumbo"] = True
    raw["elephant"]["threshold_bytes"] = 0
    assert rejection(raw).field == "elephant.threshold_bytes"


def test_bad_endpoint_is_rejected(raw):
    raw["smartnic"]["control"] = "localhost"
    assert rejection(raw).field == "smartnic.control"
    raw["smartnic"]["control"] = "unix:relative.sock"
    assert rejection(raw).field == "smartnic.control"


def test_a_unix_socket_endpoint_is_taken(raw):
    # A SmartNIC in another network namespace of the host is reached this way.
    raw["smartnic"]["control"] = "unix:/run/jumbogate/nic.sock"
    assert parse_config(raw, "rack.yaml").smartnic_control == "unix:/run/jumbogate/nic.sock"


def test_bad_too_deep_policy_is_rejected(raw):
    raw["switch"]["too_deep"] = "reject"
    assert rejection(raw).field == "switch.too_deep"


def test_missing_file_names_the_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(missing)
    assert str(missing) in str(info.value) and "cannot read" in str(info.value)


def test_invalid_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "rack.yaml"
    bad.write_text("fleet:\n  jumbo: true\nswitch: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(bad) in str(info.value) and "not valid YAML at line" in str(info.value)


def test_top_level_must_be_a_mapping(tmp_path):
    bad = tmp_path / "rack.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert "expected a mapping" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "bounds"),
    [("max_flows", 12289, "1..12288"), ("max_flows", 0, "1..12288"), ("max_onloads_per_epoch", 0, "1..100000")],
)
def test_merge_path_admission_limits_are_bounded(raw, key, value, bounds):
    # max_flows stays at most three quarters of the switch's 16384-entry
    # merge_flows table, so that the controller's writes never fill it.
    raw["elephant"][key] = value
    err = rejection(raw)
    assert err.field == f"elephant.{key}" and bounds in err.reason


def test_merge_flows_table_size_matches_the_compiled_pipeline():
    from finsy.proto import p4i
    from google.protobuf import text_format

    from jumbogate.config import MERGE_FLOWS_TABLE_SIZE
    from jumbogate.p4 import names

    p4info = p4i.P4Info()
    path = Path(__file__).resolve().parents[2] / "p4src" / "compiled" / "depth256" / "jumbogate.p4info.txtpb"
    text_format.Parse(path.read_text(), p4info)
    (table,) = [t for t in p4info.tables if t.preamble.name.endswith("." + names.MERGE_FLOWS)]
    assert table.size == MERGE_FLOWS_TABLE_SIZE


def test_an_epoch_the_switch_does_not_run_is_refused_with_the_reason():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["elephant"]["epoch_ms"] = 100
    with pytest.raises(ConfigError) as info:
        parse_config(raw, "rack.yaml")
    assert info.value.field == "elephant.epoch_ms" and "fixed when the P4 program is compiled: 1049 ms" in info.value.reason
    raw["elephant"]["epoch_ms"] = 1049
    assert parse_config(raw).elephant.epoch_ms == 1049


def test_smartnic_internal_prefixes_are_checked():
    raw = yaml.safe_load(EXAMPLE.read_text())
    assert parse_config(raw).smartnic_internal_prefixes == (), "absent: the SmartNIC keeps its start-up prefixes"
    raw["smartnic"]["internal_prefixes"] = ["10.10.0.0/24", "fd00:10::/64"]
    assert [str(p) for p in parse_config(raw).smartnic_internal_prefixes] == ["10.10.0.0/24", "fd00:10::/64"]
    raw["smartnic"]["internal_prefixes"] = ["10.10.0.1/24"]
    with pytest.raises(ConfigError, match=r"smartnic.internal_prefixes\[0\]"):
        parse_config(raw)
    raw["smartnic"]["internal_prefixes"] = [f"10.{i}.0.0/16" for i in range(65)]
    with pytest.raises(ConfigError, match="at most 64"):
        parse_config(raw)


def write_tls_files(directory: Path) -> None:
    for name in ("ca.pem", "controller.pem", "controller.key"):
        (directory / name).write_text("PEM\n")


def with_tls(raw: dict, **roles) -> dict:
    raw["tls"] = {"ca": "ca.pem", "cert": "controller.pem", "key": "controller.key", "roles": roles or {"admin": ["ops"], "read_only": ["grafana"]}}
    return raw


def test_tls_paths_are_taken_from_the_config_files_directory(raw, tmp_path):
    write_tls_files(tmp_path)
    path = tmp_path / "rack.yaml"
    path.write_text(yaml.safe_dump(with_tls(raw)))
    tls = load_config(path).tls
    assert tls.ca == tmp_path / "ca.pem" and tls.key == tmp_path / "controller.key"
    assert tls.admins == {"ops"} and tls.read_only == {"grafana"}
    assert load_config(EXAMPLE).tls is None and load_config(EXAMPLE).controller_insecure is False


@pytest.mark.parametrize(
    ("roles", "field", "reason"),
    [
        ({"read_only": ["grafana"]}, "tls.roles.admin", ""),
        ({"admin": []}, "tls.roles.admin", "lists no certificate name"),
        ({"admin": ["ops"], "read_only": ["ops"]}, "tls.roles", "ops listed as both admin and read_only"),
        ({"admin": ["ops"], "writer": ["x"]}, "tls.roles.writer", ""),
    ],
)
def test_tls_roles_that_cannot_work_are_refused(raw, tmp_path, roles, field, reason):
    write_tls_files(tmp_path)
    with pytest.raises(ConfigError) as info:
        parse_config(with_tls(raw, **roles), "rack.yaml", tmp_path)
    assert info.value.field == field and reason in str(info.value)


def test_a_tls_file_that_is_not_there_is_named(raw, tmp_path):
    with pytest.raises(ConfigError) as info:
        parse_config(with_tls(raw), "rack.yaml", tmp_path)
    assert info.value.field == "tls.ca" and f"{tmp_path / 'ca.pem'} is not a readable file" in str(info.value)


def test_a_relative_pipeline_is_taken_from_the_config_files_directory_not_the_working_one(tmp_path, monkeypatch):
    """As tls.* are: under systemd the working directory is not the checkout's, and the controller failed to start."""
    from jumbogate.config import load_config

    etc = tmp_path / "etc" / "jumbogate"
    etc.mkdir(parents=True)
    (etc / "rack.yaml").write_text("switch:\n  pipeline: pipeline/depth512\n  ports: [{port: 1, role: external}]\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(etc / "rack.yaml").switch.pipeline == str(etc / "pipeline" / "depth512")
    (etc / "absolute.yaml").write_text("switch:\n  pipeline: /srv/pipeline\n  ports: [{port: 1, role: external}]\n")
    assert load_config(etc / "absolute.yaml").switch.pipeline == "/srv/pipeline"
    # The example's pipeline is the repository's compile, from wherever the controller starts.
    monkeypatch.chdir("/")
    assert Path(load_config(EXAMPLE).switch.pipeline).resolve() == (EXAMPLE.parents[1] / "p4src" / "compiled" / "depth512").resolve()
