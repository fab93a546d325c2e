"""Quantities printed as Go's `resource.Quantity.String()` prints them (the text Volcano's messages carry)."""

import pytest

from webhook.goquantity import go_string


@pytest.mark.parametrize(
    ("written", "printed"),
    [
        ("16", "16"), (16, "16"), ("16000m", "16"), ("1500m", "1500m"), ("0.5", "500m"), ("2000", "2k"),
        ("1500", "1500"), ("64Gi", "64Gi"), ("65536Mi", "64Gi"), ("1.5Gi", "1536Mi"), ("512Mi", "512Mi"),
        ("100Ki", "100Ki"), ("1000Ki", "1000Ki"), ("0.5Ki", "512"), ("1e3", "1e3"), ("1E3", "1e3"),
        ("2E", "2E"), ("1G", "1G"), ("0", "0"), ("0Gi", "0"), ("-1", "-1"), ("-1500m", "-1500m"),
        ("1n", "1n"), ("1.0000000001", "1000000001n"),
    ],
)
def test_go_string(written, printed):
    assert go_string(written) == printed
