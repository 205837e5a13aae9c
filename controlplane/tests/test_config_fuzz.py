"""The config loader on random input: a loaded config or a ConfigError naming file and field, never a traceback.

Two kinds of input: random text (what a damaged file holds), and the
example rack.yaml with one value replaced by a random one or removed (what
an operator's mistake looks like, and what reaches every field's checks).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jumbogate.config import ConfigError, RackConfig, load_config, parse_config

EXAMPLE = Path(__file__).resolve().parents[1] / "rack.example.yaml"
EXAMPLE_DATA = yaml.safe_load(EXAMPLE.read_text())
SOURCE = "fuzzed.yaml"
SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 575, 576, 1280, 1500, 8500, 9000, 9001, 65535, 65536, 2**31, 2**32, 2**63, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        ["", "10.10.0.10", "10.10.0.10/33", "::/0", "fd00::/129", "127.0.0.1:0", "127.0.0.1:70000", "[::1]:50051", "drop", "1-65535", "9-1", "0x10"]
    ),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)


def leaf_paths(node, prefix=()):
    """Every path into the document: mapping keys and list indexes."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaf_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaf_paths(value, (*prefix, index))


PATHS = [p for p in leaf_paths(EXAMPLE_DATA) if p]


def field_name(path) -> str:
    """How the loader names a field: mapping keys joined by dots, list items as [i]."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def check_outcome(load, source: str = SOURCE) -> RackConfig | ConfigError:
    try:
        return load()
    except ConfigError as err:
        assert err.source == source and str(err).startswith(source), f"the error does not name the file: {err}"
        assert err.reason, f"the error gives no reason: {err}"
        return err


@SETTINGS
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_random_text_loads_or_is_refused_by_name(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("cfg") / SOURCE
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    outcome = check_outcome(lambda: load_config(path), str(path))
    assert isinstance(outcome, ConfigError), "random text is never a whole rack config (switch.ports is required)"


@SETTINGS
@given(path=st.sampled_from(PATHS), value=values, remove=st.booleans())
def test_one_wrong_value_is_refused_by_field(path, value, remove):
    data = copy.deepcopy(EXAMPLE_DATA)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    if remove:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    outcome = check_outcome(lambda: parse_config(data, SOURCE))
    if isinstance(outcome, ConfigError) and outcome.field:
        # The field named is the one changed, one that contains it, or one
        # whose check involves it (a cross-field rule such as an MTU order).
        assert outcome.field.split(".")[0].split("[")[0] in {field_name(path[:1]), *_CROSS_FIELD_SECTIONS.get(path[0], ())}, (
            f"changed {field_name(path)}, error names {outcome.field}"
        )


# A change in one section may be caught by a rule that names another.
_CROSS_FIELD_SECTIONS = {
    "mtu": ("path_mtus",),
    "fleet": ("instances",),
    "switch": ("routes",),
}
