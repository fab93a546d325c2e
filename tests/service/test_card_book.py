"""The card book's answers per ask (issue 18): filter's answer for a vGPU pod is read from answers kept per ask and
node, so a node something touched must be answered afresh, also when more touches came in between than the book
remembers (it then drops that ask's answers whole), and a conf change forgets everything."""

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
