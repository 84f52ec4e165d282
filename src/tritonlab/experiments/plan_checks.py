"""Type checks of a sweep plan file that name the file and the key path in every error, and
the configuration knobs a plan may set (YAML name -> ``ServingVariant`` field)."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tritonlab.errors import PlanError
from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.plan_limits import (
    KNOB_CAPS,
    MAX_LIST_VALUES,
    MAX_LOADS,
    MAX_VARIANTS,
    count_words,
    load_problem,
    over_limit,
)
from tritonlab.repository.config import override_problem
from tritonlab.repository.knobs import KNOB_BY_PLAN_NAME
from tritonlab.repository.knobs import KNOBS as KNOB_TABLE

# YAML knob name -> ServingVariant field (from the knob table).
KNOBS = {k.plan_name: k.field for k in KNOB_TABLE}
# The changes' key for ModelConfig sections passed through as given (``ServingVariant``).
OVERRIDES_KEY = "config_overrides"
T = TypeVar("T")


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 3, 8, 8, 60, 60


def shown(value: Any) -> str:
    """``value`` as an error quotes it, in at most about 80 characters whatever it is: a plan
    may hold a huge value (an int of thousands of digits, a YAML alias bomb), and quoting one
    whole could take longer than reading the file."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        return count_words(value)
    try:
        text = _REPR.repr(value)
    except ValueError:  # an int too long to print, deep inside
        text = f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


class PlanChecker:
    """Type checks that name the plan file and the key path in every error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> PlanError:
        """A ``PlanError`` naming the plan file and ``path``, for the caller to raise."""
        return PlanError(f"{self.source}: {path}: {message}")

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        """``value`` if it is a mapping with only ``allowed`` keys; ``PlanError`` otherwise."""
        if not isinstance(value, dict):
            raise self.fail(path or "(top)", f"must be a mapping, got {shown(value)}")
        for key in value:
            if key not in allowed:
                raise self.fail(
                    f"{path}.{key}" if path else str(key),
                    f"unknown key; allowed: {', '.join(allowed)}",
                )
        return value

    def integer(self, value: Any, path: str, minimum: int, maximum: int | None = None) -> int:
        """``value`` if an integer (not a bool) of at least ``minimum`` (and at most
        ``maximum``, a bound of ``plan_limits``); else ``PlanError``."""
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(path, f"must be an integer >= {minimum}, got {shown(value)}")
        if maximum is not None and value > maximum:
            raise self.fail(path, over_limit(value, maximum))
        return value

    def number(self, value: Any, path: str, positive: bool = True) -> float:
        """``value`` as a float if finite (and > 0 when ``positive``); else ``PlanError``."""
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and isinstance(value, int):
            ok = abs(value) < 10**300  # float() of a longer int overflows
        if not ok or not math.isfinite(value) or (positive and value <= 0):
            raise self.fail(path, f"must be a number > 0, got {shown(value)}")
        return float(value)

    def boolean(self, value: Any, path: str) -> bool:
        """``value`` if it is true or false; ``PlanError`` otherwise."""
        if not isinstance(value, bool):
            raise self.fail(path, f"must be true or false, got {shown(value)}")
        return value

    def choice(self, value: Any, path: str, choices: tuple[str, ...]) -> str:
        """``value`` if it is one of ``choices``; ``PlanError`` otherwise."""
        if value not in choices:
            raise self.fail(path, f"must be one of {', '.join(choices)}, got {shown(value)}")
        return str(value)

    def items(self, value: Any, path: str) -> list[Any]:
        """A non-empty list of at most ``MAX_LIST_VALUES``; a single scalar is read as a list
        of one."""
        items = value if isinstance(value, list) else [value]
        if not items:
            raise self.fail(path, "must not be empty")
        if len(items) > MAX_LIST_VALUES:
            raise self.fail(path, over_limit(len(items), MAX_LIST_VALUES, "values"))
        return items

    def each(self, value: Any, path: str, read: Callable[..., T], *args: Any) -> list[T]:
        """Every one of ``items(value, path)``, read by ``read`` at its own path (``path[i]``)."""
        return [read(v, f"{path}[{i}]", *args) for i, v in enumerate(self.items(value, path))]

    def knob(self, name: str, value: Any, path: str) -> Any:
        """One configuration knob's value, as the ServingVariant field wants it (the knob
        table's value rule says what is allowed)."""
        knob = KNOB_BY_PLAN_NAME.get(name)
        if knob is None:  # pragma: no cover - mapping() refused unknown keys already
            raise self.fail(path, f"unknown knob; allowed: {', '.join(KNOBS)}")
        rule, cap = knob.value, KNOB_CAPS.get(name)
        if rule.kind == "bool":
            return self.boolean(value, path)
        if rule.kind == "ints":
            sizes = value if isinstance(value, list) else [value]
            if len(sizes) > MAX_LIST_VALUES:
                raise self.fail(path, over_limit(len(sizes), MAX_LIST_VALUES, "values"))
            return tuple(
                self.integer(v, f"{path}[{i}]", rule.minimum, cap) for i, v in enumerate(sizes)
            )
        if rule.kind == "optional_int" and value is None:
            return None
        if rule.kind == "choice":
            return self.choice(value, path, rule.choices)
        return self.integer(value, path, rule.minimum, cap)

    def changes(self, value: Any, path: str) -> dict[str, Any]:
        """A configuration's knob changes by ``ServingVariant`` field, and its
        ``config_overrides`` (sections of Triton's ModelConfig tritonlab does not write, in
        protobuf JSON); ``PlanError`` if invalid."""
        data = self.mapping(value, path, (*KNOBS, OVERRIDES_KEY))
        changes = {KNOBS[k]: self.knob(k, v, f"{path}.{k}") for k, v in data.items() if k in KNOBS}
        if OVERRIDES_KEY in data:
            where = f"{path}.{OVERRIDES_KEY}"
            overrides = data[OVERRIDES_KEY]
            if not isinstance(overrides, dict) or not overrides:
                raise self.fail(
                    where, f"must map config sections to values, got {shown(overrides)}"
                )
            if (problem := override_problem(overrides)) is not None:
                raise self.fail(f"{where}.{problem.split(':', 1)[0]}", problem.split(": ", 1)[1])
            changes["config_overrides"] = dict(overrides)
        return changes


def check_variant_count(check: PlanChecker, data: dict[str, Any]) -> None:
    """Refuse a plan whose axes and combined variants are more than ``MAX_VARIANTS``
    configurations (baseline and anchor included), before any of them is built."""
    axes, combined = data.get("axes", {}), data.get("combined", [])
    count = 1 + ("anchor" in data) + (len(combined) if isinstance(combined, list) else 0)
    if isinstance(axes, dict):
        count += sum(len(v) if isinstance(v, list) else 1 for v in axes.values())
    if count > MAX_VARIANTS:
        what = (
            "configurations (the baseline, the anchor, every axis value and every combined variant)"
        )
        key = "axes" if isinstance(axes, dict) and axes else "combined"
        raise check.fail(key, over_limit(count, MAX_VARIANTS, what))


def check_load_limits(check: PlanChecker, loads: Sequence[LoadPoint]) -> None:
    """Refuse a load over its bound: a client batch size, a sequence length, one request's
    input elements (``plan_limits.load_problem``), or more than ``MAX_LOADS`` load points."""
    for load in loads:
        if (problem := load_problem(load.batch_size, load.sequence_length)) is not None:
            raise check.fail(f"loads.{problem[0]}", problem[1])
    if len(loads) > MAX_LOADS:
        raise check.fail("loads", over_limit(len(loads), MAX_LOADS, "load points"))
