"""The docs checked against the code: every RPC of proto/jumbogate/v1 and every
jumbogatectl command is documented, and the exit codes the docs list are the
ones --help lists. (Metric names: test_metrics.py, against a real scrape.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from jumbogate import cli
from jumbogate.tls import READING_METHODS

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PROTOS = sorted((REPO / "proto" / "jumbogate" / "v1").glob("*.proto"))
RPC = re.compile(r"^\s*rpc\s+(\w+)\s*\(", re.M)
SERVICE = re.compile(r"^service\s+(\w+)\s*\{(.*?)^\}", re.M | re.S)


def docs_text() -> str:
    return "\n".join(doc.read_text() for doc in sorted(DOCS.glob("*.md")))


def rpcs() -> list[tuple[str, str]]:
    """(Service, Method) of every RPC the project's protos declare."""
    found = []
    for proto in PROTOS:
        for service, body in SERVICE.findall(proto.read_text()):
            found += [(service, method) for method in RPC.findall(body)]
    return found


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of a parser with subcommands: ('fleet', 'show'), ('status',), ..."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                below = commands(sub, (*prefix, name))
                found += below or [(*prefix, name)]
    return found


def test_the_parsers_are_read_whole():
    found = commands(cli.build_parser())
    assert ("fleet", "show") in found and ("status",) in found and ("nic", "flows") in found and ("config", "validate") in found
    assert len(rpcs()) >= 30 and ("Policy", "ReloadConfig") in rpcs() and ("Nic", "GetInfo") in rpcs()


@pytest.mark.parametrize("service, method", rpcs(), ids=lambda value: value)
def test_every_rpc_is_documented(service, method):
    assert f"`{method}`" in docs_text(), f"{service}.{method} ({', '.join(p.name for p in PROTOS)}) is named nowhere in docs/ (as `{method}`)"


def synopsis() -> str:
    """jumbogatectl's synopsis block in docs/controller.md."""
    text = (DOCS / "controller.md").read_text()
    section = text.split("\n## jumbogatectl\n", 1)[1]
    return section.split("```", 2)[1]


@pytest.mark.parametrize("command", commands(cli.build_parser()), ids=" ".join)
def test_every_cli_command_is_in_the_synopsis_and_described(command):
    words = r"\s+".join(map(re.escape, command))
    if len(command) == 1:
        assert re.search(rf"^\s+{words}\b", synopsis(), re.M), f"docs/controller.md's synopsis lacks `{' '.join(command)}`"
    else:
        assert re.search(rf"(^|\|)\s*{words}\b", synopsis(), re.M), f"docs/controller.md's synopsis lacks `{' '.join(command)}`"
    # And its row in the table of commands, RPCs and roles.
    assert f"`{' '.join(command)}" in (DOCS / "controller.md").read_text(), f"docs/controller.md does not describe `{' '.join(command)}`"


def test_the_exit_codes_the_docs_list_are_the_ones_help_lists():
    documented = dict(re.findall(r"^\| (\d) \| (.+) \|$", (DOCS / "controller.md").read_text(), re.M))
    helped = dict(re.findall(r"^  (\d)  (.+)$", cli.EXIT_CODES, re.M))
    assert sorted(documented) == sorted(helped) == [str(code) for code in range(8)]
    constants = [cli.EXIT_OK, cli.EXIT_REFUSED, cli.EXIT_USAGE, cli.EXIT_NOT_FOUND, cli.EXIT_UNREACHABLE, cli.EXIT_ERROR, cli.EXIT_DENIED, cli.EXIT_CONFLICT]
    assert constants == list(range(8))


def test_the_roles_the_docs_give_are_the_ones_the_controller_enforces():
    """controller.md's table of commands (RPC and role) and the read-only lists of controller.md and security.md follow tls.READING_METHODS."""
    controller = (DOCS / "controller.md").read_text()
    rows = re.findall(r"^\| `[^|]*\| ((?:`\w+`(?:, )?)+) \| (read-only|admin) \|$", controller, re.M)
    assert len(rows) >= 10, "the table of commands, RPCs and roles is gone"
    for methods, role in rows:
        for method in re.findall(r"`(\w+)`", methods):
            assert (method in READING_METHODS) == (role == "read-only"), f"controller.md gives {method} the {role} role"
    tls_section = controller.split("\n## TLS and roles\n", 1)[1].split("\n## ", 1)[0]
    read_only = tls_section.split("`tls.roles.read_only` may call", 1)[1].split("(`tls.READING_METHODS`)", 1)[0]
    assert set(re.findall(r"`(\w+)`", read_only)) == READING_METHODS
    security = (DOCS / "security.md").read_text()
    listed = security.split("default deny: only the listed reads (", 1)[1].split("; `tls.READING_METHODS`)", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == READING_METHODS
