"""The serving path's own cost, measured in the same server run: an identity model.

The ``identity`` Python-based backend echoes every input as an output, so an execution of it
costs what Triton, the Python backend's stub, its IPC and one response per request cost, with no
model run. Two cells at the run's first closed-loop load give the cost model its serving terms:
one without batching (one request per execution) and one whose dynamic batcher waits for as
many requests as are in flight (a long delay with that preferred size, so batches fill). They
are stored apart from the plan's cells (``results/serving_path/``) and measured once per run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from google.protobuf import json_format

from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.store import SERVING_PATH_DIR, cell_path
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.repository.config import ModelConfig, config_dict, write_config
from tritonlab.repository.layout import MODEL_VERSION, RepositoryModel
from tritonlab.repository.variants import ServingVariant, variant_model_name

PROBE_DELAY_US = 100_000  # long enough that a batch always fills to the preferred size
UNBATCHED = "serving_path"
BATCHED = "serving_path_batched"


def probe_load(loads: list[LoadPoint]) -> LoadPoint | None:
    """The first closed-loop load of the plan, with at least 2 requests in flight."""
    closed = [ld for ld in loads if not ld.open_loop and ld.concurrency]
    if not closed:
        return None
    return replace(closed[0], concurrency=max(2, closed[0].concurrency or 2))


def probe_variants(load: LoadPoint, max_batch_size: int) -> list[ServingVariant]:
    in_flight = (load.concurrency or 2) * load.batch_size
    ceiling = max(max_batch_size, in_flight)
    return [
        ServingVariant(
            UNBATCHED,
            "identity model, no batching",
            max_batch_size=ceiling,
            intra_op_threads=None,
        ),
        ServingVariant(
            BATCHED,
            f"identity model, batches of {in_flight}",
            dynamic_batching=True,
            max_queue_delay_us=PROBE_DELAY_US,
            preferred_batch_sizes=(in_flight,),
            max_batch_size=ceiling,
            intra_op_threads=None,
        ),
    ]


def add_identity_model(
    repo_dir: Path, info: OnnxModelInfo, model_name: str, variant: ServingVariant
) -> RepositoryModel:
    """An identity model with ``info``'s inputs; each output echoes the input at its position."""
    served = variant_model_name(model_name, variant)
    config = config_dict(info, variant, served)
    config["backend"] = "identity"
    config.pop("default_model_filename", None)
    config["output"] = [{**tensor, "name": f"echo_{tensor['name']}"} for tensor in config["input"]]
    folder = repo_dir / served
    (folder / MODEL_VERSION).mkdir(parents=True, exist_ok=True)
    write_config(json_format.ParseDict(config, ModelConfig()), folder / "config.pbtxt")
    return RepositoryModel(served, variant, folder)


def probe_cell_id(variant: ServingVariant, load: LoadPoint) -> str:
    return f"{variant.name}__{load.key}__r1"


def probes_done(run_dir: Path, load: LoadPoint, variants: list[ServingVariant]) -> bool:
    return all(
        cell_path(run_dir, probe_cell_id(v, load), SERVING_PATH_DIR).exists() for v in variants
    )
