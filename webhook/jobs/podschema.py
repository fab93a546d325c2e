"""The core/v1 `PodTemplateSpec` schema as a small table, generated from kubernetes_asyncio's models.

kubernetes_asyncio's models are generated from Kubernetes' OpenAPI document: `openapi_types` gives each
field's type, `attribute_map` its JSON name, and a setter that refuses `None` marks a field the schema
requires. Importing those models costs ~3 s, so the webhook reads this table (`podschema.json`, next to this
module) instead; `python -m webhook.jobs.podschema` rewrites it and a unit test checks it is current.

Table (under `models`): `{"V1PodSpec": {"containers": ["list[V1Container]", true], ...}, ...}` — JSON field name to
(type, required). Types are kubernetes_asyncio's spelling (`str`, `int`, `bool`, `float`, `datetime`, `object`,
`list[T]`, `dict(str, T)`, a model name), plus `quantity` for `resource.Quantity` fields, which the OpenAPI
document types as strings but Go also decodes from JSON numbers.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any, Final

ROOT_MODEL: Final = "V1PodTemplateSpec"
TABLE: Final = Path(__file__).with_name("podschema.json")
# resource.Quantity fields (OpenAPI: string, format int-or-string-ish "quantity"): (model, python attribute).
QUANTITIES: Final = {
    ("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
    ("V1VolumeResourceRequirements", "limits"), ("V1VolumeResourceRequirements", "requests"),
    ("V1PodSpec", "overhead"), ("V1EmptyDirVolumeSource", "size_limit"), ("V1ResourceFieldSelector", "divisor"),
    ("V1PodResourceClaimStatus", "resources"),
}
_MODEL_NAME = re.compile(r"[A-Z]\w*")
_REQUIRED = "must not be `None`"


def _quantity_type(model: str, attr: str, kind: str) -> str:
    if (model, attr) not in QUANTITIES:
        return kind
    return "dict(str, quantity)" if kind.startswith("dict(") else "quantity"


def build(root: str = ROOT_MODEL) -> dict[str, dict[str, list[Any]]]:
    """Walk the models reachable from `root` (needs kubernetes_asyncio, a dependency of the service)."""
    from kubernetes_asyncio.client import models  # 3 s import: only here, never on the webhook's path

    table: dict[str, dict[str, list[Any]]] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        if name in table:
            continue
        cls = getattr(models, name)
        fields: dict[str, list[Any]] = {}
        for attr, kind in sorted(cls.openapi_types.items()):
            setter = getattr(cls, attr).fset
            required = setter is not None and _REQUIRED in inspect.getsource(setter)
            fields[cls.attribute_map[attr]] = [_quantity_type(name, attr, kind), required]
            pending += [m for m in _MODEL_NAME.findall(kind) if hasattr(models, m)]
        table[name] = fields
    return dict(sorted(table.items()))


def source() -> str:
    from importlib.metadata import version

    return f"kubernetes_asyncio {version('kubernetes_asyncio')}"


def render(table: dict[str, dict[str, list[Any]]]) -> str:
    """One model per line, so a regenerated table diffs readably."""
    rows = ",\n".join(f"  {json.dumps(name)}: {json.dumps(fields, sort_keys=True)}" for name, fields in table.items())
    return f'{{"source": {json.dumps(source())},\n "models": {{\n{rows}\n }}\n}}\n'


def load() -> dict[str, dict[str, tuple[str, bool]]]:
    """The committed table: model -> JSON field -> (type, required)."""
    models = json.loads(TABLE.read_text())["models"]
    return {m: {f: (str(t), bool(r)) for f, (t, r) in fields.items()} for m, fields in models.items()}


def main() -> None:
    TABLE.write_text(render(build()))
    print(TABLE, file=sys.stderr)


if __name__ == "__main__":
    main()
