"""`make attack`, short: every attack runs through the emulated rack on
jumbogate-switch and the border holds (legitimate traffic keeps merging,
signals keep flowing), with the counters that show how."""

import json

import pytest
from emulation import attack
from emulation.rack import Parts, missing_prerequisites

pytestmark = [pytest.mark.timeout(600)]


def test_every_attack_is_held(tmp_path, capsys):
    missing = missing_prerequisites(Parts(), "soft")
    if missing:
        pytest.skip("emulation prerequisites missing: " + "; ".join(missing))
    out = tmp_path / "attack"
    code = attack.main(["--seconds", "3", "--rate", "5000", "--switch", "soft", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    results = {r["name"]: r for r in json.loads((out / "attack.json").read_text())}
    assert sorted(results) == sorted(attack.SCENARIOS)
    assert all(r["held"] and not r["failures"] for r in results.values()), printed

    elephants = results["fake-elephants"]["border"]
    assert elephants["dropped ip-length-past-frame"] > 0 and elephants["delivered to the instance"] == 0
    assert elephants["elephants detected"] == 0 and elephants["refused switch writes"] == 0
    flood = results["elephant-flood"]["border"]
    # The same watch sees the flood's true elephants: it is not blind. (Not all of them: the controller's event
    # stream sheds events for a subscriber that falls behind.)
    assert flood["elephants detected"] > 0
    assert flood["rate-limited"] > 0 and flood["evicted"] > 0 and flood["most flows on the merge path"] == attack.ATTACK_ELEPHANT_LIMITS["max_flows"]
    assert flood["refused switch writes"] == 0 and flood["operator onload+offload worked"] == 1
    pinning = results["nic-pinning"]["border"]
    assert pinning["onloads refused (RESOURCE_EXHAUSTED)"] == pinning["onloads_refused counter"] > 0
    signals = results["signal-reflection"]["border"]
    assert signals["ICMP errors generated"] == signals["legitimate signals received"] == attack.LEGIT_SIGNALS
    dashboard = results["dashboard-certificate"]["border"]
    assert dashboard["calls refused (PERMISSION_DENIED)"] == 6 and dashboard["calls answered otherwise"] == 0
    assert dashboard["controller still primary"] == 1 and dashboard["operator onload+offload worked"] == 1
    probes = results["probe-amplification"]["border"]
    assert probes["probe bytes per attacker byte"] <= 1 and probes["outbound packets that started nothing"] > 0
    batch = results["primary-batch"]["border"]
    assert batch["updates applied"] == attack.PRIMARY_BATCH_UPDATES and batch["echo replies during the Write"] > 0
    assert batch["longest gap between replies (ms)"] <= attack.PRIMARY_BATCH_LONGEST_GAP_S * 1e3 and batch["controller primary again"] == 1
    assert f"{len(attack.SCENARIOS)} of {len(attack.SCENARIOS)} attacks held" in (out / "report.txt").read_text()
