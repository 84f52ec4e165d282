"""Shared pytest fixtures: where the recorded fixtures live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonlab import gateway

FIXTURES_DIR = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session", autouse=True)
def _test_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary folders, open for the library calls of tests and their
    fixtures, as a command opens the folder it writes (``tritonlab.gateway.open_root``)."""
    base = tmp_path_factory.getbasetemp()
    gateway.open_root(base)
    return base


@pytest.fixture(autouse=True)
def _gateway_roots(request: pytest.FixtureRequest, _test_root: Path) -> Iterator[None]:
    """No root a test opens outlives it; a test marked ``closed_roots`` starts with none open,
    as a fresh process does."""
    if request.node.get_closest_marker("closed_roots") is not None:
        gateway.close_all()
    yield
    gateway.close_all()
    gateway.open_root(_test_root)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``tests/fixtures``: recorded perf_analyzer output and a recorded seed run folder."""
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def perf_fixtures_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir / "perf"


@pytest.fixture(scope="session")
def seed_run_dir(fixtures_dir: Path) -> Path:
    """A real run folder (``results/cells``, manifest, ...) of the seed comparison. Read-only."""
    return fixtures_dir / "seed_run"


# The slowest tests (``make test --durations``, CI of 2026-12-02), slowest first: started first,
# so the two xdist workers do not end on one long test while the other idles. (The stub test,
# 218 s there, moved down: its reloads no longer wait out an unload Triton never finishes.)
SLOWEST_FIRST = (
    "tests/integration/test_sweep.py::test_sweep_interrupt_resume_rates_and_report",
    "tests/integration/test_ray_cluster.py::test_sweep_on_two_nodes_survives_a_lost_node_and_resumes",
    "tests/integration/test_cli_project.py::test_adaptive_repeats_measure_more_rounds_only_where_undecided",
    "tests/integration/test_faults.py::test_killed_backend_stub_is_retried_after_a_reload",
    "tests/integration/test_server_death.py::test_demo_survives_its_server_killed_after_the_1st_4th_and_8th_cell",
    "tests/integration/test_faults.py::test_hung_perf_analyzer_is_killed_at_its_deadline_and_retried",
    "tests/integration/test_cli_project.py::test_ctrl_c_stops_everything_keeps_cells_and_resumes",
    "tests/integration/test_faults.py::test_sigterm_stops_cleanly_and_the_rerun_resumes",
    "tests/integration/test_faults.py::test_truncated_and_old_schema_cells_on_resume",
    "tests/integration/test_tune.py::test_tune_stops_at_its_budget_resumes_and_explains_its_pick",
    "tests/integration/test_repository_input.py::test_run_on_a_users_onnx_config_starts_from_it",
    "tests/integration/test_any_model.py::test_token_id_model_with_three_int64_inputs",
    "tests/integration/test_backends.py::test_onnxruntime_and_openvino_in_one_sweep",
    "tests/integration/test_faults.py::test_killed_server_mid_sweep_is_restarted_and_the_sweep_finishes",
    "tests/integration/test_cli_project.py::test_run_on_an_unseen_two_input_model",
    "tests/integration/test_exposure.py::test_paths_with_spaces_and_quotes",
    "tests/integration/test_repository_input.py::test_run_and_tune_on_a_bls_model",
    "tests/integration/test_ray_cluster.py::test_tune_measures_on_a_cluster_node",
    "tests/integration/test_any_model.py::test_sequence_length_is_a_sweep_axis",
    "tests/integration/test_any_model.py::test_run_on_dtypes_and_several_outputs",
    "tests/integration/test_server_death.py::test_classic_demo_survives_its_server_killed_between_cells_in_a_load_and_in_the_probes",
    "tests/integration/test_repository_input.py::test_tune_on_a_users_onnx_config_and_on_an_ensemble",
    "tests/integration/test_faults.py::test_a_full_disk_mid_run_loses_nothing_and_resumes",
    "tests/integration/test_repository_input.py::test_run_on_an_ensemble_varies_the_step_that_binds",
    "tests/integration/test_experiment.py::test_run_experiment_stores_cells_resumes_and_reports",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the slowest tests first (the rest keep their order)."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("[")[0], len(rank))

    items.sort(key=key)
