"""make deb's packages, installed into a fresh Debian 12 root and started from there.

One module-wide fixture does what an operator does on a new machine: debootstrap a minimal bookworm, apt-get install
the three packages (their dependencies come from Debian), then edit only the lines the shipped configs say to edit.
The programs are started the way systemd starts them: the command line of each installed unit, with its
EnvironmentFile, inside the root (chroot) and in a network namespace of the test's, with NOTIFY_SOCKET pointing at
a socket of the test's so that READY=1 is seen as systemd would see it. The smoke: the controller, from the shipped
rack.yaml, programs the switch; a frame from an uplink reaches the instance's port rewritten as that rack.yaml
routes it; jumbogatectl answers from the installed path.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from testlab.lab import Process, netns, quiet_interface, sh, wait_until
from testlab.nic_harness import unique

REPO = Path(__file__).resolve().parents[2]
SUITE = "package install"
UNITS = ("jumbogate-switch", "jumbogate-nic", "jumbogate-controller")
PACKAGES = UNITS
SUITE_TIMEOUT = 900


def missing_tools() -> list[str]:
    return [tool for tool in ("debootstrap", "dpkg-deb", "dpkg-shlibdeps", "systemd-analyze", "chroot", "unshare") if shutil.which(tool) is None]


def pytest_skip_line(request, why: str) -> None:
    """One loud line per run, past pytest's capture, then skip."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter and capture:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"SKIPPED: the {SUITE} tests; {why}", yellow=True, bold=True)
    pytest.skip(why)


