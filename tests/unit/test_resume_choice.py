"""A resume keeps the configuration set its run chose with ``--configs auto``."""

from __future__ import annotations

from pathlib import Path


def test_a_resume_keeps_the_configuration_set_its_run_chose(tmp_path: Path) -> None:
    """A fresh-clone CI run: the first run timed the model at 0.02 ms (the seed's set), its
    resume under load at 1.20 ms (the compute set), so the resume was refused as another plan.
    A stored auto choice is kept with its note; without one the model is timed as before."""
    import json

    from tritonlab.pipeline.project import _stored_auto_choice

    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    assert _stored_auto_choice(run) is None
    note = "Configuration set `seed` chosen automatically: one batch-1 execution took 0.02 ms"
    manifest = json.loads(
        (
            Path(__file__).parents[1] / "fixtures" / "seed_run" / "results" / "manifest.json"
        ).read_text()
    )
    manifest["plan"]["notes"] = ["another note", note]
    (run / "results" / "manifest.json").write_text(json.dumps(manifest))
    assert _stored_auto_choice(run) == ("seed", note)
