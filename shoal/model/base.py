"""Shared parts of every Shoal resource: metadata, references, reasons, validation.

Object and namespace names are Krake's (``system:admin``, ``heat_demand_zone_1``,
``GlobalInfrastructureProvider_instance``); where one goes onto a member cluster
it is mapped there (``shoal.machinery.names.kube_label_value``). Label keys and
values follow Kubernetes rules so that they can be used on member clusters unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
)

from shoal.machinery.names import DNS_SUBDOMAIN, QUALIFIED_NAME, object_name_problem
from shoal.model import catalog
from shoal.model.shape import addition

_FINALIZER_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$")


TRUSTED: dict[str, bool] = {"trusted": True}
"""Validation context for objects read back from the API: they were checked when written.

Validators that are expensive and only guard the API's input (manifests,
constraint grammars, kubeconfigs) skip themselves under this context; the
informers decode every event with it.
"""


def trusted(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("trusted"))


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_name(value: str) -> str:
    if (reason := object_name_problem(value)) is not None:
        raise ValueError(reason)
    return value


def check_label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"label key prefix {prefix!r} must be a DNS subdomain")
    if not 1 <= len(name) <= 63 or not QUALIFIED_NAME.match(name):
        raise ValueError(
            f"label key {value!r} must be at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (optionally behind a 'prefix/')"
        )
    return value


def check_label_value(value: str) -> str:
    if value and (len(value) > 63 or not QUALIFIED_NAME.match(value)):
        raise ValueError(
            f"label value {value!r} must be empty or at most 63 letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit"
        )
    return value


def _check_finalizer(value: str) -> str:
    if not 1 <= len(value) <= 253 or not _FINALIZER_RE.match(value):
        raise ValueError("finalizer must be 1 to 253 letters, digits, '-', '_', '.' or '/'")
    return value


def null_as(default: Callable[[], Any]) -> BeforeValidator:
    """Read ``null`` as Krake's default: Krake refuses null where its schema has a default.

    Objects stored by older Shoal versions carry such nulls; they load as the default.
    """
    return BeforeValidator(lambda value: default() if value is None else value)


def _moment_text(value: Any) -> Any:
    """Only an RFC 3339 string (or a datetime) is a moment: lax parsing took ``0`` as 1970."""
    if not isinstance(value, str | datetime):
        raise ValueError("must be an RFC 3339 date-time string")
    return value


#: A datetime the schema calls a string: numbers and booleans are refused, not coerced.
Moment = Annotated[datetime, BeforeValidator(_moment_text)]
Name = Annotated[str, AfterValidator(check_name)]
LabelKey = Annotated[str, AfterValidator(check_label_key)]
LabelValue = Annotated[str, AfterValidator(check_label_value)]
Finalizer = Annotated[str, AfterValidator(_check_finalizer)]


class Model(BaseModel):
    """Base of all wire models: unknown fields are errors, so typos are caught."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class ResourceRef(Model):
    api: str
    namespace: str | None = None
    kind: str
    name: str


class Metadata(Model):
    name: Name
    namespace: str | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    inherit_labels: bool = addition(False)
    finalizers: list[Finalizer] = Field(default_factory=list)
    uid: str | None = None
    created: datetime | None = None
    modified: datetime | None = None
    deleted: datetime | None = None
    owners: list[ResourceRef] = Field(default_factory=list)
    resource_version: int | None = Field(
        default=None,
        description="Store revision of the last change; send it back for compare-and-swap.",
    )


class ListMetadata(Model):
    resource_version: int
    continue_: str | None = Field(default=None, alias="continue")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _enum_by_name(enum: type[IntEnum]) -> Any:
    def parse(value: Any) -> Any:
        if isinstance(value, enum):
            return value
        if isinstance(value, str):
            try:
                return enum[value]
            except KeyError:
                names = ", ".join(enum.__members__)
                raise ValueError(f"unknown value {value!r}; expected one of {names}") from None
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return enum(value)
            except ValueError:
                raise ValueError(f"unknown code {value}") from None
        raise ValueError("must be a string")

    return parse


