"""The value every admission rule returns: allowed (with JSON-patch ops and warnings) or denied (with a status).

Kopf-style: rules are plain functions returning an `Outcome`; only the HTTP layer turns it into a response.
Denials choose the `metav1.Status` code/reason deliberately — 400 BadRequest for a spec error, 403 Forbidden
for a policy refusal (queue closed, protected queue) — so kubectl prints `Error from server (<reason>): ...
admission webhook "<name>" denied the request: <message>`. `Invalid` (422) is avoided: kubectl replaces an
Invalid status without causes by "The request is invalid", hiding the message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from lapilli.meta import pointer_token

BAD_REQUEST: Final = (400, "BadRequest")
FORBIDDEN: Final = (403, "Forbidden")

PatchOp = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Outcome:
    allowed: bool
    message: str = ""
    code: int = 200
    reason: str = ""
    patch: tuple[PatchOp, ...] = ()
    warnings: tuple[str, ...] = ()


ALLOWED: Final = Outcome(allowed=True)


def allow(patch: Iterable[PatchOp] = (), warnings: Iterable[str] = ()) -> Outcome:
    return Outcome(allowed=True, patch=tuple(patch), warnings=tuple(warnings))


def deny(message: str, *, forbidden: bool = False) -> Outcome:
    code, reason = FORBIDDEN if forbidden else BAD_REQUEST
    return Outcome(allowed=False, message=message, code=code, reason=reason)


escape = pointer_token
"""A JSON-pointer token (RFC 6901): `~` → `~0`, `/` → `~1` (annotation keys contain `/`)."""
