"""Go `flag` semantics of job-plugin arguments."""

import pytest

from lapilli.jobplugins.flags import parse_flags

DEFAULTS = {"master": "master", "port": 23456, "enabled": False}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], {"master": "master", "port": 23456, "enabled": False}),
        (["--master=boss"], {"master": "boss"}),
        (["-master=boss"], {"master": "boss"}),
        (["--master", "boss"], {"master": "boss"}),
        (["--port 1234"], {"port": 1234}),  # one item with a space: read as two
        (["--port=0x10"], {"port": 16}),
        (["--port=017"], {"port": 15}),  # Go reads a leading 0 as octal
        (["--enabled"], {"enabled": True}),
        (["--enabled=false"], {"enabled": False}),
        (["--enabled", "--port=1"], {"enabled": True, "port": 1}),  # a bool never eats the next item
        (["--port=1", "extra", "--master=x"], {"port": 1, "master": "master"}),  # stops at a non-flag
        (["--", "--master=x"], {"master": "master"}),
    ],
)
def test_parses_like_go(args, expected):
    parsed = parse_flags(args, DEFAULTS)
    assert parsed.error == ""
    for name, value in expected.items():
        assert parsed.values[name] == value


@pytest.mark.parametrize(
    ("args", "error", "kept"),
    [
        (["--nope=1"], "flag provided but not defined: -nope", {}),
        (["--port=1", "--port=abc", "--master=x"], 'invalid value "abc" for flag -port: parse error', {"port": 1}),
        (["--master"], "flag needs an argument: -master", {}),
        (["---master=x"], "bad flag syntax: ---master=x", {}),
        (["--enabled=maybe"], 'invalid boolean value "maybe" for -enabled: parse error', {}),
    ],
)
def test_first_error_stops_parsing_and_keeps_defaults(args, error, kept):
    parsed = parse_flags(args, DEFAULTS)
    assert parsed.error == error
    assert parsed.values["master"] == "master"  # never reached
    for name, value in kept.items():
        assert parsed.values[name] == value


def test_values_with_spaces_after_equals_are_kept_whole():
    key = "-----BEGIN RSA PRIVATE KEY-----\nabc def\n-----END RSA PRIVATE KEY-----\n"
    parsed = parse_flags([f"--ssh-private-key={key}"], {"ssh-private-key": ""})
    assert parsed.values["ssh-private-key"] == key


def test_typed_accessors():
    parsed = parse_flags(["--port=7", "--enabled"], DEFAULTS)
    assert parsed.number("port") == 7
    assert parsed.switch("enabled") is True
    assert parsed.text("master") == "master"