def run(*command: str, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    if done.returncode != 0:
        raise AssertionError(f"{shlex.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def debian_mirror() -> str:
    """The machine's own Debian mirror (its apt sources), so the root comes from where its packages come from."""
    for source in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        with contextlib.suppress(OSError):
            for uri in re.findall(r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(\S+/debian)/?\s", source.read_text() + "\n", re.M):
                return uri
    return "http://deb.debian.org/debian"


@pytest.fixture(scope="module")
def debs(request) -> list[Path]:
    missing = missing_tools()
    if missing:
        pytest_skip_line(request, f"missing: {', '.join(missing)} (make setup installs them: debootstrap, dpkg-dev, systemd)")
    run("make", "--no-print-directory", "deb", cwd=REPO, timeout=SUITE_TIMEOUT)
    built = sorted((REPO / "build" / "deb").glob("*.deb"))
    assert {p.name.split("_")[0] for p in built} == set(PACKAGES), built
    return built


# Runs a command inside the root with /proc, /sys and /dev bound in, in a mount namespace of its own with private
# propagation: the binds vanish with the command and never reach the machine's mount table. (Bound from the
# machine's namespace, under its shared mounts, /dev's submounts came back as second mounts of /dev/shm and
# /dev/pts on the machine itself, which DPDK programs started later then met.)
IN_ROOT = 'r="$1"; shift; mount --bind /proc "$r/proc" && mount --bind /sys "$r/sys" && mount --rbind /dev "$r/dev" && exec chroot "$r" "$@"'


def in_root(root: Path, *command: str) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_ROOT, "sh", str(root), *command]


def machine_mounts() -> list[str]:
    """The machine's mounts of /dev and below (where binds into a root came back to it), and any inside a root this
    suite made; not the rest, which other tests' namespaces and the machine change meanwhile."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return sorted(p for p in points if p == "/dev" or p.startswith("/dev/") or "/debian12" in p)


@pytest.fixture(scope="module")
def mounts_before() -> list[str]:
    return machine_mounts()


@pytest.fixture(scope="module")
def root(debs, mounts_before, tmp_path_factory) -> Path:
    """A fresh bookworm with the packages installed."""
    root = tmp_path_factory.mktemp("debian12") / "root"
    # systemd is what every Debian 12 server runs (the units' target); minbase leaves it out.
    run("debootstrap", "--variant=minbase", "--include=systemd", "bookworm", str(root), debian_mirror(), timeout=SUITE_TIMEOUT)
    shutil.copyfile("/etc/resolv.conf", root / "etc" / "resolv.conf")
    (root / "tmp" / "debs").mkdir(parents=True)
    for deb in debs:
        shutil.copy(deb, root / "tmp" / "debs")
    run(*in_root(root, "apt-get", "update", "-q"))
    installed = run(
        *in_root(
            root,
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            *(f"/tmp/debs/{deb.name}" for deb in debs),
        )
    )
    print(installed.stdout.splitlines()[-1] if installed.stdout else "")
    return root


def unit_text(root: Path, name: str) -> str:
    return (root / "lib" / "systemd" / "system" / f"{name}.service").read_text()


def environment_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd reads an EnvironmentFile (comments, blank lines, quoted values)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = " ".join(shlex.split(value))
    return values


def exec_start(root: Path, name: str) -> list[str]:
    """The unit's ExecStart as systemd expands it: $VAR splits into words, ${VAR} stays one."""
    text = unit_text(root, name)
    env: dict[str, str] = {}
    for assignment in re.findall(r"^Environment=(.*)$", text, re.M):
        key, _, value = assignment.partition("=")
        env[key] = value
    for path in re.findall(r"^EnvironmentFile=-?(.*)$", text, re.M):
        if (root / path.lstrip("/")).exists():
            env.update(environment_file(root / path.lstrip("/")))
    (command,) = re.findall(r"^ExecStart=(.*)$", text, re.M)
    words = []
    for word in shlex.split(command):
        variable = re.fullmatch(r"\$(\w+)", word)
        if variable:
            words += env.get(variable.group(1), "").split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def edit(path: Path, pattern: str, replacement: str) -> None:
    """An operator's edit of a shipped config: exactly one line changes."""
    text, count = re.subn(pattern, replacement, path.read_text(), flags=re.M)
    assert count == 1, f"{path}: {pattern!r} matched {count} lines"
    path.write_text(text)


class NotifySocket:
    """What systemd listens on for a Type=notify unit: a datagram socket; here inside the root, named as the
    program sees it."""

    def __init__(self, root: Path, name: str):
        self.inside = f"/run/{name}.notify"
        self.path = root / self.inside.lstrip("/")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.2)
        self.states: list[str] = []

    def received(self) -> list[str]:
        with contextlib.suppress(TimeoutError):
            while True:
                self.states.append(self.sock.recv(4096).decode())
        return self.states

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def started(root, tmp_path_factory):
    """The three programs running from the root in one namespace; the notify sockets and logs by unit name."""
    logs = tmp_path_factory.mktemp("logs")
    ns_cm = netns(unique("jgdeb"))
    ns = ns_cm.__enter__()
    processes: dict[str, Process] = {}
    sockets: dict[str, NotifySocket] = {}
    try:
        # The switch's uplink (1), the instance's sled (3) and the SmartNIC's port (5) of the shipped rack.yaml,
        # under the interface names the shipped switch.env uses; their peers are the test's.
        for port in (1, 3, 5):
            sh("ip", "link", "add", f"eth{port}", "type", "veth", "peer", "name", f"peer{port}", netns=ns)
            for dev in (f"eth{port}", f"peer{port}"):
                quiet_interface(dev, 9500, netns=ns)
        # The lines the shipped configs say to edit for this machine (no hugepages here, and its interfaces).
        etc = root / "etc" / "jumbogate"
        edit(etc / "switch.env", r"^EAL=.*$", 'EAL="-l 0-1 --file-prefix jumbogate-switch --no-huge -m 1024 --no-pci"')
        edit(etc / "switch.env", r"^PORTS=.*$", 'PORTS="--port 1@eth1 --port 3@eth3 --port 5@eth5"')
        edit(etc / "nic.conf", r"^eal = .*$", "eal = -l 0-1 --file-prefix jumbogate-nic --no-huge -m 512 --no-pci --vdev net_af_packet0,iface=peer5")
        for name in UNITS:
            sockets[name] = NotifySocket(root, name)
            command = ["env", f"NOTIFY_SOCKET={sockets[name].inside}", *in_root(root, *exec_start(root, name))]
            processes[name] = Process(command, logs / f"{name}.log", netns=ns).start()
            wait_until(
                lambda name=name: any("READY=1" in s for s in sockets[name].received()) or not processes[name].running,
                f"{name} to send READY=1",
                60,
            )
            assert processes[name].running, f"{name} exited:\n{processes[name].output()[-3000:]}"
        yield ns, processes, sockets
    finally:
        for process in reversed(list(processes.values())):
            process.stop()
        for notify in sockets.values():
            notify.close()
        ns_cm.__exit__(None, None, None)


def test_every_package_installs_with_its_dependencies_from_debian(root):
    for package in PACKAGES:
        status = run(*in_root(root, "dpkg-query", "-W", "-f=${Status} ${Version}", package)).stdout
        assert status.startswith("install ok installed"), (package, status)
    for program in ("/usr/sbin/jumbogate-switch", "/usr/sbin/jumbogate-nic"):
        assert "--version" in run(*in_root(root, program, "--help")).stdout
    assert run(*in_root(root, "jumbogatectl", "--version")).stdout.startswith("jumbogatectl ")
    # Conffiles: an upgrade asks before replacing an operator's edits.
    conffiles = run(*in_root(root, "dpkg-query", "-W", "-f=${Conffiles}\n", *PACKAGES)).stdout
    for path in ("/etc/jumbogate/switch.env", "/etc/jumbogate/nic.conf", "/etc/jumbogate/rack.yaml"):
        assert path in conffiles


def test_every_unit_passes_systemd_analyze_verify(root):
    units = [f"/lib/systemd/system/{name}.service" for name in UNITS]
    done = subprocess.run(["systemd-analyze", "verify", f"--root={root}", *units], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not done.stderr.strip(), done.stdout + done.stderr
    for name in UNITS:
        assert re.search(r"^Type=notify$", unit_text(root, name), re.M)
        exposure = subprocess.run(
            ["systemd-analyze", "security", "--offline=true", f"--root={root}", f"{name}.service"], capture_output=True, text=True, timeout=120
        )
        level = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", exposure.stdout)
        assert level, exposure.stdout + exposure.stderr
        print(f"{name}: systemd-analyze security exposure {level.group(1)} {level.group(2)}")
        # The hardening options hold: nothing is left at systemd's defaults ("UNSAFE", 9.6).
        assert float(level.group(1)) < 7.0, exposure.stdout


def test_the_shipped_rack_yaml_validates_and_names_the_packaged_p4(root):
    done = run(*in_root(root, "jumbogatectl", "config", "validate", "/etc/jumbogate/rack.yaml"))
    assert "valid" in done.stdout.lower(), done.stdout
    assert "pipeline: /usr/share/jumbogate/p4/depth512" in (root / "etc" / "jumbogate" / "rack.yaml").read_text()


def test_the_controller_unit_reads_its_tls_key_through_a_group_the_package_made(root):
    """The unit's user is made for each start and was in no group: a key readable by root alone
    stopped the controller, and the only key that worked was readable by everyone."""
    assert run(*in_root(root, "getent", "group", "jumbogate")).stdout.startswith("jumbogate:")
    unit = (root / "lib" / "systemd" / "system" / "jumbogate-controller.service").read_text()
    assert "SupplementaryGroups=jumbogate" in unit and "RestartPreventExitStatus=2" in unit


def test_the_programs_start_from_their_units_and_say_ready(started):
    _, processes, sockets = started
    for name in UNITS:
        (ready,) = [s for s in sockets[name].received() if "READY=1" in s]
        assert "STATUS=" in ready, ready
        assert processes[name].running


def test_a_frame_crosses_the_installed_switch_as_the_shipped_rack_routes_it(root, started):
    """rack.yaml routes 10.10.0.10/32 to port 3 with MACs of its own: what arrives on the uplink leaves there."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    ns, processes, _ = started
    wait_until(
        lambda: all(
            said in subprocess.run(["ip", "netns", "exec", ns, *in_root(root, "jumbogatectl", "status")], capture_output=True, text=True).stdout
            for said in ("programmed by this controller", "smartnic  127.0.0.1:50061: up")
        ),
        "jumbogatectl status to say the switch is programmed and the SmartNIC up",
        60,
    )
    frame = bytes(Ether(src="02:00:00:00:a0:01", dst="02:00:00:00:01:01") / IP(src="192.0.2.7", dst="10.10.0.10") / UDP(sport=4000, dport=5000) / (b"x" * 64))
    receiver = subprocess.Popen(["ip", "netns", "exec", ns, str(REPO / ".venv" / "bin" / "python"), "-c", RECEIVE, "peer3"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        sh(str(REPO / ".venv" / "bin" / "python"), "-c", SEND, "peer1", frame.hex(), netns=ns)
        out, _ = receiver.communicate(timeout=20)
    finally:
        receiver.kill()
    got = bytes.fromhex(out.strip()) if out.strip() else b""
    assert got, f"nothing left port 3; switch log:\n{processes['jumbogate-switch'].output()[-2000:]}"
    assert got[0:6] == bytes.fromhex("02000000 0a0a".replace(" ", "")) and got[6:12] == bytes.fromhex("020000000103")
    assert got[14 + 16 : 14 + 20] == bytes([10, 10, 0, 10])


def test_a_stop_says_stopping(started):
    _, processes, sockets = started
    name = "jumbogate-nic"
    processes[name].stop()
    assert any("STOPPING=1" in s for s in sockets[name].received())


# Raw frames on the peers: the packet socket, as a host's NIC would see them.
SEND = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
s.send(bytes.fromhex(sys.argv[2]))
"""
RECEIVE = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((sys.argv[1], 0))
s.settimeout(15)
deadline = time.monotonic() + 15
while time.monotonic() < deadline:
    frame = s.recv(65535)
    if frame[12:14] == b"\\x08\\x00" and frame[30:34] == bytes([10, 10, 0, 10]):
        print(frame.hex())
        break
"""


def test_the_machines_mount_table_is_left_as_it_was(started, mounts_before):
    """Installing and running in the root mounted nothing the machine keeps (run last, with the programs up)."""
    assert machine_mounts() == mounts_before


def test_a_removed_controller_is_masked_and_a_purged_one_leaves_nothing(root, started):
    """Removed, the enable link pointed at a unit file that was gone; purged, the unit's state stayed (run last)."""
    state = root / "var" / "lib" / "private" / "jumbogate" / "controller"
    state.mkdir(parents=True, exist_ok=True)
    (state / "left").write_text("state of the unit\n")
    mask = root / "etc" / "systemd" / "system" / "jumbogate-controller.service"
    run(*in_root(root, "dpkg", "--remove", "jumbogate-controller"))
    assert mask.is_symlink() and str(mask.readlink()) == "/dev/null"
    run(*in_root(root, "dpkg", "--purge", "jumbogate-controller"))
    assert not mask.is_symlink() and not state.exists()
