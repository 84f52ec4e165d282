"""Re-derive the operator profile a committed run folder stores (``results/operators.json``'s
``profile``: FLOPs and bytes per sample of each heavy operator, read from the ONNX graph; nothing
measured), after a fix to how the graph is read (issue 36 audit: the encoder's attention MatMuls
counted 2 FLOPs behind a computed Reshape).

The model is exported again by tritonlab's built-in exporter and must hash to the sha256 the
run's manifest stored, else nothing is written; the profile is taken at the run's own input
shapes (its first load's sequence length, as ``pipeline/project.py`` does). Every other part of
``operators.json`` (the in-process timings, ceilings, roofline times) is kept as measured.

    python scripts/reprofile_operators.py examples/bert_encoder examples/bert_encoder_sweep
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from tritonlab import gateway
from tritonlab.experiments.store import load_manifest
from tritonlab.models.inputs import with_dynamic_dim
from tritonlab.models.shape_probe import checked_inputs
from tritonlab.models.zoo import export_builtin
from tritonlab.perf.operator_profile import profile_operators
from tritonlab.pipeline.project import load_model_info
from tritonlab.result_files import read_result, write_result
from tritonlab.run_layout import RunLayout


def reprofile(run_dir: Path) -> str:
    """Replace ``run_dir``'s stored profile by the graph's as read now; a line saying what
    changed (total FLOPs per sample before and after)."""
    manifest = load_manifest(run_dir)
    layout = RunLayout(run_dir)
    stored = read_result(layout.operators)
    with gateway.temporary_folder("reprofile-") as folder:
        onnx_path = folder.root / "model.onnx"
        export_builtin(manifest.model.name, onnx_path)
        digest = hashlib.sha256(onnx_path.read_bytes()).hexdigest()
        if digest != manifest.model.sha256:
            return (
                f"{run_dir}: the exported model hashes to {digest[:12]}, the run's to "
                f"{manifest.model.sha256[:12]}: not the run's model, nothing written"
            )
        info = load_model_info(onnx_path)
        inputs = checked_inputs(info)
        length = manifest.plan.loads[0].sequence_length if manifest.plan.loads else None
        if length is not None:
            inputs = with_dynamic_dim(inputs, info, length)
        profile = profile_operators(onnx_path, inputs.shapes, info.batched)
    before = stored["profile"]["flops_per_sample"]
    stored["profile"] = profile.to_dict()
    gateway.ensure_root(run_dir)
    write_result(layout.operators, stored)
    return (
        f"{run_dir}: {before / 1e6:,.2f} -> {profile.flops_per_sample / 1e6:,.2f} MFLOP per sample"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    for run_dir in parser.parse_args().run_dirs:
        print(reprofile(run_dir), file=sys.stdout)


if __name__ == "__main__":
    main()
