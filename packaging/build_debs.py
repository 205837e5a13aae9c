#!/usr/bin/env python3
"""Build jumbogate's Debian packages (make deb).

    build_debs.py --native build/native --wheel build/wheel/jumbogate-X.whl --out build/deb

Three packages, one per machine role (docs/deploy.md, "What runs where"):

- jumbogate-switch: /usr/sbin/jumbogate-switch, its unit, /etc/jumbogate/switch.env;
- jumbogate-nic: /usr/sbin/jumbogate-nic, its unit, /etc/jumbogate/nic.conf;
- jumbogate-controller: the controller and jumbogatectl in a virtualenv of their own under
  /usr/lib/jumbogate/controller (the pinned Python dependencies of requirements.lock, installed with their hashes,
  beside Debian's python3), the compiled P4 under /usr/share/jumbogate/p4, its unit, /etc/jumbogate/rack.yaml.

Each is staged as a tree and packed with dpkg-deb. The C programs' library dependencies come from dpkg-shlibdeps,
so the Depends lines are the ones Debian's own packages would get. Files under /etc are conffiles: an upgrade keeps
an operator's edits.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGING = REPO / "packaging"
MAINTAINER = "jumbogate developers <jumbogate@localhost>"
CONTROLLER_VENV = "/usr/lib/jumbogate/controller"
P4_DIR = "/usr/share/jumbogate/p4"
PROFILES = ("256", "512")
DPDK_PLUGINS = ("librte-bus-pci23", "librte-bus-vdev23", "librte-mempool-ring23", "librte-net-af-packet23")


def run(*command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, **kwargs)


def install(source: Path, stage: Path, target: str, mode: int = 0o644) -> None:
    destination = stage / target.lstrip("/")
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)
    destination.chmod(mode)


def shlib_depends(binaries: list[Path]) -> str:
    """The Depends line dpkg-shlibdeps derives from the binaries' libraries (it needs a debian/control to run in)."""
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "debian").mkdir()
        (Path(scratch) / "debian" / "control").write_text("Source: jumbogate\n\nPackage: jumbogate\nArchitecture: any\n")
        done = run("dpkg-shlibdeps", "-O", *(str(b.resolve()) for b in binaries), cwd=scratch, capture_output=True, text=True)
    match = re.search(r"^shlibs:Depends=(.*)$", done.stdout, re.M)
    if not match:
        raise SystemExit(f"dpkg-shlibdeps gave no dependencies for {binaries}: {done.stdout}{done.stderr}")
    return match.group(1)


def control(stage: Path, package: str, version: str, depends: str, description: str, conffiles: list[str], recommends: str = "") -> None:
    debian = stage / "DEBIAN"
    debian.mkdir(parents=True, exist_ok=True)
    size_kib = sum(f.stat().st_size for f in stage.rglob("*") if f.is_file() and not f.is_symlink()) // 1024
    architecture = run("dpkg", "--print-architecture", capture_output=True, text=True).stdout.strip()
    summary, _, body = description.partition("\n")
    body = "\n".join(f" {line}" if line else " ." for line in body.strip().splitlines())
    (debian / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: {architecture}\nMaintainer: {MAINTAINER}\n"
        f"Installed-Size: {size_kib}\nDepends: {depends}\n" + (f"Recommends: {recommends}\n" if recommends else "") + "Section: net\nPriority: optional\n"
        f"Description: {summary}\n{body}\n"
    )
    (debian / "conffiles").write_text("".join(f"{path}\n" for path in conffiles))


def maintainer_scripts(stage: Path, unit: str, extra_postinst: str = "", extra_prerm: str = "", extra_purge: str = "") -> None:
    """Enable the unit on install, restart it on upgrade, stop it on removal and mask it until purged or installed
    again (so the enable link left behind points at nothing that runs), forget it on purge (what dh_installsystemd
    writes); `extra_purge` runs on purge too."""
    debian = stage / "DEBIAN"
    postinst = f"""#!/bin/sh
set -e
{extra_postinst}if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
    if [ -n "$2" ]; then
        systemctl try-restart {unit} >/dev/null || true
    fi
fi
if [ "$1" = configure ] && command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper unmask {unit} >/dev/null || true
    deb-systemd-helper enable {unit} >/dev/null || true
fi
exit 0
"""
    prerm = f"""#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    systemctl stop {unit} >/dev/null || true
fi
{extra_prerm}exit 0
"""
    postrm = f"""#!/bin/sh
set -e
if [ "$1" = remove ] && command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper mask {unit} >/dev/null || true
fi
if [ "$1" = purge ]; then
    if command -v deb-systemd-helper >/dev/null; then
        deb-systemd-helper purge {unit} >/dev/null || true
        deb-systemd-helper unmask {unit} >/dev/null || true
    fi
{extra_purge}fi
exit 0
"""
    for name, text in (("postinst", postinst), ("prerm", prerm), ("postrm", postrm)):
        (debian / name).write_text(text)
        (debian / name).chmod(0o755)


