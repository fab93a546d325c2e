"""Where a pod's card asks fit on a node (Volcano's checkNodeGPUSharingPredicateAndScore and its helpers).

Ported, with the ledger standing in for `GPUDevices` (cards named GPU-0000A… as `makeGPUDevices` names them):
* utils_test.go: TestSortedDeviceIndicesByPolicy_PicksExpectedDevice, TestGPUScore (as the score of the card a pod
  is given, usage seeded the same way), TestBinpackStacksSequentialPods, TestGPUUUIDConstraints.
* spread_integration_test.go: every test (TestSpreadPreventsCoLocation, TestBinpackAllowsCoLocation,
  TestSpreadDifferentGroupsCanShare, TestSpreadWithNoRoomFails, TestMixedAnnotations).
* deviceshare_test.go: Test_FilterNode (3 cards of different memory, an ask of 3 cards × 100 cores) and
  TestVgpuScore (binpack: (3000 + 1000) × 100 / 30000; spread: 100 for an idle card).
* hamicore_test.go: TestHAMICoreFactory_AddPod / _AddPodDistinctUIDsAccumulate / _SubPodRemovesEntry, as holding
  and releasing pods in the ledger (holding a pod twice counts it once).
* gpuexclusive_test.go: TestEndToEndExclusive, TestReservedGPUsForPod, TestPodMatchingMultipleRulesSeesUnionOf-
  ReservedGPUs, TestNonMatchingPodDoesNotReserve, as fits of pods carrying the rules they match.
Left out: TestArguments (plugin argument parsing, tested with the plugin), TestGetPodGroupKey (the engine's job
key), TestCapGPUsOnlyAffectsSpecifiedIndices / TestOnSessionOpenWrapsDevices / TestLoadGPUExclusiveConfig (Volcano's
wrapper mechanics, which Lapilli does not have: rules are a filter of the fit), TestAddResource* / TestRelease*
(the scheduler cache's pod-map bookkeeping and the Binding's annotation keys, tested in test_assign and the service).
Deliberate differences (see lapilli/devices/cards.py): the spread score counts a card unused before the pod is
added (upstream scored after adding, so the row "spread rewards idle GPU" held only for `GPUScore` called alone).
"""

import pytest

from lapilli.devices.asks import ContainerAsk, DeviceAsk
from lapilli.devices.assign import CardUse
from lapilli.devices.cards import FUTURE, HELD, NOW, RELEASING, Fit, Shortfall
from tests.unit.lapilli.devices.helpers import ask, ledger


def seed(node, card, memory, pods=1, uid="seed"):
    node.hold(uid, ((CardUse(node.cards.cards[card].uuid, "NVIDIA", memory, 0),),) * pods)


def uuid_of(fit, node):
    assert isinstance(fit, Fit), fit
    return fit.devices(node.cards)[0][0].uuid


@pytest.mark.parametrize(("cards", "policy", "seeded", "want"), [
    (2, "binpack", True, "GPU-0000A"),  # binpack picks busier device
    (2, "spread", True, "GPU-0000B"),  # spread picks idle device over shared one
    (3, "", False, "GPU-0000C"),  # unset policy preserves legacy descending-index order
])
def test_policy_picks_expected_card(cards, policy, seeded, want):
    node = ledger(cards)
    if seeded:
        seed(node, 0, 4096)
    assert uuid_of(node.fit(ask(), NOW, policy), node) == want


