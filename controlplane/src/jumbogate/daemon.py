"""jumbogate-controller: the long-running controller process."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path

from . import tofino
from .config import ConfigError, RackConfig, load_config
from .fleet import DEFAULT_RACK, StoreValueError
from .store import StoreError, open_store
from .tls import TlsConfig, check_key_pair, listener_refusals


def package_version() -> str:
    """The installed jumbogate package's version (its metadata), or 'unknown' when it runs from a tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jumbogate")
    except PackageNotFoundError:
        return "unknown"


def pipeline_problem(config: RackConfig, pipeline: Path | None) -> tuple[Path | None, str | None]:
    """The pipeline directory the controller would load (--pipeline, else switch.pipeline), and why it cannot, or None."""
    pipeline = pipeline or (Path(config.switch.pipeline) if config.switch.pipeline else None)
    if pipeline is None:
        return None, "no pipeline: pass --pipeline or set switch.pipeline in the config (output of 'make p4')"
    if config.switch.target != "v1model":
        missing = tofino.missing_files(pipeline, config.switch.target)
        if missing:
            return pipeline, f"pipeline file missing for switch.target {config.switch.target}: {', '.join(map(str, missing))} (bf-p4c's output: make p4-tofino)"
        return pipeline, None
    missing = [p for p in (pipeline / "jumbogate.json", pipeline / "jumbogate.p4info.txtpb") if not p.exists()]
    if missing:
        return pipeline, f"pipeline file missing: {', '.join(map(str, missing))} (run 'make p4')"
    return pipeline, None


def start_problems(config: RackConfig, pipeline: Path | None = None, listen: str | None = None) -> list[str]:
    """Everything that would stop a controller from starting with this config, beyond the file's own checks."""
    problems = [why for why in [pipeline_problem(config, pipeline)[1], tls_problem(config)] if why]
    problems += listener_refusals(config.tls, listen or config.controller_listen, config.controller_metrics, config.controller_insecure)
    return problems


def tls_problem(config: RackConfig) -> str | None:
    """Why the operator API's TLS files cannot serve (unreadable by this user, not PEM, a key not the
    certificate's, a certificate not valid now or not the CA's), or None: what the start would find."""
    if config.tls is None:
        return None
    try:
        check_key_pair(config.tls, *config.tls.files())
    except OSError as err:
        return f"the operator API's TLS files cannot be used: cannot read {err.filename}: {err.strerror}"
    except ValueError as err:
        return f"the operator API's TLS files cannot be used: {err}"
    return None


def store_tls(ca: Path | None, cert: Path | None, key: Path | None) -> tuple[TlsConfig | None, str | None]:
    """The store's mutual TLS from --store-ca, --store-cert and --store-key (all three, or none: plaintext), and why
    they cannot be used, or None: files unreadable, not PEM, a key not the certificate's, a certificate not valid
    now or not signed by the CA (the first certificate of --store-ca's file)."""
    given = {"--store-ca": ca, "--store-cert": cert, "--store-key": key}
    if not any(given.values()):
        return None, None
    missing = [flag for flag, path in given.items() if path is None]
    if missing:
        return None, f"mutual TLS to the store needs --store-ca, --store-cert and --store-key together ({', '.join(missing)} missing)"
    tls = TlsConfig(ca, cert, key)
    try:
        check_key_pair(tls, *tls.files())
    except OSError as err:
        return None, f"the store's TLS files cannot be used: cannot read {err.filename}: {err.strerror}"
    except ValueError as err:
        return None, f"the store's TLS files cannot be used: {err}"
    return tls, None


def store_problem(url: str | None, ca: Path | None, cert: Path | None, key: Path | None, server_name: str | None) -> str | None:
    """Why the store options (--store and its TLS) would stop a controller from starting, or None; the store is not contacted."""
    tls, problem = store_tls(ca, cert, key)
    if problem:
        return problem
    try:
        open_store(url, "", tls, server_name)
    except ValueError as err:
        return str(err)
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jumbogate-controller",
        description="Program a jumbogate switch over P4Runtime, drive its SmartNIC, and serve the operator API.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--config", required=True, type=Path, help="rack config (rack.yaml)")
    parser.add_argument("--pipeline", type=Path, help="directory with jumbogate.json and jumbogate.p4info.txtpb (default: switch.pipeline in the config)")
    parser.add_argument("--listen", help="operator API address (default: controller.listen in the config)")
    parser.add_argument(
        "--store",
        help="where the policy lives: etcd://HOST:PORT[,HOST:PORT...] (the config seeds an empty store); "
        "default: this process's memory, seeded from the config (a one-box lab: a restart starts from the file again)",
    )
    parser.add_argument(
        "--store-ca", type=Path, help="CA (PEM) that signed etcd's certificates and --store-cert: with --store-cert and --store-key, mutual TLS to etcd"
    )
    parser.add_argument(
        "--store-cert", type=Path, help="the controller's client certificate for etcd; with etcd's auth on, its common name is the etcd user it acts as"
    )
    parser.add_argument("--store-key", type=Path, help="the key of --store-cert")
    parser.add_argument(
        "--store-server-name",
        help="the name checked in every etcd member's certificate, instead of the endpoint's host; needed over TLS with several endpoints",
    )
    parser.add_argument("--rack", default=DEFAULT_RACK, help="the rack this controller programs, its name in the store (default: %(default)s)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--log-format", default="text", choices=["text", "json"], help="json: one object per line (time, level, logger, message, error) for a log shipper"
    )
    return parser


class JsonLines(logging.Formatter):
    """One JSON object per record: what journald's or a log shipper's JSON parser takes whole."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str, form: str) -> None:
    handler = logging.StreamHandler()
    if form == "json":
        formatter = JsonLines()
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    # finsy logs every reconnect attempt at INFO; keep our own lines readable.
    logging.getLogger("finsy").setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"jumbogate-controller: {err}", file=sys.stderr)
        return 2
    pipeline, problem = pipeline_problem(config, args.pipeline)
    problem = problem or tls_problem(config)
    tls, store_problem = store_tls(args.store_ca, args.store_cert, args.store_key)
    problem = problem or store_problem
    if problem:
        print(f"jumbogate-controller: {problem}", file=sys.stderr)
        return 2

    from .controller import Controller

    try:
        store = open_store(args.store, str(args.config), tls, args.store_server_name)
        controller = Controller(config, pipeline, listen=args.listen, store=store, rack=args.rack)
    except ValueError as err:
        print(f"jumbogate-controller: {err}", file=sys.stderr)
        return 2

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        # SIGHUP: read rack.yaml again and apply it (Controller.reload).
        loop.add_signal_handler(signal.SIGHUP, controller.reload)
        try:
            await controller.run()
        except asyncio.CancelledError:
            logging.getLogger("jumbogate").info("stopping")

    try:
        asyncio.run(run())
    except StoreValueError as err:
        print(f"jumbogate-controller: the store holds a value it cannot use: {err}", file=sys.stderr)
        return 2
    except (OSError, StoreError) as err:
        print(f"jumbogate-controller: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