def docs(stage: Path, package: str, names: list[str]) -> None:
    install(PACKAGING / "copyright", stage, f"/usr/share/doc/{package}/copyright")
    for name in names:
        install(REPO / "docs" / name, stage, f"/usr/share/doc/{package}/{name}")


def pack(stage: Path, out: Path) -> Path:
    package = re.search(r"^Package: (.*)$", (stage / "DEBIAN" / "control").read_text(), re.M).group(1)
    version = re.search(r"^Version: (.*)$", (stage / "DEBIAN" / "control").read_text(), re.M).group(1)
    architecture = re.search(r"^Architecture: (.*)$", (stage / "DEBIAN" / "control").read_text(), re.M).group(1)
    deb = out / f"{package}_{version}_{architecture}.deb"
    run("dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(stage), str(deb), stdout=subprocess.DEVNULL)
    return deb


def c_program(native: Path, stage: Path, version: str, name: str, binary: Path, config: str, doc: str, description: str) -> Path:
    install(native / binary, stage, f"/usr/sbin/{name}", 0o755)
    # The build keeps debug information for the tests' backtraces; the package does not need it.
    run("strip", "--strip-unneeded", str(stage / "usr" / "sbin" / name))
    install(PACKAGING / "systemd" / f"{name}.service", stage, f"/lib/systemd/system/{name}.service")
    install(PACKAGING / "etc" / config, stage, f"/etc/jumbogate/{config}")
    docs(stage, name, [doc])
    # DPDK's drivers are plugins the EAL loads at start, unseen by dpkg-shlibdeps: the buses and the mempool
    # every port needs, and net_af_packet, which --port N@IFACE and the shipped configs use. dpdk brings the
    # drivers of physical NICs.
    depends = ", ".join([shlib_depends([native / binary]), *DPDK_PLUGINS])
    control(stage, name, version, depends, description, [f"/etc/jumbogate/{config}"], recommends="dpdk")
    maintainer_scripts(stage, f"{name}.service")
    return stage


def controller(stage: Path, version: str, wheel: Path) -> Path:
    """A virtualenv built in the stage, then moved to its installed path: its scripts name that path."""
    venv = stage / CONTROLLER_VENV.lstrip("/")
    # Debian's python3, not the checkout's: the package depends on it.
    run("/usr/bin/python3", "-m", "venv", str(venv))
    pip = [str(venv / "bin" / "python3"), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    run(*pip, "--require-hashes", "--no-deps", "-r", str(REPO / "controlplane" / "requirements.lock"))
    run(*pip, "--no-deps", str(wheel))
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            text = script.read_bytes()
            if str(venv).encode() in text:
                script.write_bytes(text.replace(str(venv).encode(), CONTROLLER_VENV.encode()))
    shutil.rmtree(venv / "lib" / "python3.11" / "site-packages" / "pip", ignore_errors=True)
    for tool in ("jumbogate-controller", "jumbogatectl"):
        link = stage / "usr" / "bin" / tool
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(f"{CONTROLLER_VENV}/bin/{tool}")
    for profile in PROFILES:
        for name in ("jumbogate.json", "jumbogate.p4info.txtpb"):
            install(REPO / "p4src" / "compiled" / f"depth{profile}" / name, stage, f"{P4_DIR}/depth{profile}/{name}")
    install(PACKAGING / "systemd" / "jumbogate-controller.service", stage, "/lib/systemd/system/jumbogate-controller.service")
    # The example rack, pointed at the packaged P4: it loads as shipped, and says what each field means.
    rack = (REPO / "controlplane" / "rack.example.yaml").read_text()
    rack, replaced = re.subn(r"^(  pipeline: ).*$", rf"\g<1>{P4_DIR}/depth512", rack, flags=re.M)
    if replaced != 1:
        raise SystemExit("rack.example.yaml has no switch.pipeline line to point at the packaged P4")
    (stage / "etc" / "jumbogate").mkdir(parents=True, exist_ok=True)
    (stage / "etc" / "jumbogate" / "rack.yaml").write_text(rack)
    docs(stage, "jumbogate-controller", ["controller.md", "operations.md", "deploy.md", "fleet.md"])
    python = run("/usr/bin/python3", "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')", capture_output=True, text=True).stdout.strip()
    major, minor = map(int, python.split("."))
    control(
        stage,
        "jumbogate-controller",
        version,
        # procps: kill, which the unit's ExecReload sends SIGHUP with.
        f"python3 (>= {major}.{minor}), python3 (<< {major}.{minor + 1}), procps",
        "jumbogate's controller, operator API and jumbogatectl\n"
        "Programs a jumbogate switch over P4Runtime (jumbogate-switch, BMv2 or a Tofino),\n"
        "drives its SmartNIC, and serves the operator's gRPC API; the policy lives in\n"
        "etcd for a fleet of racks, or in the process for one box.",
        ["/etc/jumbogate/rack.yaml"],
    )
    # Byte-compiled at install, against the installed paths (the stage's would name the build directory).
    maintainer_scripts(
        stage,
        "jumbogate-controller.service",
        extra_postinst=(
            # The unit's SupplementaryGroups: who may read the TLS key besides root.
            'if [ "$1" = configure ] && ! getent group jumbogate >/dev/null; then groupadd --system jumbogate; fi\n'
            f"/usr/bin/python3 -m compileall -q {CONTROLLER_VENV}/lib >/dev/null || true\n"
        ),
        extra_prerm=f"find {CONTROLLER_VENV} -name __pycache__ -type d -prune -exec rm -rf {{}} + || true\n",
        # The unit's StateDirectory (DynamicUser keeps it under /var/lib/private).
        extra_purge="    rm -rf /var/lib/private/jumbogate/controller /var/lib/jumbogate/controller\n",
    )
    return stage


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native", type=Path, required=True, help="the meson build of the C programs (make native)")
    parser.add_argument("--wheel", type=Path, required=True, help="the controller's wheel (make wheel)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    for tool in ("dpkg-deb", "dpkg-shlibdeps"):
        if shutil.which(tool) is None:
            print(f"build_debs: {tool} is not on PATH (Debian's dpkg-dev)", file=sys.stderr)
            return 2
    version = re.search(r"version: '([^']+)'", (REPO / "meson.build").read_text()).group(1)
    if f'version = "{version}"' not in (REPO / "controlplane" / "pyproject.toml").read_text():
        print(f"build_debs: meson.build's version {version} is not controlplane/pyproject.toml's", file=sys.stderr)
        return 2
    # Absolute: the virtualenv's scripts are written with the stage's path, which is then replaced by the installed one.
    args.out = args.out.resolve()
    shutil.rmtree(args.out, ignore_errors=True)
    stages = args.out / "stage"
    built = [
        c_program(
            args.native,
            stages / "switch",
            version,
            "jumbogate-switch",
            Path("switch/jumbogate-switch"),
            "switch.env",
            "switch.md",
            "jumbogate's P4 pipeline in software, served over P4Runtime\n"
            "Runs the jumbogate P4 program (fleet and instance jumbo policy, ICMP signals,\n"
            "ECMP, elephant steering) on DPDK ports and serves P4Runtime to its controller.",
        ),
        c_program(
            args.native,
            stages / "nic",
            version,
            "jumbogate-nic",
            Path("smartnic/app/jumbogate-nic"),
            "nic.conf",
            "smartnic.md",
            "jumbogate's SmartNIC engine on DPDK ports\n"
            "Merges same-flow 1500-byte TCP segments into packets up to the internal MTU,\n"
            "splits outbound packets to the path MTU, and discovers path MTUs between borders.",
        ),
        controller(stages / "controller", version, args.wheel),
    ]
    for stage in built:
        print(f"deb: {pack(stage, args.out)}")
    shutil.rmtree(stages)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(sys.argv[1:]))
