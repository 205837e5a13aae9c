"""Names of the jumbogate P4 objects, as they appear in the P4Info.

These are P4Info aliases (the shortest unique suffix of each full name), which
finsy accepts wherever it takes a name. controlplane/tests/test_p4_names.py
checks each one against a compiled P4Info when one is present.
"""

# Tables (who writes them: the controller; see docs/dataplane.md).
PORT_ROLES = "port_roles"
DEPTH_POLICY = "depth_policy"
NIC_PORT = "nic_port"
FLEET_POLICY = "fleet_policy"
INSTANCES_V4 = "instances_v4"
INSTANCES_V6 = "instances_v6"
PATH_MTU_V4 = "path_mtu_v4"
PATH_MTU_V6 = "path_mtu_v6"
MERGE_FLOWS = "merge_flows"
MERGE_SERVICES = "merge_services"
ELEPHANT_CONFIG = "elephant_config"
ROUTES_V4 = "routes_v4"
ROUTES_V6 = "routes_v6"
NEXT_HOPS = "next_hops"
SIGNAL_SOURCE = "signal_source"

# Actions.
SET_PORT_ROLE = "set_port_role"
DROP_TOO_DEEP = "drop_too_deep"
FORWARD_TOO_DEEP = "forward_too_deep"
SET_NIC_PORT = "set_nic_port"
NO_NIC_PORT = "no_nic_port"
SET_FLEET_JUMBO = "set_fleet_jumbo"
SET_INSTANCE_JUMBO = "set_instance_jumbo"
SET_PATH_MTU = "set_path_mtu"
STEER_MERGE_FLOW = "steer_merge_flow"
STEER_MERGE_SERVICE = "steer_merge_service"
SET_ELEPHANT_THRESHOLD = "set_elephant_threshold"
SET_NEXT_HOP_GROUP = "set_next_hop_group"
SET_NEXT_HOP = "set_next_hop"
SET_SIGNAL_SOURCE = "set_signal_source"
SIGNAL_FROM_ORIGINAL_DESTINATION = "signal_from_original_destination"

# Action profiles.
ECMP_SELECTOR = "ecmp_selector"

# Indirect counters.
PORT_RX = "port_rx"
PORT_TX = "port_tx"
DROP_REASONS = "drop_reasons"
PATHS = "paths"
ICMP_SIGNALS = "icmp_signals"
COUNTERS = (PORT_RX, PORT_TX, DROP_REASONS, PATHS, ICMP_SIGNALS)

# Meters.
ICMP_SIGNAL_METER = "icmp_signal_meter"
ICMP_SOURCE_METER = "icmp_source_meter"

# Digests.
ELEPHANT_DIGEST = "elephant_digest_t"

TABLES = (
    PORT_ROLES,
    DEPTH_POLICY,
    NIC_PORT,
    FLEET_POLICY,
    INSTANCES_V4,
    INSTANCES_V6,
    PATH_MTU_V4,
    PATH_MTU_V6,
    MERGE_FLOWS,
    MERGE_SERVICES,
    ELEPHANT_CONFIG,
    ROUTES_V4,
    ROUTES_V6,
    NEXT_HOPS,
    SIGNAL_SOURCE,
)
ACTIONS = (
    SET_PORT_ROLE,
    DROP_TOO_DEEP,
    FORWARD_TOO_DEEP,
    SET_NIC_PORT,
    NO_NIC_PORT,
    SET_FLEET_JUMBO,
    SET_INSTANCE_JUMBO,
    SET_PATH_MTU,
    STEER_MERGE_FLOW,
    STEER_MERGE_SERVICE,
    SET_ELEPHANT_THRESHOLD,
    SET_NEXT_HOP_GROUP,
    SET_NEXT_HOP,
    SET_SIGNAL_SOURCE,
    SIGNAL_FROM_ORIGINAL_DESTINATION,
)