class ReasonCode(IntEnum):
    """Why a resource is in trouble. Codes of 100 and more make the controller delete it."""

    INTERNAL_ERROR = 1
    INVALID_RESOURCE = 10
    CLUSTER_NOT_REACHABLE = 11
    RESOURCE_NOT_FOUND = 12
    CLUSTER_DELETED = 13  # its cluster was deleted; waits for another (Shoal addition)
    INVALID_TOSCA_MANIFEST = 14
    NO_SUITABLE_RESOURCE = 50
    KUBERNETES_ERROR = 60
    CREATE_FAILED = 70
    RECONCILE_FAILED = 71
    RECONFIGURE_FAILED = 72
    DELETE_FAILED = 73
    RETRIEVE_FAILED = 75
    CONFLICT = 74  # an object in the member cluster belongs to another application
    INVALID_METRIC = 91
    UNREACHABLE_METRICS_PROVIDER = 92
    UNKNOWN_METRIC = 93
    UNKNOWN_METRICS_PROVIDER = 94


ReasonCodeName = Annotated[
    ReasonCode,
    BeforeValidator(_enum_by_name(ReasonCode)),
    PlainSerializer(lambda code: code.name, return_type=str),
    WithJsonSchema({"type": "string", "enum": list(ReasonCode.__members__)}),
]


class Reason(Model):
    code: ReasonCodeName
    message: str = ""


class Kind(Model):
    """Base of every stored kind. Subclasses set the class variables below, but for
    ``plural`` and ``namespaced``: those come from the kind's entry in
    ``shoal.model.catalog``, the one place they are written (printing reads them there
    without the models)."""

    api: str
    kind: str
    metadata: Metadata

    plural: ClassVar[str]  # from the catalog
    namespaced: ClassVar[bool]  # from the catalog
    subresources: ClassVar[tuple[str, ...]] = ()
    # Created in batches too (``POST /{api}/{plural}``, shoal.api.creates): kinds made in
    # bulk, without secret fields (a batch's answer shows each object as written).
    created_in_batches: ClassVar[bool] = False

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A kind (with its ``api`` and ``kind`` set; not an abstract base) takes its plural
        and scope from its catalog entry; a kind the catalog lacks is an error here."""
        super().__pydantic_init_subclass__(**kwargs)
        api, kind = cls.model_fields["api"].default, cls.model_fields["kind"].default
        if not (isinstance(api, str) and isinstance(kind, str)):
            return
        try:
            entry = catalog.entry_of(api, kind)
        except KeyError:
            raise TypeError(f"{api}/{kind} has no entry in shoal.model.catalog") from None
        cls.plural, cls.namespaced = entry.plural, entry.namespaced

    @classmethod
    def key_prefix(cls, namespace: str | None = None) -> str:
        """Store key prefix of this kind, or of one namespace of it."""
        base = f"/{cls.model_fields['api'].default}/{cls.plural}/"
        if cls.namespaced and namespace is not None:
            return f"{base}{namespace}/"
        return base

    @classmethod
    def key(cls, name: str, namespace: str | None = None) -> str:
        if cls.namespaced:
            return f"{cls.key_prefix(namespace or '')}{name}"
        return f"{cls.key_prefix()}{name}"

    def initial_status(self) -> Any:
        """The status a create starts from: status belongs to the controllers, not the client."""
        field = type(self).model_fields.get("status")
        if field is None or field.default_factory is None:
            return None
        return field.default_factory()  # type: ignore[call-arg]

    def store_key(self) -> str:
        return self.key(self.metadata.name, self.metadata.namespace)

    def ref(self) -> ResourceRef:
        return ResourceRef(
            api=self.api, kind=self.kind, namespace=self.metadata.namespace, name=self.metadata.name
        )

    @classmethod
    def api_name(cls) -> str:
        return str(cls.model_fields["api"].default)

    @classmethod
    def kind_name(cls) -> str:
        return str(cls.model_fields["kind"].default)


class StrEnumByName(StrEnum):
    """String enum whose wire form is the member name (as Krake sends it)."""
