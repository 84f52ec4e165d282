"""The options that give a model of a Triton repository instead of one ONNX file
(``--repository DIR --model NAME``, ``--step``, ``--reference``), as one group of flags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tritonlab.errors import ConfigError

if TYPE_CHECKING:
    from tritonlab.pipeline.model_choice import RepositoryChoice

RepositoryOpt = Annotated[
    Path | None,
    typer.Option(
        "--repository",
        help="A Triton model repository as it is (with --model): its config.pbtxt is the "
        "baseline; the repository is only read.",
    ),
]
RepoModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="With --repository: the model to measure (a folder in it)."),
]
StepOpt = Annotated[
    str | None,
    typer.Option(
        "--step", help="With --repository and an ensemble: the step whose knobs are varied."
    ),
]
ReferenceOpt = Annotated[
    Path | None,
    typer.Option(
        "--reference",
        help="With --repository: an .npz of inputs and expected outputs (by tensor name) to "
        "check the served answers against (default: shapes and dtypes only, for a Python "
        "model or an ensemble).",
    ),
]


@dataclass(frozen=True)
class RepositoryFlags:
    """A model of a Triton repository as it is, instead of one ONNX file."""

    repository: RepositoryOpt = None
    repo_model: RepoModelOpt = None
    step: StepOpt = None
    reference: ReferenceOpt = None

    def choice(self, positional: object) -> RepositoryChoice | None:
        """The repository model asked for (None: a model file or built-in name), checked as
        ``given`` checks it."""
        from tritonlab.pipeline.model_choice import RepositoryChoice

        if not self.given(positional):
            return None
        assert self.repository is not None and self.repo_model is not None
        return RepositoryChoice(self.repository, self.repo_model, self.step, self.reference)

    def given(self, positional: object) -> bool:
        """Whether a repository model was asked for; a one-line error if it is half given, or
        given with a model file besides."""
        if self.repository is None and self.repo_model is None:
            if self.step or self.reference:
                raise ConfigError("--step and --reference go with --repository DIR --model NAME")
            return False
        if self.repository is None or self.repo_model is None:
            raise ConfigError("--repository and --model go together: the folder, and the model")
        if positional is not None:
            raise ConfigError("give a model file or --repository DIR --model NAME, not both")
        return True
