"""What a serving knob is: the ``Knob`` record ``knobs.py`` and ``sequence_knobs.py`` fill in,
the value rule a plan's value must meet, and the wording helpers they share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tritonlab.repository.variants import MODEL_BACKENDS, PYTHON_BACKEND, ServingVariant

Wording = Callable[[ServingVariant, ServingVariant], "str | None"]
Change = Callable[[ServingVariant, ServingVariant], str]
# A knob's value in a user's config.pbtxt (protobuf JSON with proto field names), given the
# model's backend: how a repository's own configuration becomes its baseline variant.
ConfigRead = Callable[[dict[str, Any], str], Any]
# The backends a knob applies to by default: the model backends and Triton's Python backend.
ALL_BACKENDS = (*MODEL_BACKENDS, PYTHON_BACKEND)


@dataclass(frozen=True)
class ValueRule:
    """What a plan's value for a knob must be: ``kind`` is bool, int, ints (a list of ints),
    optional_int (null allowed) or choice; ``minimum`` bounds integers."""

    kind: str
    minimum: int = 0
    choices: tuple[str, ...] = ()


def no_wording(_v: ServingVariant, _b: ServingVariant) -> str | None:
    return None


def differs(field_name: str, text: Callable[[ServingVariant], str]) -> Wording:
    """Wording that appears only where the variant's field differs from the baseline's."""

    def wording(v: ServingVariant, b: ServingVariant) -> str | None:
        return text(v) if getattr(v, field_name) != getattr(b, field_name) else None

    return wording


def arrow(label: str, field_name: str) -> Change:
    """``<label> <before> -> <after>``."""

    def wording(before: ServingVariant, after: ServingVariant) -> str:
        return f"{label} {getattr(before, field_name)} -> {getattr(after, field_name)}"

    return wording


@dataclass(frozen=True)
class Knob:
    """One serving knob (see the module docstring for what each part is used for)."""

    plan_name: str  # the plan file's key (Triton's config.pbtxt name)
    field: str  # the ServingVariant field
    label: str  # how a recommendation names it
    value: ValueRule
    section: str  # the top-level config.pbtxt field it writes (no config_overrides entry may)
    slug: Wording  # part of a variant's name where it sets the knob, None: nothing
    describe: Wording  # part of a variant's description, None: nothing
    change: Change  # an explanation's wording
    question: str | None = None  # the background of a comparison that changes only this knob
    batcher: bool = False  # a setting of the dynamic batcher (meaningless with batching off)
    plot_family: bool = False  # a delay sweep's variants share it (all but batching and delay)
    backends: tuple[str, ...] = ALL_BACKENDS
    config: Callable[[ServingVariant], dict[str, Any]] | None = None  # config.pbtxt additions
    server_args: Callable[[Sequence[ServingVariant]], tuple[str, ...]] | None = None
    # The field of tune's search space (``decisions/search_space.Knobs``) that holds it; tune moves
    # batching, max batch, instances and threads.
    tune_field: str | None = None
    # Tune holds it where the user sets it (``tune --hold name=value``), and never moves it.
    tune_held: bool = False
    # Its value in a user's config.pbtxt (``--repository``); None: the field's default.
    read: ConfigRead | None = None
