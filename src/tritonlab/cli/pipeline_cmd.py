"""``pipeline-example``: write the built-in three-step pipeline as a Triton model repository."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import app, out, user_errors


@app.command("pipeline-example")
def pipeline_example(
    out_dir: Annotated[
        Path, typer.Option("--out", help="The repository folder to write (a new folder).")
    ] = Path("pipeline-repo"),
    cnn: Annotated[
        str, typer.Option("--cnn", help="resnet18_cnn (the ResNet-18-shaped CNN) or tiny (fast).")
    ] = "resnet18_cnn",
) -> None:
    """Write a realistic pipeline as a Triton repository: raw frames -> Python preprocessing
    (resize, normalise) -> the CNN -> Python postprocessing (top-k), as an ensemble
    (``pipeline``) and as a BLS model (``pipeline_bls``), with ``reference.npz`` beside them.

    Example: tritonlab pipeline-example --out repo;
    tritonlab run --repository repo --model pipeline --reference repo/reference.npz --out run
    """
    with user_errors():
        from tritonlab.models.pipeline_example import write_pipeline_repository

        written = write_pipeline_repository(out_dir, cnn=cnn)
        out.print(
            f"wrote {written.root}: {', '.join(written.models_to_load)}; reference "
            f"{written.reference_path}",
            highlight=False,
            soft_wrap=True,
        )
