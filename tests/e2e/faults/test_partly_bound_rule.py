"""The fault tests' rule for "a gang partly bound" (`tests/e2e/gangs.partly_bound`) over synthetic samples: it catches a
gang really left partly bound, and excuses only a single sighting while a release is under way. No cluster."""

from __future__ import annotations

from tests.e2e.gangs import Sample, partly_bound


def _samples(*looks: tuple[set[str], bool | None]) -> list[Sample]:
    return [Sample(float(i), frozenset(partial), releasing) for i, (partial, releasing) in enumerate(looks)]


def test_a_sighting_between_the_bindings_of_a_release_under_way_is_excused_once():
    assert partly_bound(_samples((set(), False), ({"a"}, True), (set(), False))) == {}
    assert partly_bound(_samples(({"a"}, True), (set(), True), ({"a"}, True))) == {}, "two releases of one gang"


def test_a_gang_partly_bound_at_two_samples_in_a_row_is_caught_even_while_releases_run():
    found = partly_bound(_samples((set(), True), ({"a"}, True), ({"a", "b"}, True), (set(), True)))
    assert found == {"a": "partly bound at samples 1 and 2 in a row"}


def test_a_single_sighting_with_no_release_under_way_is_caught():
    assert partly_bound(_samples((set(), False), ({"a"}, False), (set(), False))) == {
        "a": "partly bound at sample 1, no gang release under way"}


def test_a_single_sighting_the_service_could_not_explain_is_caught():
    assert partly_bound(_samples(({"a"}, None),)) == {"a": "partly bound at sample 0, the service could not say"}


def test_the_last_sample_is_judged_by_its_release_alone():
    assert partly_bound(_samples((set(), False), ({"a"}, True))) == {}
    assert partly_bound(_samples((set(), False), ({"a"}, False))) == {
        "a": "partly bound at sample 1, no gang release under way"}
