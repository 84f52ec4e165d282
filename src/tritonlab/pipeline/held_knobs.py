"""The knobs tune holds where the user sets them and never moves (the knob table's
``tune_held``): read from a repository's own configuration, or from ``tune --hold name=value``."""

from __future__ import annotations

from typing import Any

import yaml

from tritonlab.errors import PlanError
from tritonlab.experiments.plan_checks import PlanChecker
from tritonlab.repository.knobs import HELD_KNOBS, KNOBS
from tritonlab.repository.variants import ServingVariant


def held_of(variant: ServingVariant) -> tuple[tuple[str, Any], ...]:
    """The held knobs (the table's ``tune_held``) ``variant`` sets away from their defaults."""
    default = ServingVariant("", "")
    return tuple(
        (k.field, getattr(variant, k.field))
        for k in KNOBS
        if k.tune_held and getattr(variant, k.field) != getattr(default, k.field)
    )


def parse_holds(holds: list[str]) -> tuple[tuple[str, Any], ...]:
    """``tune --hold name=value`` entries as held knobs: a knob tune holds (``HELD_KNOBS``), its
    value a YAML scalar the knob's value rule accepts; ``PlanError`` in one line otherwise."""
    check, held = PlanChecker("--hold"), {}
    for entry in holds:
        name, sep, text = entry.partition("=")
        if name not in HELD_KNOBS or not sep:
            raise PlanError(
                f"--hold {entry}: give name=value, the name one of {', '.join(HELD_KNOBS)} "
                "(tune moves the other knobs itself)"
            )
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        held[HELD_KNOBS[name].field] = check.knob(name, value, name)
    return tuple(held.items())
