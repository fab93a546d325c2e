"""Pod affinity terms and spread constraints read from a pod spec, as kube-scheduler and kube-apiserver read them."""

from __future__ import annotations

from typing import Any

from lapilli.podterms import HOSTNAME, PodSelector, PodTerms


def _anti(term: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _term(spec: dict[str, Any], namespace: str = "ns", labels: dict[str, str] | None = None) -> Any:
    terms = PodTerms.of(spec, namespace, labels or {})
    assert terms is not None
    return terms.anti_affinity[0]


def test_a_pod_without_terms_has_none() -> None:
    assert PodTerms.of({"containers": []}, "ns", {}) is None
    assert PodTerms.of({"affinity": {"nodeAffinity": {}}}, "ns", {}) is None


def test_a_term_without_namespaces_selects_pods_of_its_own_namespace_only() -> None:
    term = _term(_anti({"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": HOSTNAME}))
    assert term.matches("ns", {"app": "w"}, {})
    assert not term.matches("other", {"app": "w"}, {})
    assert not term.matches("ns", {"app": "x"}, {})


def test_namespace_selectors_match_namespace_labels_and_the_empty_one_every_namespace() -> None:
    team = _term(_anti({"labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "a"}}, "topologyKey": "z"}))
    assert team.matches("anywhere", {}, {"team": "a"})
    assert not team.matches("ns", {}, {"team": "b"})  # a namespace selector replaces the default own namespace
    every = _term(_anti({"labelSelector": {}, "namespaceSelector": {}, "topologyKey": "z"}))
    assert every.matches("anywhere", {"any": "thing"}, {})
    listed = _term(_anti({"labelSelector": {}, "namespaces": ["a"], "topologyKey": "z"}))
    assert listed.matches("a", {}, {}) and not listed.matches("ns", {}, {})


def test_match_and_mismatch_label_keys_merge_the_pods_own_values_into_the_selector() -> None:
    spec = _anti({"labelSelector": {"matchLabels": {"app": "w"}}, "matchLabelKeys": ["job", "absent"],
                  "mismatchLabelKeys": ["team"], "topologyKey": HOSTNAME})
    term = _term(spec, labels={"job": "j1", "team": "t1"})
    assert term.matches("ns", {"app": "w", "job": "j1", "team": "t2"}, {})
    assert not term.matches("ns", {"app": "w", "job": "j2", "team": "t2"}, {})  # another job
    assert not term.matches("ns", {"app": "w", "job": "j1", "team": "t1"}, {})  # the same team


def test_a_nil_selector_selects_nothing_even_with_label_keys() -> None:
    term = _term(_anti({"matchLabelKeys": ["job"], "topologyKey": HOSTNAME}), labels={"job": "j1"})
    assert not term.matches("ns", {"job": "j1"}, {})


def test_a_selector_with_an_operator_kubernetes_does_not_know_selects_nothing() -> None:
    selector = PodSelector.of({"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]})
    assert not selector.matches({"n": "5"})
    assert PodSelector.of({}).empty and PodSelector.of({}).matches({"any": "thing"})


def test_spread_constraints_take_kube_schedulers_defaults_and_merge_match_label_keys() -> None:
    spec = {"topologySpreadConstraints": [
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "w"}}, "matchLabelKeys": ["job"]},
        {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 3,
         "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"},  # not a known action: dropped
    ]}
    terms = PodTerms.of(spec, "ns", {"app": "w", "job": "j1"})
    assert terms is not None
    hard, soft = terms.hard_spread, terms.soft_spread
    assert len(hard) == 1 and len(soft) == 1 and len(terms.spread) == 2
    assert (hard[0].max_skew, hard[0].min_domains, hard[0].honor_affinity, hard[0].honor_taints) == (2, 1, True, False)
    assert hard[0].selector.matches({"app": "w", "job": "j1"}) and not hard[0].selector.matches({"app": "w", "job": "j2"})
    assert (soft[0].min_domains, soft[0].honor_affinity, soft[0].honor_taints) == (3, False, True)


def test_wrongly_shaped_terms_read_as_absent_and_never_raise() -> None:
    spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "oops",
                                         "preferredDuringSchedulingIgnoredDuringExecution": [7, {"weight": "x"}]}},
            "topologySpreadConstraints": {"not": "a list"}}
    terms = PodTerms.of(spec, "ns", {})
    assert terms is not None and terms.affinity == () and len(terms.preferred_affinity) == 2
    assert all(w.weight == 0 and not w.term.matches("ns", {}, {}) for w in terms.preferred_affinity)


def test_a_gangs_members_share_one_parse_unless_label_keys_read_their_labels() -> None:
    spec = _anti({"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": HOSTNAME})
    assert PodTerms.of(spec, "ns", {"index": "0"}) is PodTerms.of(spec, "ns", {"index": "1"})
    keyed = _anti({"labelSelector": {"matchLabels": {"app": "w"}}, "matchLabelKeys": ["index"], "topologyKey": "z"})
    assert PodTerms.of(keyed, "ns", {"index": "0"}) != PodTerms.of(keyed, "ns", {"index": "1"})
