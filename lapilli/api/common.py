"""Shared building blocks of the Volcano API models: the base model, wire scalar types and small core types.

Counterparts: `k8s.io/apimachinery` (`metav1.ObjectMeta`, `OwnerReference`, `LabelSelector`, `Duration`, `Time`,
`resource.Quantity`) and the `NetworkTopologySpec` that Volcano defines twice, identically in substance, in
`scheduling/v1beta1/types.go` and `batch/v1alpha1/job.go`.

Contract of every model here and in the kind modules:

* attributes are snake_case, the wire names are camelCase aliases; code may construct with either, while
  `from_wire(doc)` (what `parse_object` uses) accepts only the wire names a manifest may carry;
* `from_wire(doc)` followed by `to_wire()` returns `doc` unchanged: only what was in the document (or was
  assigned or mutated since) is written back, so defaults never leak into a round trip;
* fields of Volcano's types are closed (`extra="forbid"`): the API server prunes unknown fields from these CRDs
  before anything else sees them, so an unknown field can only be a typo and is reported as such; object
  metadata is open (`extra="allow"`) because Kubernetes owns its schema;
* validated with `context=SHAPE_ONLY` (`from_admission`), a model checks only what Go's JSON decoding checks —
  types and int32 range; null reads as absent — and keeps values the value rules would refuse (a negative
  count, a name off its pattern, an enum string Volcano does not know, an empty task list). That is how the
  admission webhook reads an object: Volcano's webhook decodes it into the same Go types and then reports each
  value rule in its own words, so the one model serves the controllers, the CLI and the webhook.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Final, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from lapilli.times import parse_duration, parse_rfc3339_datetime

# The pattern Kubernetes puts on every `resource.Quantity` in a CRD schema (controller-gen output), so the model
# accepts exactly the strings the API server does.
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# RFC 1123 subdomain, the pattern Volcano puts on queue names, parents and priority class names.
DNS_SUBDOMAIN_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# RFC 1123 label, the pattern of task names.
DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

_QUANTITY_RE: Final = re.compile(QUANTITY_PATTERN)
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1

SHAPE_ONLY: Final = {"shape_only": True}

_ZEROS: Final[tuple[tuple[type, object], ...]] = ((bool, False), (int, 0), (str, ""))


def _go_zero(annotation: Any) -> object:
    """The zero value of a scalar field's type (None for anything else)."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return next((zero for kind, zero in _ZEROS if isinstance(annotation, type) and issubclass(annotation, kind)), None)
"""Validation context that checks types only (see the module docstring)."""


def _shape_only(info: ValidationInfo) -> bool:
    return isinstance(info.context, Mapping) and bool(info.context.get("shape_only"))


