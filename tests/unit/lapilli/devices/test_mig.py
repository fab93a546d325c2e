"""MIG slices (Volcano's mig.go: findMatch, pickFromGroup, getPosition, addMigUsed / subMigUsed).

Ported: TestFindMatch (mig_test.go), every row, as `pick_slice` over the same geometries and used positions (the
id is `uuid[group-position]`); TestAddAndSubMigUsed as holding and releasing slices in a ledger (the group a card
is cut by follows its slices); TestMIGFactory_*_WithMemoryFactor as fits with gpuMemoryFactor 1 and 2. Deliberate
differences (lapilli/devices/mig.py): a card in use offers every kind of its group, not only kinds already in use;
an idle card may take any group again.
"""

import pytest

from lapilli.devices.assign import CardUse
from lapilli.devices.cards import NOW, Fit, Shortfall
from lapilli.devices.config import Geometry, MigTemplate, parse_device_config
from lapilli.devices.mig import Slice, pick_slice
from tests.unit.lapilli.devices.helpers import A100_40GB_MIG, ask, ledger


def geometry(group, *instances):
    return Geometry(group=group, instances=tuple(MigTemplate(name=n, memory=m, count=c) for n, m, c in instances))


@pytest.mark.parametrize(("request_mb", "group", "used", "geometries", "want"), [
    (10, 0, set(), [geometry("default", ("1g.10gb", 10240, 2))], Slice(0, 0, 10240)),  # match and available
    (20000, 0, set(), [geometry("default", ("1g.10gb", 10, 1))], None),  # memory too high
    (10, 0, set(), [geometry("")], None),  # empty geometry list
    (20, 0, set(), [geometry("default", ("2g.20gb", 20, 1))], Slice(0, 0, 20)),  # upstream: no fit (kind not in use)
    (10, 0, {0}, [geometry("default", ("1g.10gb", 10, 1))], None),  # instance already in use
    (20, None, set(), [geometry("group1", ("1g.10gb", 10, 1)), geometry("group2", ("2g.20gb", 24, 1))],
     Slice(1, 0, 24)),  # idle card: first group with a fitting kind
    (5, 0, set(), [geometry("default", ("1g.10gb", 10, 1))], Slice(0, 0, 10)),  # smaller request still matches
])
def test_find_match(request_mb, group, used, geometries, want):
    assert pick_slice(geometries, group, used, request_mb) == want


A100_40 = parse_device_config(A100_40GB_MIG).nvidia


def mig_node():
    return ledger(1, memory=40960, split=7, mode="mig", card_type="NVIDIA-A100-SXM4-40GB", config=A100_40)


def test_a_3_gb_ask_gets_a_5_gb_slice():
    node = mig_node()
    fit = node.fit(ask(memory=3000, cores=0), NOW, "")
    assert isinstance(fit, Fit)
    assert fit.devices(node.cards) == ((CardUse("GPU-0000A[group1-0]", "NVIDIA", 5120, 0),),)


def test_the_card_keeps_its_group_and_positions_count_up():
    node = mig_node()
    ids = []
    for uid in "abc":
        fit = node.fit(ask(memory=3000, cores=0), NOW, "")
        ids.append(fit.devices(node.cards)[0][0].uuid)
        node.hold_fit(uid, fit, 0)
    assert ids == ["GPU-0000A[group1-0]", "GPU-0000A[group1-1]", "GPU-0000A[group1-2]"]
    assert isinstance(node.fit(ask(memory=8000, cores=0), NOW, ""), Shortfall)  # group1 has no 10 GB slice
    node.release("b")
    fit = node.fit(ask(memory=3000, cores=0), NOW, "")
    assert fit.devices(node.cards)[0][0].uuid == "GPU-0000A[group1-1]"  # the freed slice


def test_group_with_several_kinds_positions():
    node = mig_node()
    node.hold("x", ((CardUse("GPU-0000A[group2-0]", "NVIDIA", 10240, 0),),))  # one 2g.10gb: the card is in group2
    small = node.fit(ask(memory=3000, cores=0), NOW, "")
    assert small.devices(node.cards)[0][0].uuid == "GPU-0000A[group2-3]"  # the 1g.5gb sits after the three 2g.10gb
    big = node.fit(ask(memory=8000, cores=0), NOW, "")
    assert big.devices(node.cards)[0][0].uuid == "GPU-0000A[group2-1]"
    assert isinstance(node.fit(ask(memory=15000, cores=0), NOW, ""), Shortfall)


def test_releasing_the_last_slice_frees_the_group():
    node = mig_node()
    node.hold("x", ((CardUse("GPU-0000A[group3-0]", "NVIDIA", 20480, 0),),))
    assert node.fit(ask(memory=3000, cores=0), NOW, "").devices(node.cards)[0][0].uuid == "GPU-0000A[group3-1]"
    node.release("x")
    assert node.fit(ask(memory=3000, cores=0), NOW, "").devices(node.cards)[0][0].uuid == "GPU-0000A[group1-0]"


def test_slices_of_unknown_groups_are_reported_not_counted():
    node = mig_node()
    assert node.hold("x", ((CardUse("GPU-0000A[nogroup-0]", "NVIDIA", 5120, 0),),)) == [
        "MIG slice GPU-0000A[nogroup-0] is not in card 0's geometries"]
    assert node.summary() == [(0, 40960, 0, 7)]


@pytest.mark.parametrize(("factor", "ask_mb", "group", "used"), [
    (1, 10, 0, 5120),  # a 1g.5gb, counted in MB
    (2, 3000, 1, 5120),  # 3000 units of 2 MB need 6000 MB: a 2g.10gb, counted as 10240 / 2
])
def test_memory_factor(factor, ask_mb, group, used):
    node = mig_node()
    fit = node.fit(ask(memory=ask_mb, cores=0), NOW, "", memory_factor=factor)
    assert isinstance(fit, Fit) and fit.holdings[0].memory == used and fit.holdings[0].slot == (group, 0)