@pytest.mark.parametrize(("policy", "used", "pods", "score"), [
    ("spread", 0, 0, 100.0),  # spread rewards idle GPU
    ("spread", 4096, 1, 0.0),  # spread does not reward shared GPU
    ("binpack", 12288, 3, 100.0),  # binpack rewards the GPU the pod fills
    ("binpack", 0, 0, 25.0),  # an idle GPU scores the pod's own share
    ("", 4096, 1, 0.0),  # unset policy returns zero
])
def test_card_score(policy, used, pods, score):
    node = ledger(1)
    if pods:
        seed(node, 0, used // pods, pods)
    fit = node.fit(ask(cores=0), NOW, policy)
    assert isinstance(fit, Fit) and fit.score == score


def test_binpack_stacks_sequential_pods():
    node = ledger(3)
    placed = []
    for uid in "abc":
        fit = node.fit(ask(), NOW, "binpack")
        placed.append(uuid_of(fit, node))
        node.hold_fit(uid, fit, HELD)
    assert placed == ["GPU-0000A"] * 3  # all on one card


@pytest.mark.parametrize(("filters", "want"), [
    ({"allow": ("GPU-0000A",)}, "GPU-0000A"),
    ({"deny": ("GPU-0000B",)}, "GPU-0000A"),
    ({"allow": ("GPU-unknown",)}, "uuid"),
    ({"deny": ("GPU-0000A", "GPU-0000B")}, "uuid"),
])
def test_uuid_constraints(filters, want):
    node = ledger(2)
    fit = node.fit(ask(**filters), NOW, "")
    if want == "uuid":
        assert isinstance(fit, Shortfall) and fit.kind == "uuid"
    else:
        assert uuid_of(fit, node) == want


def spread_ask(group="default/job-1", spread=True):
    return ask(spread_group=group if spread else "")


def place(node, uid, the_ask, group="default/job-1"):
    fit = node.fit(the_ask, NOW, "binpack")
    if isinstance(fit, Fit):
        node.hold_fit(uid, fit, HELD, group=group, rules=the_ask.rules)
    return fit


def test_spread_prevents_co_location():
    node = ledger(2)
    a, b = place(node, "a", spread_ask()), place(node, "b", spread_ask())
    assert uuid_of(a, node) != uuid_of(b, node)


def test_binpack_allows_co_location():
    node = ledger(2)
    a, b = place(node, "a", spread_ask(spread=False)), place(node, "b", spread_ask(spread=False))
    assert uuid_of(a, node) == uuid_of(b, node)


def test_spread_different_groups_can_share():
    node = ledger(1)
    assert isinstance(place(node, "a", spread_ask()), Fit)
    assert isinstance(place(node, "b", spread_ask("default/job-2"), group="default/job-2"), Fit)


def test_spread_with_no_room_fails():
    node = ledger(1)
    place(node, "a", spread_ask())
    assert isinstance(place(node, "b", spread_ask()), Shortfall)


def test_mixed_annotations():
    node = ledger(2)
    a = place(node, "a", spread_ask())
    b = place(node, "b", spread_ask(spread=False))
    assert uuid_of(a, node) == uuid_of(b, node)  # without the annotation a pod may join its group's card


def test_filter_node_three_cards_of_different_memory():
    node = ledger(0)
    from lapilli.devices.register import Card, node_cards
    from tests.unit.lapilli.devices.helpers import CONFIG

    cards = tuple(Card(i, f"GPU-{i}", 10, m, "NVIDIA", True, "hami-core") for i, m in enumerate((30000, 20000, 30000)))
    node = type(node)(node_cards("node1", cards, CONFIG))
    whole = DeviceAsk(containers=(ContainerAsk(nums=3, memory=0, percentage=100, cores=100),))
    fit = node.fit(whole, NOW, "binpack")
    assert isinstance(fit, Fit) and sorted(h.card for h in fit.holdings) == [0, 1, 2]
    assert [u.memory for u in fit.devices(node.cards)[0]] == [30000, 20000, 30000]  # each card's whole memory


def test_vgpu_score():
    node = ledger(1, memory=30000, split=10)
    seed(node, 0, 3000)
    fit = node.fit(ask(memory=1000, cores=0), NOW, "binpack")
    assert isinstance(fit, Fit) and fit.score == pytest.approx(4000 * 100 / 30000)
    idle = ledger(1, memory=30000, split=10)
    fit = idle.fit(ask(memory=1000, cores=0), NOW, "spread")
    assert isinstance(fit, Fit) and fit.score == 100.0


def test_holding_and_releasing_pods():
    node = ledger(1)
    devices = ((CardUse("GPU-0000A", "NVIDIA", 4096, 25),),)
    node.hold("p1", devices)
    node.hold("p1", devices)  # the same pod again counts once
    assert node.summary() == [(4096, 16384, 1, 4)]
    node.hold("p2", devices)
    assert node.summary() == [(8192, 16384, 2, 4)]
    node.release("p1")
    assert node.summary() == [(4096, 16384, 1, 4)]
    assert node.hold("p3", ((CardUse("GPU-other", "NVIDIA", 1, 0),),)) == [
        "card GPU-other is not registered on node node-1"]


def test_split_cores_health_and_memory():
    node = ledger(1, split=2)
    place(node, "a", ask(cores=0), group="")
    place(node, "b", ask(cores=0), group="")
    assert place(node, "c", ask(cores=0), group="").kind == "room"  # two pods already share it
    node = ledger(1)
    assert isinstance(place(node, "a", ask(cores=100), group=""), Fit)
    assert isinstance(place(node, "b", ask(cores=0), group=""), Shortfall)  # all cores taken, a 0-core ask stays out
    node = ledger(1)
    place(node, "a", ask(cores=10), group="")
    assert isinstance(place(node, "b", ask(cores=100), group=""), Shortfall)  # 100 cores want an unused card
    assert isinstance(ledger(1, healthy=False).fit(ask(), NOW, ""), Shortfall)
    short = ledger(2).fit(ask(memory=20000), NOW, "")
    assert isinstance(short, Shortfall) and (short.kind, short.free, short.need) == ("room", 16384, 20000)


def test_a_container_takes_distinct_cards():
    node = ledger(2)
    fit = node.fit(ask(memory=1000, nums=2, cores=0), NOW, "binpack")
    assert isinstance(fit, Fit) and sorted(h.card for h in fit.holdings) == [0, 1]
    short = ledger(2).fit(ask(nums=3), NOW, "")
    assert isinstance(short, Shortfall) and short.kind == "cards"


def test_mode_must_match():
    short = ledger(1).fit(ask(mode="mig"), NOW, "")
    assert isinstance(short, Shortfall) and short.kind == "mode"


def test_releasing_slices_are_free_for_a_pipelined_pod_only():
    node = ledger(1)
    node.hold("victim", ((CardUse("GPU-0000A", "NVIDIA", 16384, 0),),))
    node.set_kind("victim", RELEASING)
    assert isinstance(node.fit(ask(cores=0), NOW, ""), Shortfall)
    assert isinstance(node.fit(ask(cores=0), FUTURE, ""), Fit)


# ---- exclusivity (gpuexclusive_test.go) -----------------------------------------------------------------------
def test_end_to_end_exclusive():
    node = ledger(2, split=10)
    first = place(node, "train-1", ask(rules=frozenset({0})), group="")
    second = place(node, "train-2", ask(rules=frozenset({0})), group="")
    assert uuid_of(first, node) != uuid_of(second, node)
    assert isinstance(place(node, "train-3", ask(rules=frozenset({0})), group=""), Shortfall)  # both cards reserved
    assert isinstance(place(node, "serve", ask(), group=""), Fit)  # a pod matching no rule still shares


def test_rules_reserve_only_for_the_same_rule_and_the_union_for_several():
    node = ledger(2, split=10)
    place(node, "a", ask(rules=frozenset({0})), group="")
    assert isinstance(place(node, "b", ask(rules=frozenset({1})), group=""), Fit)  # other rule: may share
    node = ledger(3, split=10)
    node.hold("a", ((CardUse("GPU-0000A", "NVIDIA", 4096, 25),),), rules=frozenset({0}))
    node.hold("b", ((CardUse("GPU-0000B", "NVIDIA", 4096, 25),),), rules=frozenset({1}))
    assert uuid_of(place(node, "c", ask(rules=frozenset({0, 1})), group=""), node) == "GPU-0000C"
    assert uuid_of(node.fit(ask(rules=frozenset({1})), NOW, "binpack"), node) != "GPU-0000B"


def test_exclusivity_does_not_apply_to_mig_cards():
    from lapilli.devices.config import parse_device_config

    config = parse_device_config("nvidia: {knownMigGeometries: [{models: [NVIDIA], allowedGeometries: "
                                 "[{group: g, geometries: [{name: 1g.5gb, memory: 5120, count: 7}]}]}]}").nvidia
    node = ledger(1, memory=40960, mode="mig", config=config, split=7)
    assert isinstance(place(node, "a", ask(memory=3000, rules=frozenset({0})), group=""), Fit)
    assert isinstance(place(node, "b", ask(memory=3000, rules=frozenset({0})), group=""), Fit)


def test_pods_placed_alike_share_one_hold_and_each_gets_its_assignment():
    # A placement records a reference to a hold shared by the pods given the same share of the same card (no object
    # per pod); the assignment is made when first read, once per distinct hold, and a pod's own stays its own.
    node = ledger(1, memory=81920)
    for uid in ("a", "b"):
        fit = node.fit(ask(memory=40960, cores=0), NOW, "binpack")
        assert isinstance(fit, Fit)
        node.hold_fit(uid, fit, HELD)
    assert node.pods["a"] is node.pods["b"]
    want = ((CardUse("GPU-0000A", "NVIDIA", 40960, 0),),)
    assert node.devices_of("a") == want and node.devices_of("a") is node.devices_of("b")
    node.set_kind("a", RELEASING)
    assert node.kind_of("a") == RELEASING and node.kind_of("b") == HELD and node.devices_of("a") == want
    assert node.release("a") == want and node.devices_of("a") is None and node.devices_of("b") == want
    own = ((CardUse("GPU-0000A", "NVIDIA", 1024, 0),),)
    node.hold("c", own)
    assert node.devices_of("c") is own and node.release("c") is own
