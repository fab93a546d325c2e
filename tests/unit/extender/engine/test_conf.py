"""Scheduler conf loading: every plugin argument is read when the conf is loaded, a bad one is one ConfError line
naming plugin, argument and value; unknown names are warnings and the rest runs."""

from __future__ import annotations

import pytest

from extender.engine.arguments import ConfError
from extender.engine.conf import DEFAULT_CONF
from extender.engine.run import parse_scheduler_conf

BAD_ARGUMENTS = [
    ("binpack", "{binpack.weight: abc}", 'plugin binpack: argument binpack.weight: "abc" is not a number'),
    (
        "binpack",
        "{binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: ten}",
        'plugin binpack: argument binpack.resources.nvidia.com/gpu: "ten" is not a number',
    ),
    ("binpack", "{binpack.resources: [a, b]}", "plugin binpack: argument binpack.resources: ['a', 'b'] is not a string"),
    ("overcommit", "{overcommit-factor: lots}", 'plugin overcommit: argument overcommit-factor: "lots" is not a number'),
    (
        "overcommit",
        "{overcommit-factor.nvidia.com/gpu: true}",
        "plugin overcommit: argument overcommit-factor.nvidia.com/gpu: true is not a number",
    ),
    ("overcommit", "{'overcommit-factor.': 2}", "plugin overcommit: argument overcommit-factor.: names no resource"),
    (
        "nodeorder",
        "{leastrequested.weight: heavy}",
        'plugin nodeorder: argument leastrequested.weight: "heavy" is not a number',
    ),
    (
        "predicates",
        "{predicate.NodePortsEnable: maybe}",
        'plugin predicates: argument predicate.NodePortsEnable: "maybe" is not true or false',
    ),
    ("capacity", "{ancestorReclaimLevel: 1.5}", "plugin capacity: argument ancestorReclaimLevel: 1.5 is not an integer"),
]


def _conf(plugin: str, arguments: str) -> str:
    return f"actions: allocate\ntiers:\n- plugins:\n  - name: {plugin}\n    arguments: {arguments}\n"


@pytest.mark.parametrize(("plugin", "arguments", "line"), BAD_ARGUMENTS)
def test_a_bad_argument_is_refused_at_load_in_one_line(plugin: str, arguments: str, line: str) -> None:
    with pytest.raises(ConfError) as caught:
        parse_scheduler_conf(_conf(plugin, arguments))
    assert str(caught.value) == line
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("plugin", "arguments"),
    [
        ("binpack", "{binpack.weight: '10', binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: 5}"),
        ("overcommit", "{overcommit-factor: '1.5', overcommit-factor.cpu: 2}"),
        ("predicates", "{predicate.NodePortsEnable: 'False'}"),
        ("capacity", "{ancestorReclaimLevel: '2'}"),
        ("gang", "{anything: goes}"),  # a plugin without arguments ignores what it is given, as Volcano's do
    ],
)
def test_good_arguments_load_and_build(plugin: str, arguments: str) -> None:
    conf = parse_scheduler_conf(_conf(plugin, arguments))
    (option,) = conf.tiers[0].plugins
    assert option.name == plugin
    assert option.build().name == plugin
    assert conf.warnings == ()


def test_the_parsed_arguments_reach_the_plugin() -> None:
    conf = parse_scheduler_conf(_conf("binpack", "{binpack.weight: 3, binpack.cpu: -1, binpack.memory: 2}"))
    plugin = conf.tiers[0].plugins[0].build()
    assert plugin.scorer.weight == 3.0  # type: ignore[attr-defined]
    assert plugin.scorer.weights == {"cpu": 1.0, "memory": 2.0}  # type: ignore[attr-defined]


def test_each_session_gets_a_fresh_plugin() -> None:
    option = parse_scheduler_conf(DEFAULT_CONF).tiers[1].plugins[0]
    assert option.build() is not option.build()


def test_unknown_names_are_left_out_with_one_warning_each() -> None:
    conf = parse_scheduler_conf(
        "actions: enqueue, shuffle, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: numa-aware\n"
    )
    assert conf.actions == ("enqueue", "allocate")
    assert conf.plugin_names() == ["gang"]
    assert len(conf.warnings) == 2
    assert "unknown action 'shuffle'" in conf.warnings[0]
    assert "tiers[0].plugins[1]" in conf.warnings[1] and "'numa-aware'" in conf.warnings[1]


def test_no_text_is_volcanos_default_but_an_empty_file_is_refused() -> None:
    assert parse_scheduler_conf(None).actions == ("enqueue", "allocate", "backfill")
    for text in ("", "  \n", "# nothing\n", "~\n"):
        with pytest.raises(ConfError, match="empty"):
            parse_scheduler_conf(text)


def test_yaml_errors_are_one_line() -> None:
    with pytest.raises(ConfError) as caught:
        parse_scheduler_conf("actions: [allocate\n")
    assert "not valid YAML" in str(caught.value) and "\n" not in str(caught.value)


def test_configurations_are_accepted_and_not_read() -> None:
    text = "actions: allocate\ntiers: []\nconfigurations:\n- name: preempt\n  arguments: {anything: 1}\n"
    conf = parse_scheduler_conf(text)
    assert conf.actions == ("allocate",) and conf.warnings == ()
