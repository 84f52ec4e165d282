"""tune under a replayed trace (``--load-trace``): the policy measures one point per
configuration at the trace's fixed load (no concurrency ramp), qualifies a configuration by
whether it carries the trace, races the close ones, and every reason names the trace instead of
a concurrency. Observations are invented to exercise the policy (no Triton claim rests on
them); the real search under a trace is measured by tests/integration/test_load_trace.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tritonlab.decisions.search import Goal, Knobs, Observation, choose, next_step
from tritonlab.decisions.tune_record import TunePick, TuneSettingsRecord
from tritonlab.perf.trace import KEPT_TO_PCT, read_trace
from tritonlab.perf.trace_gen import TraceSpec, generate, write_trace_csv
from tritonlab.pipeline.tune import TuneSettings

MEAN = 400.0
GOAL = Goal(
    kind="latency",
    p99_budget_us=20_000.0,
    min_throughput_infer_per_s=MEAN * 0.95,
    start=Knobs(),
    fixed_load="under trace bursts",
)


def served(k: Knobs, repeat: int = 0) -> Observation:
    """A configuration under the trace: batching keeps up with the bursts with a short queue;
    one instance without it falls behind; more instances keep up with a longer tail."""
    tail = (1 + 0.3 * (k.instances - 1)) * (1.2 if k.protocol == "http" else 1.0)
    if k.batching:
        p99 = 6_000.0 * tail + 100 * repeat
        return Observation(k, 0, repeat, MEAN, p99, 800.0, 700.0, 900.0, 3.0)
    if k.instances == 1:
        return Observation(k, 0, repeat, MEAN * 0.8, 60_000.0, 9_000.0, 700.0, 700.0, 1.0)
    return Observation(k, 0, repeat, MEAN, 12_000.0 * tail + 100 * repeat, 2_000.0, 700.0, 700.0)


def search(goal: Goal, limit: int = 40) -> list[tuple[str, str, int]]:
    observations: list[Observation] = []
    path = []
    for _ in range(limit):
        step = next_step(observations, goal)
        path.append((step.phase, step.reason, step.concurrency))
        if step.stop:
            break
        assert step.knobs is not None
        observations.append(served(step.knobs, step.repeat))
    best, _runner_up, _why = choose(observations, goal)
    assert best is not None and best.knobs.batching
    return path


def test_one_point_per_configuration_at_the_trace_and_reasons_name_it() -> None:
    path = search(GOAL)
    assert path[0][0] == "ramp" and path[0][2] == 0 and "under trace bursts" in path[0][1]
    measured = [p for p in path if p[0] != "stop"]
    assert all(concurrency == 0 for _phase, _why, concurrency in measured)  # never ramped
    assert not any("concurrency" in why for _phase, why, _c in path), path
    assert any("under trace bursts" in why for phase, why, _c in path if phase == "move")


def test_settings_without_a_trace_keep_their_fingerprint_keys(tmp_path: Path) -> None:
    plain = TuneSettings(replace(GOAL, fixed_load=None))
    stored_plain = plain.stored().to_dict()
    assert "trace" not in stored_plain and "fixed_load" not in stored_plain
    trace_file = tmp_path / "bursts.csv"
    spec = TraceSpec("bursts", 2.0, 400.0, 50.0, 0.5, 0.5, seed=1)
    trace = read_trace(write_trace_csv(generate(spec), trace_file))
    under = TuneSettings(GOAL, trace=trace)
    stored = TuneSettingsRecord.from_dict(under.stored().to_dict())
    assert stored.trace is not None and stored.trace.name == trace.stats.name
    assert stored.as_goal().fixed_load == "under trace bursts"
    assert under.load(Knobs(), 0).trace == trace.stats


def test_a_pick_under_a_trace_says_where_it_was_measured() -> None:
    observations = [served(Knobs(batching=True))]
    best, _, _ = choose(observations, GOAL)
    assert best is not None
    assert TunePick.of(best, GOAL).where() == "under trace bursts"
    assert TunePick.of(best, replace(GOAL, fixed_load=None)).where() == "at concurrency 0"


def test_a_configuration_the_replay_fell_behind_on_does_not_qualify() -> None:
    """The figures of a repeat in which perf_analyzer sent more than KEPT_TO_PCT of the
    requests late were taken under a lighter load than the trace's: carrying them is no proof
    of carrying the trace, so the configuration is not picked, and the next move says why."""
    batching = Knobs(batching=True)
    kept, late = served(batching), replace(served(batching), late_pct=KEPT_TO_PCT + 1)
    assert choose([kept], GOAL)[0] is not None
    best, _, _ = choose([late], GOAL)
    assert best is None
    step = next_step([late], GOAL)
    assert step.phase == "move" and step.knobs != batching
    assert f"sent {KEPT_TO_PCT + 1:.0f}% of the requests late" in step.reason
    # a few late (a busy machine's burst gaps) still counts as the trace's load
    assert choose([replace(kept, late_pct=KEPT_TO_PCT - 1)], GOAL)[0] is not None
    # without a trace the share is not read
    plain = replace(GOAL, fixed_load=None)
    assert choose([replace(late, concurrency=8)], plain)[0] is not None
