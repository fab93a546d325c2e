"""Go's time.Duration text."""

import pytest

from lapilli.times import go_duration


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (0.25, "250ms"), (1.5, "1.5s"), (90.5, "1m30.5s"),
                                               (3600, "1h0m0s"), (3725, "1h2m5s")])
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text
