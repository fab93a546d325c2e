"""The discovery configuration read from Volcano's controller ConfigMap, as Volcano's loader and `parseCfg` read it
(`config/loader_test.go` and `label.go`): the enabled `label` entry, its types' labels bottom-up without the node
level, and everything that does not read reported, never raised."""

import textwrap

import pytest

from controller.hypernodes.config import LabelDiscovery, read_config

GUIDE = """
networkTopologyDiscovery:
- source: ufm
  enabled: true
  interval: 10m
  credentials: {secretRef: {name: ufm-credentials, namespace: volcano-system}}
  config: {endpoint: "https://ufm-server:8080", insecureSkipVerify: true}
- source: roce
  enabled: false
  interval: 15m
  config: {endpoint: "https://roce-server:9090"}
- source: label
  enabled: true
  config:
    networkTopologyTypes:
      topologyA2:
      - nodeLabel: volcano.sh/tor
      - nodeLabel: kubernetes.io/hostname
      topologyA3:
      - nodeLabel: volcano.sh/hypercluster
      - nodeLabel: volcano.sh/hypernode
      - nodeLabel: kubernetes.io/hostname
"""


def read(text: str):
    return read_config(textwrap.dedent(text))


def test_the_user_guides_configmap():
    config, problems = read(GUIDE)
    assert problems == []
    assert config == LabelDiscovery((("topologyA2", ("volcano.sh/tor",)),
                                     ("topologyA3", ("volcano.sh/hypernode", "volcano.sh/hypercluster"))))
    assert config.keys() == {"volcano.sh/tor", "volcano.sh/hypernode", "volcano.sh/hypercluster"}


@pytest.mark.parametrize("text", [
    "",  # empty
    "somethingElse: 1\n",  # no networkTopologyDiscovery
    "networkTopologyDiscovery: []\n",
    "networkTopologyDiscovery:\n- {source: label, enabled: false, config: {networkTopologyTypes: {a: []}}}\n",
    "networkTopologyDiscovery:\n- {source: label, config: {networkTopologyTypes: {a: []}}}\n",  # enabled: false
    "networkTopologyDiscovery:\n- {source: ufm, enabled: true}\n",
])
def test_discovery_is_off_unless_the_label_source_is_enabled(text):
    assert read(text) == (None, [])


def test_the_first_enabled_label_entry_counts_and_a_type_without_labels_is_empty():
    config, _ = read("""
        networkTopologyDiscovery:
        - {source: label, enabled: false, config: {networkTopologyTypes: {first: [{nodeLabel: x}, {nodeLabel: h}]}}}
        - {source: label, enabled: true, config: {networkTopologyTypes: {second: [{nodeLabel: y}, {nodeLabel: h}]}}}
        - {source: label, enabled: true, config: {networkTopologyTypes: {late: [{nodeLabel: z}, {nodeLabel: h}]}}}
    """)
    assert config == LabelDiscovery((("second", ("y",)),))
    assert read("""
        networkTopologyDiscovery:
        - {source: label, enabled: true, config: {networkTopologyTypes: {only: [{nodeLabel: kubernetes.io/hostname}]}}}
    """) == (LabelDiscovery((("only", ()),)), [])


def test_bad_types_are_skipped_with_a_reason_and_the_rest_kept():
    config, problems = read("""
        networkTopologyDiscovery:
        - source: label
          enabled: true
          config:
            networkTopologyTypes:
              aTypeNameLongerThanTwenty: [{nodeLabel: a}, {nodeLabel: h}]
              twice: [{nodeLabel: a}, {nodeLabel: a}, {nodeLabel: h}]
              notAList: {nodeLabel: a}
              good: [{NodeLabel: rack}, {nodeLabel: h}]
    """)
    assert config == LabelDiscovery((("good", ("rack",)),))  # mapstructure matches keys in any case
    assert problems == [
        "config.networkTopologyTypes.aTypeNameLongerThanTwenty: a type name has at most 20 characters; skipped",
        "config.networkTopologyTypes.notAList: expected a list of {nodeLabel: KEY}; skipped",
        "config.networkTopologyTypes.twice: there are duplicate labels; skipped",
    ]


@pytest.mark.parametrize(("text", "problem"), [
    ("networkTopologyDiscovery: [\n", "volcano-controller.conf is not YAML"),
    ("- a\n", "volcano-controller.conf: expected an object"),
    ("networkTopologyDiscovery: {source: label}\n", "networkTopologyDiscovery: expected a list"),
    ("networkTopologyDiscovery:\n- {source: label, enabled: 'true'}\n",
     "networkTopologyDiscovery[0].enabled: expected true or false, got 'true'"),
    ("networkTopologyDiscovery:\n- {source: label, enabled: true, interval: soon}\n",
     "networkTopologyDiscovery[0].interval: 'soon' is not a duration"),
    ("networkTopologyDiscovery:\n- {source: ufm, enabled: true, interval: 1x}\n- {source: label, enabled: true}\n",
     "networkTopologyDiscovery[0].interval: '1x' is not a duration"),
])
def test_a_document_yaml_v2_cannot_decode_turns_discovery_off(text, problem):
    config, problems = read_config(text)
    assert config is None and len(problems) == 1 and problems[0].startswith(problem)


def test_a_configmap_without_the_key():
    assert read_config(None) == (None, ["the ConfigMap has no key volcano-controller.conf"])
