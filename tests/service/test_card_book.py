"""The card book's answers per ask (issue 18): filter's answer for a vGPU pod is read from answers kept per ask and
node (and a filter offering the same nodes as the last one, from that whole answer), so a node something touched
must be answered afresh, also when more touches came in between than the book remembers (it then drops that ask's
answers whole), and a conf change forgets everything."""

from __future__ import annotations

from typing import Any

from extender.engine.run import parse_scheduler_conf
from extender.service import cards
from extender.service.cards import CardBook
from extender.service.plan import Plan
from lapilli.devices.assign import CardUse, PodDevices
from tests.service.extender_state import cluster_state, volcano_pod
from tests.service.test_extender_vgpu import CONF, SIXTY, TWENTY, gpu_node
from tests.unit.extender.engine.builders import queue


def _book(docs: list[dict[str, Any]]) -> CardBook:
    book = CardBook(cluster_state(docs), Plan(ttl_s=60))
    book.configure(parse_scheduler_conf(CONF))
    return book


def _sixty(node: str) -> PodDevices:
    return ((CardUse(f"{node}-gpu0", "NVIDIA", 61440, 0),),)


def test_a_touched_node_is_answered_afresh_and_the_others_from_the_answers_kept():
    book = _book([gpu_node("n0"), gpu_node("n1"), queue({"name": "default"})])
    ask = book.ask(volcano_pod({"name": "ml/a", "group": "a", "limits": SIXTY}))
    assert ask is not None
    assert book.filter(ask, ["n0", "n1", "gone"]) == (["n0", "n1"], {"gone": cards.NO_CARDS})
    assert book.filter(ask, ["n0", "n1"]) == (["n0", "n1"], {})
    assert book.filter(ask, ["n0", "n1"]) == (["n0", "n1"], {})  # the whole answer kept
    book.reserve("ml/b", "n1", _sixty("n1"))
    kept, failed = book.filter(ask, ["n0", "n1"])
    assert kept == ["n0"] and "no vGPU card fits" in failed["n1"]
    small = book.ask(volcano_pod({"name": "ml/c", "group": "c", "limits": TWENTY}))
    assert small is not None and book.filter(small, ["n0", "n1"]) == (["n0", "n1"], {})  # 20 GB left on n1
    book.release("ml/b")
    assert book.filter(ask, ["n0", "n1"]) == (["n0", "n1"], {})


def test_more_touches_than_the_log_holds_drop_an_asks_answers_whole(monkeypatch):
    monkeypatch.setattr(cards, "LOG_LIMIT", 4)
    book = _book([gpu_node("n0"), *(gpu_node(f"x{i}") for i in range(6)), queue({"name": "default"})])
    ask = book.ask(volcano_pod({"name": "ml/a", "group": "a", "limits": SIXTY}))
    assert ask is not None
    assert book.filter(ask, ["n0"]) == (["n0"], {})
    book.reserve("ml/b", "n0", _sixty("n0"))  # n0's touch is the first of more than the log keeps
    for i in range(6):
        book.touch(f"x{i}")
    kept, failed = book.filter(ask, ["n0", "x0"])
    assert kept == ["x0"] and "no vGPU card fits" in failed["n0"]


def test_a_new_conf_forgets_every_answer():
    book = _book([gpu_node("n0"), queue({"name": "default"})])
    pod = volcano_pod({"name": "ml/a", "group": "a", "limits": SIXTY})
    ask = book.ask(pod)
    assert ask is not None and book.filter(ask, ["n0"]) == (["n0"], {})
    book.configure(parse_scheduler_conf(CONF.replace("deviceshare.VGPUEnable: true", "deviceshare.VGPUEnable: false")))
    assert not book.active and book.ask(pod) is None


def test_pods_of_one_template_share_an_ask_unless_their_podgroups_keep_apart():
    book = _book([gpu_node("n0"), queue({"name": "default"})])
    spread = {"volcano.sh/vgpu-podgroup-policy": "spread"}
    a, b = (book.ask(volcano_pod({"name": f"ml/{g}-0", "group": g, "limits": TWENTY})) for g in ("a", "b"))
    assert a is not None and a is b  # the template read once
    c, d = (book.ask(volcano_pod({"name": f"ml/{g}-0", "group": g, "limits": TWENTY, "annotations": spread}))
            for g in ("a", "b"))
    assert c is not None and d is not None
    assert (c.spread_group, d.spread_group) == ("ml/a", "ml/b")


def test_a_pod_like_the_last_one_shares_its_ask_and_one_that_differs_in_anything_the_ask_reads_does_not():
    # The book compares a pod with the last one it read before parsing its quantities: each thing an ask reads must
    # tell two pods apart (resources, the ask's annotations, the spread PodGroup, the labels under exclusivity rules).
    book = _book([gpu_node("n0"), queue({"name": "default"})])
    first = book.ask(volcano_pod({"name": "ml/a-0", "group": "a", "limits": TWENTY}))
    assert first is not None
    assert book.ask(volcano_pod({"name": "ml/b-0", "group": "b", "limits": TWENTY})) is first
    bigger = book.ask(volcano_pod({"name": "ml/c-0", "group": "c", "limits": SIXTY}))
    assert bigger is not None and bigger.containers[0].memory == 61440
    typed = book.ask(volcano_pod({"name": "ml/d-0", "group": "d", "limits": SIXTY,
                                  "annotations": {"nvidia.com/use-gputype": "A100"}}))
    assert typed is not None and typed.use_types == ("A100",)
    spread = {"volcano.sh/vgpu-podgroup-policy": "spread"}
    e, f = (book.ask(volcano_pod({"name": f"ml/{g}-0", "group": g, "limits": SIXTY, "annotations": spread}))
            for g in ("e", "f"))
    assert e is not None and f is not None and (e.spread_group, f.spread_group) == ("ml/e", "ml/f")
    assert book.ask(volcano_pod({"name": "ml/g-0", "group": "g", "limits": SIXTY})) is bigger


def test_a_pod_like_the_last_one_but_for_a_label_an_exclusivity_rule_reads_gets_its_own_ask():
    rule = 'deviceshare.GPUExclusiveRules: [{team: a}]'
    book = CardBook(cluster_state([gpu_node("n0"), queue({"name": "default"})]), Plan(ttl_s=60))
    book.configure(parse_scheduler_conf(CONF.replace("deviceshare.VGPUEnable: true",
                                                     f"deviceshare.VGPUEnable: true, {rule}")))
    plain = book.ask(volcano_pod({"name": "ml/a-0", "group": "a", "limits": TWENTY}))
    ruled = book.ask(volcano_pod({"name": "ml/b-0", "group": "b", "limits": TWENTY, "labels": {"team": "a"}}))
    assert plain is not None and ruled is not None
    assert (plain.rules, ruled.rules) == (frozenset(), frozenset({0}))
