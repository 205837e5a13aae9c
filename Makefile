# jumbogate: the two commands are `make setup` and `make test` (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV       := .venv
PY         := $(VENV)/bin/python
BUILD      := build
# The compiled pipeline is committed, so that machines without p4c have it
# (jumbogate-switch, the controller, the PTF suite); `make p4` refreshes it.
P4_OUT     := p4src/compiled
# One build of every C program (meson.build at the top): the SmartNIC's
# engine and jumbogate-nic, the runtime, and jumbogate-switch.
NATIVE_BUILD := $(BUILD)/native
PROFILES   := 256 512
PROTO_SRC  := $(wildcard proto/jumbogate/v1/*.proto)
PROTO_OUT  := controlplane/src/jumbogate/v1
TRACE      ?=
# The emulation's switch target: soft (jumbogate-switch, the default) or bmv2.
export SWITCH
# TLS=1: the emulation runs every control channel over mutual TLS, with a
# throwaway CA made at start (mininet/emulation/tls.py).
export TLS
# TOPO=two-racks: make run brings up two racks across a small WAN instead
# (path MTU discovery between borders, docs/pathmtu.md); TOPO=fleet: three
# racks, two controllers each, on a three-member etcd (docs/fleet.md).
export TOPO
comma      := ,
space      := $(subst ,, )

.PHONY: help setup test test-python test-c test-ptf sanitized lint proto native smartnic switch p4 p4testgen p4-tofino bench bench-queues fleet-scale fleet-chaos value value-wan wheel deb run stop demo attack soak clean

help:
	@echo "make setup   install Debian/PyPI dependencies, generate protos, build the SmartNIC (and P4 when p4c is present)"
	@echo "make test    run every test: Python, C, PTF on jumbogate-switch (and BMv2), SmartNIC integration, emulation"
	@echo "make p4      recompile the P4 program (needs p4c) into $(P4_OUT)/depth{256,512}, which is committed"
	@echo "make p4testgen  regenerate the P4Testgen corpus (needs p4testgen) into ptf-tests/p4testgen/, which is committed"
	@echo "make p4-tofino  compile the TNA top level with bf-p4c for Tofino 1 and 2, both profiles, into build/p4/ (resources.md and the pipeline_config.pb blob each)"
	@echo "make sanitized  the engine's C suites and jumbogate-nic's integration tests on an ASan+UBSan build (part of make test)"
	@echo "make bench   benchmark the SmartNIC engine against DPDK GRO (TRACE=capture.pcap to replay a capture)"
	@echo "make bench-queues  jumbogate-nic --queue-scaling under a step in load: workers serving the queues over time (root; build/bench/queues)"
	@echo "make fleet-scale  the fleet's store at scale: RACKS (1000) racks, INSTANCES (100000) instances, one watcher per rack, FLIPS (100) flag flips, against one etcd"
	@echo "make lint    ruff, clang-format check, no P4 name or value typed in Python, C or C++, P4 warnings as errors"
	@echo "make run     bring up the emulated rack (Mininet + switch + SmartNIC + controller; SWITCH=soft|bmv2, TLS=1; TOPO=two-racks: two racks across a WAN; TOPO=fleet: three racks on one etcd cluster); make stop tears it down"
	@echo "make demo    scripted demo with report and plots"
	@echo "make attack  cheap attacks on the border's state through the emulated rack, with legitimate traffic alongside; report per attack"
	@echo "make soak    the emulated rack under chaos for SOAK_MINUTES (default 10): kills, flag flips, floods; nothing may be lost"
	@echo "make wheel   the controller's Python package as a wheel (generated stubs inside) in build/wheel/"
	@echo "make deb     Debian packages of jumbogate-switch, jumbogate-nic and jumbogate-controller in build/deb/ (docs/deploy.md)"
	@echo "make value   what the border buys its users, measured: path MTU discovery next to Scamper on the two-rack emulation (docs/performance.md)"
	@echo "make value-wan  one TCP flow across a 10 ms, 0.01%-loss WAN (jumbogate-wanlink) from a rack with the border and from a plain 1500 rack, both ways, beside the paper's 123 -> 303 Mbit/s (docs/performance.md)"
	@echo "make fleet-chaos  three racks on etcd under faults for FLEET_CHAOS_MINUTES (default 5): leaders killed, paused, cut off; etcd's quorum lost; every API call's history checked"
	@echo "make clean   remove build outputs"

setup:
	@bash scripts/setup.sh

test:
	@bash scripts/test.sh

# Python stubs are generated, never committed: they must match the protobuf
# runtime the lock file pins. So are the controller's names and constants of
# the P4 program (jumbogate/p4/names.py, defines.py), from the committed
# P4Info and p4src/include: nothing the P4 defines is typed in Python.
P4_PY      := controlplane/src/jumbogate/p4
P4_PY_FROM := $(P4_OUT)/depth512/jumbogate.p4info.txtpb p4src/include/defines.p4 p4src/include/drop_reasons.p4 p4src/tna/signal.p4
proto: $(PROTO_OUT)/.stamp $(P4_PY)/names.py
$(P4_PY)/names.py: $(P4_PY_FROM) $(P4_PY)/generate.py
	@$(PY) $(P4_PY)/generate.py $(P4_PY_FROM) $(P4_PY)
	@echo "proto: generated $(P4_PY)/names.py and defines.py from $(P4_OUT)/depth512's P4Info and p4src/include"
$(PROTO_OUT)/.stamp: $(PROTO_SRC)
	@mkdir -p $(PROTO_OUT)
	@$(PY) -m grpc_tools.protoc -Iproto --python_out=controlplane/src --grpc_python_out=controlplane/src --pyi_out=controlplane/src $(PROTO_SRC)
	@touch $(PROTO_OUT)/__init__.py $@
	@echo "proto: generated Python stubs in $(PROTO_OUT)"

# jumbogate-switch's P4Runtime stubs come from the .proto files the pinned
# finsy ships (one source of truth for the C++ server and the Python client).
P4RT_PROTO = $(shell $(PY) -c 'import finsy, os; print(os.path.join(os.path.dirname(finsy.__file__), "proto"))' 2>/dev/null)
# `make smartnic` and `make switch` build the same, whole tree.
smartnic switch: native
native:
	@[ -n "$(P4RT_PROTO)" ] || { echo "native: finsy is not in .venv; run 'make setup'" >&2; exit 1; }
	@if [ ! -f $(NATIVE_BUILD)/build.ninja ]; then meson setup $(NATIVE_BUILD) . -Dp4runtime_proto=$(P4RT_PROTO) >/dev/null && echo "native: configured $(NATIVE_BUILD)"; \
	elif ! meson introspect --buildoptions $(NATIVE_BUILD) | grep -q '"$(P4RT_PROTO)"'; then meson configure $(NATIVE_BUILD) -Dp4runtime_proto=$(P4RT_PROTO) >/dev/null; fi
	@ninja -C $(NATIVE_BUILD) | tail -n 1
	@echo "native: built in $(NATIVE_BUILD) (jumbogate-nic, jumbogate-switch)"

# Debian packages of the switch, the SmartNIC and the controller (packaging/, docs/deploy.md).
deb: native wheel
	@$(PY) packaging/build_debs.py --native $(NATIVE_BUILD) --wheel $$(ls $(BUILD)/wheel/jumbogate-*.whl) --out $(BUILD)/deb

# The controller's package as a wheel, with the generated modules inside.
wheel: proto
	@$(PY) -m pip wheel --no-deps --no-build-isolation -q -w $(BUILD)/wheel ./controlplane
	@rm -rf controlplane/build
	@echo "wheel: $$(ls $(BUILD)/wheel/jumbogate-*.whl)"

P4_SRC     := $(wildcard p4src/include/*.p4 p4src/v1model/*.p4) p4src/compile.sh p4src/compile-common.sh
P4_JSON    := $(foreach depth,$(PROFILES),$(P4_OUT)/depth$(depth)/jumbogate.json)

# Recompiles a profile only when a P4 source is newer than its output.
p4: $(P4_JSON)
	@echo "p4: $(P4_OUT)/depth{$(subst $(space),$(comma),$(PROFILES))} up to date"
$(P4_OUT)/depth%/jumbogate.json: $(P4_SRC)
	@command -v p4c >/dev/null || { echo "p4: p4c is not on PATH; see README, 'Getting p4c and BMv2' (the committed $(P4_OUT) needs no p4c)" >&2; exit 1; }
	@bash p4src/compile.sh $* $(@D)

# The P4Testgen corpus (ptf-tests/p4testgen/): PTF tests P4Testgen derives
# from the v1model program's paths, committed like the compile above.
p4testgen:
	@bash ptf-tests/p4testgen/generate.sh

# The TNA top level for both chips and both profiles, with bf-p4c; each
# output directory gets resources.md (stages, PHV, memories). Never needed by
# anything else here.
TOFINO_OUT := build/p4
p4-tofino:
	@command -v bf-p4c >/dev/null || { echo "p4-tofino: bf-p4c is not on PATH; see README, 'bf-p4c, the Tofino backend'" >&2; exit 1; }
	@failed=""; for chip in tofino tofino2; do for depth in $(PROFILES); do \
		{ bash p4src/compile-tofino.sh $$chip $$depth $(TOFINO_OUT)/$$chip-depth$$depth && \
		  $(PY) -m jumbogate.tofino pack $(TOFINO_OUT)/$$chip-depth$$depth $$chip; } || failed="$$failed $$chip-depth$$depth"; \
	done; done; \
	if [ -n "$$failed" ]; then echo "p4-tofino: failed:$$failed (each directory's resources.md says how far it got)" >&2; exit 1; fi

bench:
	@bash smartnic/bench/run.sh $(TRACE)

bench-queues:
	@PYTHONPATH=controlplane/src:. $(PY) -m testlab.queue_scaling --out build/bench/queues

RACKS     ?= 1000
INSTANCES ?= 100000
FLIPS     ?= 100
fleet-scale:
	@$(PY) controlplane/bench/fleet_scale.py --racks $(RACKS) --instances $(INSTANCES) --flips $(FLIPS)

sanitized:
	@bash scripts/sanitized.sh c && bash scripts/sanitized.sh nic

lint:
	@$(VENV)/bin/ruff check controlplane mininet ptf-tests smartnic switch testlab examples packaging p4src scripts p4rt-conformance
	@$(VENV)/bin/ruff format --check controlplane mininet ptf-tests smartnic switch testlab examples packaging p4src scripts p4rt-conformance
	@$(PY) scripts/lint_p4_names.py controlplane mininet ptf-tests smartnic switch testlab p4rt-conformance
	@$(PY) scripts/lint_p4_literals.py switch runtime
	@find runtime smartnic switch testlab examples -name '*.[ch]' -o -name '*.cc' -o -name '*.h' | xargs -r clang-format --dry-run --Werror
	@if command -v p4c >/dev/null; then $(MAKE) --no-print-directory p4; else echo "lint: p4c not on PATH, P4 not checked"; fi

run:
	@bash mininet/run.sh

stop:
	@bash mininet/stop.sh

demo:
	@bash mininet/demo.sh

attack:
	@bash mininet/demo.sh --attack

soak:
	@bash mininet/demo.sh --soak

fleet-chaos:
	@bash mininet/demo.sh --fleet-chaos

# What users gain: the emulated racks' part, then the senders over a WAN
# (namespaces only, after the emulation is down: the two would share the CPUs).
value:
	@bash mininet/demo.sh --value
	@$(MAKE) --no-print-directory value-wan

# WAN_ARGS: more options of testlab/wan_value.py (--seconds, --repeats, --loss...).
value-wan:
	@env PYTHONPATH=controlplane/src:. $(PY) -m testlab.wan_value $(WAN_ARGS)

clean:
	rm -rf $(BUILD) results $(PROTO_OUT)