class ValueRule:
    """Annotated metadata: a value check that runs unless only the shape counts, and the JSON-schema keywords that
    say the same (so the model's schema still compares equal with the CRD's)."""

    keywords: dict[str, int | str] = {}

    def check(self, value: Any) -> str | None:
        """`"<error type>:<text>"` when `value` breaks the rule, else None."""
        raise NotImplementedError

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def validate(value: Any, info: ValidationInfo) -> Any:
            if not _shape_only(info) and (problem := self.check(value)) is not None:
                kind, text = problem.split(":", 1)
                raise PydanticCustomError(kind, text)
            return value

        return core_schema.with_info_after_validator_function(validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = handler(schema)
        out.update(self.keywords)
        return out


class at_least(ValueRule):
    """A lower bound on an int."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.keywords = {"minimum": bound}

    def check(self, value: int) -> str | None:
        if value < self.bound:
            return f"greater_than_equal:Input should be greater than or equal to {self.bound}"
        return None


class named(ValueRule):
    """Length and pattern of a name."""

    def __init__(self, *, max_length: int | None = None, pattern: str | None = None, min_length: int = 0) -> None:
        self.max_length, self.min_length, self.pattern = max_length, min_length, pattern
        self.keywords = {}
        if max_length is not None:
            self.keywords["maxLength"] = max_length
        if min_length:
            self.keywords["minLength"] = min_length
        if pattern is not None:
            self.keywords["pattern"] = pattern

    def check(self, value: str) -> str | None:
        if len(value) < self.min_length:
            return f"string_too_short:String should have at least {self.min_length} character"
        if self.max_length is not None and len(value) > self.max_length:
            return f"string_too_long:String should have at most {self.max_length} characters"
        if self.pattern is not None and value and not re.match(self.pattern, value):
            return f"string_pattern_mismatch:String should match pattern '{self.pattern}'"
        return None


class not_empty(ValueRule):
    """At least one item."""

    keywords = {"minItems": 1}

    def check(self, value: list[Any]) -> str | None:
        return "too_short:List should have at least 1 item after validation, not 0" if not value else None


def _lenient_enum(value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> object:
    """An enum member; any string where only the shape counts (Go's string-typed enums decode anything)."""
    if _shape_only(info) and isinstance(value, str):
        try:
            return handler(value)
        except ValueError:
            return value
    return handler(value)


Lenient = WrapValidator(_lenient_enum)
"""Marks an enum field whose unknown strings the value rules, not the decoder, report."""


def _check_quantity(value: object) -> object:
    """Accept what a CRD quantity accepts (a number or a quantity string); keep the value as written."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"a quantity must be finite, not {value!r}")
    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a quantity (expected e.g. '500m', '2', '1.5Gi', '4k')")
    return value


def _check_duration(value: str) -> str:
    parse_duration(value)
    return value


def _check_timestamp(value: str) -> str:
    """metav1.Time is RFC 3339 on the wire; keep the text so a round trip is byte-exact."""
    try:
        parse_rfc3339_datetime(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an RFC 3339 timestamp (expected e.g. '2024-05-01T12:00:00Z')") from None
    return value


Quantity = Annotated[str | int | float, BeforeValidator(_check_quantity)]
"""A `resource.Quantity` exactly as written ("500m", 8, "16Gi"); parse it with `lapilli.resources.parse_quantity`."""

ResourceList = dict[str, Quantity]
"""`v1.ResourceList`: resource name → quantity."""

Duration = Annotated[str, Field(strict=True), AfterValidator(_check_duration)]
"""`metav1.Duration` as its Go text; `parse_duration` turns it into a `timedelta`."""

Timestamp = Annotated[str, Field(strict=True), AfterValidator(_check_timestamp)]
"""`metav1.Time` as its RFC 3339 text."""

Int32 = Annotated[int, Field(strict=True, ge=INT32_MIN, le=INT32_MAX)]
NonNegativeInt32 = Annotated[Int32, at_least(0)]
PositiveInt32 = Annotated[Int32, at_least(1)]
Str = Annotated[str, Field(strict=True)]

FreeForm = dict[str, Any]
"""A Kubernetes core object we never validate ourselves (PodTemplateSpec, PersistentVolumeClaimSpec)."""


class VolcanoModel(BaseModel):
    """Base of every model of a Volcano type: camelCase aliases, closed field set, lossless serialisation."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
    )

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        # `exclude_unset` only sees fields that were in the input or assigned. A default sub-object or container
        # that was later mutated in place (`job.status.state.phase = ...` on a fresh Job) would silently vanish
        # from the output, so count such fields as set before pydantic decides what to write.
        if info.exclude_unset:
            self._mark_mutated_defaults()
        result: dict[str, Any] = handler(self)
        return result

    def _mark_mutated_defaults(self) -> bool:
        """Count as set every sub-object or container field that now holds something; True if this model does."""
        fields_set = self.__pydantic_fields_set__
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, VolcanoModel):
                touched = value._mark_mutated_defaults()
            elif isinstance(value, dict | list):
                touched = bool(value)
            else:
                continue
            if touched and name not in fields_set:
                fields_set.add(name)
        return bool(fields_set) or bool(self.__pydantic_extra__)

    @model_validator(mode="before")
    @classmethod
    def _go_decoding(cls, data: Any, info: ValidationInfo) -> Any:
        # Shape only: null is Go's zero value, and a field the CRD prunes never reaches a Go struct.
        if not _shape_only(info) or not isinstance(data, Mapping):
            return data
        known = {f.alias or name for name, f in cls.model_fields.items()} | set(cls.model_fields)
        open_model = cls.model_config.get("extra") == "allow"
        decoded = {k: v for k, v in data.items() if v is not None and (open_model or k in known)}
        for name, field in cls.model_fields.items():  # a required field left out decodes as Go's zero value
            key = field.alias or name
            if field.is_required() and key not in decoded and (zero := _go_zero(field.annotation)) is not None:
                decoded[key] = zero
        return decoded

    @classmethod
    def from_wire(cls, doc: Any) -> Self:
        """Validate a document as it appears on the wire: camelCase names only.

        `populate_by_name` lets code write `TaskSpec(min_available=1)`, but a manifest saying `min_available`
        would be pruned by the API server, so in a document it is reported as an unknown field.
        """
        return cls.model_validate(doc, by_alias=True, by_name=False)

    @classmethod
    def from_admission(cls, doc: Any) -> Self:
        """Read a document as Volcano's webhook decodes it: types checked, value rules left to the caller."""
        return cls.model_validate(doc, by_alias=True, by_name=False, context=SHAPE_ONLY)

    def to_wire(self) -> dict[str, Any]:
        """The object as a JSON-ready dict with wire names, holding only what was given or changed."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class OpenModel(VolcanoModel):
    """A Kubernetes-owned type: declared fields are typed, any other field is kept as is."""

    model_config = ConfigDict(extra="allow")


class OwnerReference(OpenModel):
    """`metav1.OwnerReference`; also the `target` of a Command."""

    api_version: Str
    kind: Str
    name: Str
    uid: Str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(OpenModel):
    """The parts of `metav1.ObjectMeta` Lapilli reads; every other metadata field is preserved untouched."""

    name: Str | None = None
    generate_name: Str | None = None
    namespace: Str | None = None
    uid: Str | None = None
    resource_version: Str | None = None
    generation: Annotated[int, Field(strict=True)] | None = None
    # kubectl writes `creationTimestamp: null` into generated manifests, so None must round-trip.
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    labels: dict[str, Str] = Field(default_factory=dict)
    annotations: dict[str, Str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[Str] = Field(default_factory=list)


class LabelSelectorRequirement(VolcanoModel):
    """`metav1.LabelSelectorRequirement`."""

    key: Str
    operator: Str
    values: list[Str] = Field(default_factory=list)


class LabelSelector(VolcanoModel):
    """`metav1.LabelSelector`."""

    match_labels: dict[str, Str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class NetworkTopologyMode(StrEnum):
    """How strictly a job must stay inside one hyper-node tier."""

    HARD = "hard"
    SOFT = "soft"


class NetworkTopologySpec(VolcanoModel):
    """Hyper-node topology constraint of a Job, PodGroup, partition or sub-group.

    `highestTierAllowed` and `highestTierName` are mutually exclusive; the job admission webhook reports that,
    the model does not, so the webhook can phrase the error the way Volcano does.
    """

    mode: Annotated[NetworkTopologyMode, Lenient] = NetworkTopologyMode.HARD
    highest_tier_allowed: Annotated[int, Field(strict=True), at_least(0)] | None = None
    highest_tier_name: Annotated[str, Field(strict=True), named(max_length=253)] | None = None

    def tiers_conflict(self) -> bool:
        """Both tiers named: `highestTierAllowed` set to anything (Go tests the pointer), `highestTierName`
        non-empty."""
        return self.highest_tier_allowed is not None and bool(self.highest_tier_name)


class TopLevelModel(VolcanoModel):
    """A whole API object: `apiVersion` and `kind` are always written, even when the object was built in code.

    Subclasses narrow `api_version` and `kind` to their literal values, so a document of another kind fails.
    """

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def model_post_init(self, context: Any, /) -> None:
        # An object built as `Queue(metadata=...)` must still be a complete Kubernetes object on the wire.
        self.__pydantic_fields_set__.update(("api_version", "kind"))

    @property
    def name(self) -> str:
        """metadata.name, or "" while the object has none yet (generateName)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """metadata.namespace, or "" when unset (cluster-scoped, or left to the request path)."""
        return self.metadata.namespace or ""
