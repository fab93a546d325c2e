"""gangpreempt/gangreclaim arguments and candidate domains (extender/engine/actions/gang_evict.py).

Ports of Volcano's gangpreempt_test.go and gangreclaim_test.go TestPickDomainsFromGradients_* and TestParseArguments*,
each naming its Go test: the domains through `Session.candidate_domains` (Volcano's GetCandidateDomains around
PickDomainsFromGradients) with the gradients a test plugin fixes; arguments are read once, when the conf loads
(Volcano reads them in every session), so the argument rows go through `parse_scheduler_conf`. The hard-topology
row of util_test.go (no fallback) is the topology engine's (Session.candidate_domains).
"""

from __future__ import annotations

import pytest

from extender.engine.actions.gang_evict import GangEvictArgs
from extender.engine.arguments import ConfError
from extender.engine.conf import parse_conf
from extender.engine.run import open_session, parse_scheduler_conf
from extender.engine.snapshot import build_snapshot
from lapilli.topology import CLUSTER_TOP
from tests.unit.extender.engine.builders import documents, registry_with_fakes

TIERS = "tiers: [{plugins: [{name: priority}, {name: gang}]}]"


def conf(action: str, arguments: str = "") -> str:
    text = f'actions: "allocate, {action}"\n{TIERS}\n'
    if arguments:
        text += f"configurations:\n- name: {action}\n  arguments: {arguments}\n"
    return text


def domains(gradients: str, max_domains: int) -> list[str]:
    """`Session.candidate_domains` for a job with no topology, the gradients fixed by the test plugin."""
    conf = parse_conf({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "test-gradients", "arguments": {"gradients": gradients}}]}]}, registry_with_fakes())
    scenario = {"nodes": [{"name": "n1", "alloc": {"cpu": "1"}}], "queues": [{"name": "q"}],
                "podgroups": [{"name": "ns/job", "queue": "q", "min": 1}], "pods": []}
    ssn = open_session(build_snapshot(documents(scenario)), conf)
    return ssn.candidate_domains(ssn.jobs["ns/job"], max_domains)


def test_volcano_gangpreempt_pick_domains_from_gradients_max_domains_and_dedup() -> None:
    assert domains("d1,d2;d2,d3", 2) == ["d1", "d2"]


def test_volcano_gangreclaim_pick_domains_from_gradients_max_domains_and_dedup() -> None:
    assert domains("d1,d2;d2,d3", 3) == ["d1", "d2", "d3"]


@pytest.mark.parametrize("gradients", ["", ";"], ids=["nil (gangpreempt)", "empty (gangreclaim)"])
def test_volcano_pick_domains_from_gradients_fallback(gradients: str) -> None:
    assert domains(gradients, 8) == [CLUSTER_TOP]  # Volcano's "<cluster-top-hypernode>"


@pytest.mark.parametrize(("action", "max_domains"), [("gangpreempt", 3), ("gangreclaim", 5)])
def test_volcano_parse_arguments(action: str, max_domains: int) -> None:
    parsed = parse_scheduler_conf(conf(action, f"{{maxDomains: {max_domains}, allowWholeBundle: false}}"))
    assert parsed.configurations[action] == GangEvictArgs(max_domains=max_domains, allow_whole_bundle=False)
    assert parsed.warnings == ()


@pytest.mark.parametrize("action", ["gangpreempt", "gangreclaim"])
@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_volcano_parse_arguments_invalid_max_domains_falls_back_to_default(action: str, value: int) -> None:
    parsed = parse_scheduler_conf(conf(action, f"{{maxDomains: {value}}}"))
    assert parsed.configurations[action] == GangEvictArgs(max_domains=8, allow_whole_bundle=True)
    assert parsed.warnings == (f"configurations ({action}): maxDomains {value} is not positive: 8 is used instead "
                               "(as Volcano does)",)


def test_defaults_without_a_configurations_entry_and_beside_the_per_pod_actions() -> None:
    parsed = parse_scheduler_conf(f'actions: "enqueue, allocate, preempt, gangpreempt, reclaim, gangreclaim"\n{TIERS}')
    assert parsed.actions == ("enqueue", "allocate", "preempt", "gangpreempt", "reclaim", "gangreclaim")
    assert parsed.configurations == {"gangpreempt": GangEvictArgs(), "gangreclaim": GangEvictArgs()}


@pytest.mark.parametrize(("arguments", "error"), [
    ('{maxDomains: "many"}', 'configurations (gangpreempt): argument maxDomains: "many" is not an integer'),
    ("{allowWholeBundle: maybe}", 'configurations (gangpreempt): argument allowWholeBundle: "maybe" is not true or '
                                  "false"),
    ("[1, 2]", "configurations[0] (gangpreempt): `arguments` must be a mapping"),
])
def test_an_argument_that_cannot_be_read_refuses_the_conf(arguments: str, error: str) -> None:
    with pytest.raises(ConfError) as refused:
        parse_scheduler_conf(conf("gangpreempt", arguments))
    assert str(refused.value) == error


def test_a_configurations_entry_needs_a_name() -> None:
    with pytest.raises(ConfError, match=r"configurations\[0\]: an entry needs a `name`"):
        parse_scheduler_conf(f'actions: "allocate"\n{TIERS}\nconfigurations: [{{arguments: {{}}}}]')
