"""TLS for the emulated rack (`make run TLS=1`): a throwaway CA and the certificates of every part.

The CA and certificates are made afresh at every start in build/emulation/pki
(jumbogate.pki; good for a day). The switch and the SmartNIC serve mutual TLS
with their own certificates and take calls from the controller's only
(--tls-allow controller); the controller presents its certificate to both
and serves the operator API and metrics over mutual TLS; jumbogatectl
connects as `admin` (tls.roles.admin) or `viewer` (tls.roles.read_only),
neither of which the switch or the SmartNIC answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from jumbogate.pki import Pki, make_pki
from testlab.lab import ServerTls

from . import plan, procs

PKI_DIR = procs.STATE_DIR / "pki"
ADMIN, VIEWER = "admin", "viewer"


@dataclass
class RackTls:
    pki: Pki

    @classmethod
    def make(cls) -> RackTls:
        loopback = plan.P4RUNTIME_ADDRESS.rpartition(":")[0]
        holders = {"controller": [loopback], "switch": [loopback], "smartnic": [plan.MGMT_NIC.ip4], ADMIN: [], VIEWER: []}
        return cls(make_pki(PKI_DIR, holders, clients={"controller", ADMIN, VIEWER}))

    def server(self, holder: str) -> ServerTls:
        identity = self.pki[holder]
        return ServerTls(identity.cert, identity.key, self.pki.ca, allow=("controller",))

    def config_section(self) -> dict:
        """rack.yaml's tls section for the controller."""
        controller = self.pki["controller"]
        return {"ca": str(self.pki.ca), "cert": str(controller.cert), "key": str(controller.key), "roles": {"admin": [ADMIN], "read_only": [VIEWER]}}

    def credentials(self, holder: str = "controller") -> grpc.ChannelCredentials:
        identity = self.pki[holder]
        return grpc.ssl_channel_credentials(self.pki.ca.read_bytes(), identity.key.read_bytes(), identity.cert.read_bytes())

    def ctl_args(self, holder: str = ADMIN) -> list[str]:
        identity = self.pki[holder]
        return ["--tls-ca", str(self.pki.ca), "--tls-cert", str(identity.cert), "--tls-key", str(identity.key)]
