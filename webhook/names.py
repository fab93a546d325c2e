"""Kubernetes name validation with apimachinery's exact messages (`k8s.io/apimachinery/pkg/util/validation`).

Volcano's job webhook formats these lists with Go's `%v`, e.g. `[must be no more than 63 characters]`.
"""

from __future__ import annotations

import re
from typing import Final

_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL: Final = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN: Final = re.compile(rf"^{_LABEL_FMT}(\.{_LABEL_FMT})*$")
_QUALIFIED_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED: Final = re.compile(f"^{_QUALIFIED_FMT}$")

LABEL_ERROR: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{_LABEL_FMT}')"
)
SUBDOMAIN_ERROR: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    rf"'{_LABEL_FMT}(\.{_LABEL_FMT})*')"
)
QUALIFIED_ERROR: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    f"'{_QUALIFIED_FMT}')"
)
QUALIFIED_FORM_ERROR: Final = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    f"'{_QUALIFIED_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)


def go_list(messages: list[str]) -> str:
    """Go's `%v` of a []string."""
    return "[" + " ".join(messages) + "]"


def dns1123_label(value: str) -> list[str]:
    """`IsDNS1123Label`."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _LABEL.match(value):
        errors.append(LABEL_ERROR)
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    """`IsDNS1123Subdomain`."""
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not _SUBDOMAIN.match(value):
        errors.append(SUBDOMAIN_ERROR)
    return errors


def qualified_name(value: str) -> list[str]:
    """`IsQualifiedName`: `[prefix/]name`, name ≤63 chars of `[A-Za-z0-9_.-]`, prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        prefix_errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            prefix_errors = ["prefix part must be non-empty"]
        else:
            prefix_errors = ["prefix part " + m for m in dns1123_subdomain(prefix)]
    else:
        return [QUALIFIED_FORM_ERROR]
    errors = list(prefix_errors)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED.match(name):
        errors.append(QUALIFIED_ERROR)
    return errors
