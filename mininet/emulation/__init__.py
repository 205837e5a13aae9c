"""The emulated rack: Mininet hosts and routers, BMv2, the SmartNIC program and the controller on one machine."""
