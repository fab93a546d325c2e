"""A task's pod template checked as kube-apiserver would check a PodTemplateSpec: field types and required fields.

The Job CRD keeps `tasks[*].template` as an opaque object, so without this check `template.metadata: "x"` or a
container's `resources: -1` pass admission and the CRD, and the Job controller fails later with no status and
no event. Volcano's webhook decodes the Job into Go structs and so denies them (`json: cannot unmarshal string
into Go struct field ... of type v1.ObjectMeta`); this module does the same against the core/v1 schema
(`podschema.json`, generated from Kubernetes' OpenAPI through kubernetes_asyncio's models):

* every known field must have its schema type (`null` reads as the zero value, unknown fields are ignored, as
  Go's decoder does); `resource.Quantity` fields take a string or a number that parses as a quantity;
* every field the schema marks required must be present (`...ports[0].containerPort: Required value`).

Container names, images, `containers` itself, restart policy and resource bounds are `template.py`'s, with
apimachinery's messages; this module leaves those to it. Messages name the field by its JSON path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

from lapilli.api import Job
from webhook.decode import DecodeError
from webhook.jobs.podschema import ROOT_MODEL, load
from webhook.jobs.template import quantity

# Checked by template.py with Kubernetes' own wording ("Required value" also for an empty name).
_ELSEWHERE: Final = frozenset({("V1Container", "name"), ("V1PodSpec", "containers")})
SCHEMA: Final = load()
MAX_REPORTED: Final = 5
"""A denial lists at most this many problems (then says there are more), so a hostile template gets one line."""
_INT64: Final = 2**63
# Exact JSON types (the review is decoded JSON: dicts, lists, str, int, float, bool) each scalar kind accepts.
_SCALARS: Final = {"str": (str,), "datetime": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}
_SCALAR_NAMES: Final = {"str": "a string", "datetime": "a string (RFC 3339 time)", "bool": "a boolean",
                        "int": "an integer", "float": "a number"}


@dataclass(frozen=True, slots=True)
class Kind:
    """A schema type parsed once: `tag` is scalar, quantity, any, list, dict or model; `inner` the element kind
    (list, dict), `name` the scalar or model name, `exact` the Python types a scalar accepts as they are."""

    tag: str
    name: str = ""
    inner: Kind | None = None
    exact: tuple[type, ...] = ()


@cache
def parse_kind(text: str) -> Kind:
    if text in _SCALARS:
        return Kind("scalar", text, exact=_SCALARS[text])
    if text == "quantity":
        return Kind("quantity")
    if text == "object":
        return Kind("any")
    if text.startswith("list["):
        return Kind("list", inner=parse_kind(text[5:-1]))
    if text.startswith("dict("):
        return Kind("dict", inner=parse_kind(text[text.index(",") + 1 : -1].strip()))
    return Kind("model", text)


# Per model: its fields' kinds, and the required fields this module reports.
_FIELDS: Final = {model: {f: parse_kind(t) for f, (t, _) in fields.items()} for model, fields in SCHEMA.items()}
_REQUIRED: Final = {
    model: tuple(f for f, (_, required) in fields.items() if required and (model, f) not in _ELSEWHERE)
    for model, fields in SCHEMA.items()
}


def go_type(model: str) -> str:
    """`V1ObjectMeta` -> `v1.ObjectMeta` (the type kube-apiserver's messages name)."""
    for prefix in ("CoreV1", "V1"):
        if model.startswith(prefix):
            return f"v1.{model[len(prefix):]}"
    return model


class _Problems(list[str]):
    """Problems found so far; `full` once there are more than a denial shows (the walk then stops)."""

    @property
    def full(self) -> bool:
        return len(self) > MAX_REPORTED


def _scalar(value: object, kind: Kind, path: str, out: _Problems) -> None:
    if type(value) not in kind.exact:  # exact: a bool is no integer here, as in Go
        out.append(str(DecodeError(path, _SCALAR_NAMES[kind.name], value)))
    elif kind.name == "int" and not -_INT64 <= value < _INT64:  # type: ignore[operator]
        out.append(str(DecodeError(path, "a 64-bit integer", value)))


def _quantity(value: object, path: str, out: _Problems) -> None:
    if type(value) not in (str, int, float):
        out.append(str(DecodeError(path, "a quantity (a string or a number)", value)))
        return
    try:
        quantity(value)  # type: ignore[arg-type]
    except ValueError:  # QuantityError, or Python's own limit on the digits of one integer
        out.append(f'{path}: Invalid value: "{value}": quantities must match the regular expression '
                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def _model(value: object, model: str, path: str, out: _Problems) -> None:
    if not isinstance(value, dict):
        out.append(str(DecodeError(path, f"an object ({go_type(model)})", value)))
        return
    fields = _FIELDS[model]
    for field, child in value.items():
        kind = fields.get(field)
        if kind is None or child is None or (kind.tag == "scalar" and type(child) in kind.exact and
                                             kind.name != "int"):
            continue  # unknown fields are ignored, as Go's decoder does; a well-typed scalar needs no call
        if out.full:
            return
        _check(child, kind, f"{path}.{field}", out)
    for field in _REQUIRED[model]:
        if value.get(field) is None:
            out.append(f"{path}.{field}: Required value")


def _check(value: object, kind: Kind, path: str, out: _Problems) -> None:
    tag = kind.tag
    if tag == "model":
        _model(value, kind.name, path, out)
    elif tag == "scalar":
        _scalar(value, kind, path, out)
    elif tag == "quantity":
        _quantity(value, path, out)
    elif tag == "list":
        if not isinstance(value, list):
            out.append(str(DecodeError(path, "a list", value)))
            return
        for i, item in enumerate(value):
            if item is not None and not out.full:
                _check(item, kind.inner, f"{path}[{i}]", out)  # type: ignore[arg-type]
    elif tag == "dict":
        if not isinstance(value, dict):
            out.append(str(DecodeError(path, "an object", value)))
            return
        for key, item in value.items():
            if item is not None and not out.full:
                _check(item, kind.inner, f"{path}[{key}]", out)  # type: ignore[arg-type]
    # "any": IntOrString and raw objects take any JSON value


def check(value: object, kind: str, path: str) -> list[str]:
    """Problems of `value` read as schema type `kind` at `path` (`null` is the zero value: no problem); the
    walk stops once there are more than `MAX_REPORTED`."""
    out = _Problems()
    if value is not None:
        _check(value, parse_kind(kind), path, out)
    return out


def pod_template_error(job: Job) -> str:
    """The denial for the first task whose template is not a valid PodTemplateSpec, or ""."""
    for index, task in enumerate(job.spec.tasks):
        if problems := check(task.template, ROOT_MODEL, f"spec.tasks[{index}].template"):
            shown = "; ".join(problems[:MAX_REPORTED])
            more = " (and more)" if len(problems) > MAX_REPORTED else ""
            return f"invalid pod template in task {task.name or index}: {shown}{more}"
    return ""


__all__ = ["MAX_REPORTED", "check", "go_type", "pod_template_error"]
