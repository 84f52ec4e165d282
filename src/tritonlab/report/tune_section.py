"""The experiment log's account of a tune: the pick, the runner-up, and the path the search took.

It restates ``results/tune.json``: every step with what was measured, what came back and the
measured figure that motivated it, so a reader can follow (and dispute) each move.
"""

from __future__ import annotations

from typing import Any

from tritonlab.analysis.search_space import Knobs


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1000:.2f}"


def _pick_line(label: str, record: dict[str, Any] | None) -> str:
    if record is None:
        return f"- **{label}**: none."
    thr, p99 = record["throughput_infer_per_s"], record["latency_p99_us"]
    rng = ""
    if record["repeats"] > 1:
        rng = f" ({thr['low']:,.0f}–{thr['high']:,.0f})"
    p99_rng = ""
    if record["repeats"] > 1 and p99["low"] is not None:
        p99_rng = f" ({_ms(p99['low'])}–{_ms(p99['high'])})"
    return (
        f"- **{label}**: {record['description']}, at concurrency {record['concurrency']}: "
        f"{thr['median']:,.0f}{rng} infer/s, p99 {_ms(p99['median'])}{p99_rng} ms "
        f"(median and range of {record['repeats']} repeats)."
    )


def _configuration(step: dict[str, Any]) -> str:
    k = Knobs.from_dict(step.get("configuration") or {})
    batching = "batching" if k.batching else "no batching"
    cache = ", response cache" if k.response_cache else ""
    return (
        f"{k.instances} x, {batching}, max {k.max_batch}, {k.threads or 'default'} thr, "
        f"{k.protocol}{cache}"
    )


def tune_section(tune: dict[str, Any] | None) -> list[str]:
    if not tune:
        return []
    settings = tune.get("settings") or {}
    budget = settings.get("p99_budget_us")
    goal = f"goal {settings.get('goal')}" + (
        f", p99 budget {budget / 1000:g} ms" if budget is not None else ", no latency budget"
    )
    if settings.get("min_throughput_infer_per_s"):
        goal += f", carrying at least {settings['min_throughput_infer_per_s']:,.0f} infer/s"
    lines = [
        "## Tune: the pick and the path to it",
        "",
        f"`tritonlab tune`, {goal}; time budget {settings.get('time_budget_s', 0):.0f} s; "
        f"{tune.get('cells_measured', 0)} cells measured and {tune.get('cells_reused', 0)} "
        f"reused in {tune.get('wall_s', 0):.0f} s.",
        "",
        _pick_line("Pick", tune.get("pick")),
        _pick_line("Runner-up", tune.get("runner_up")),
    ]
    verdict = tune.get("verdict")
    if verdict:
        ci = verdict.get("ci95_change_pct")
        change = verdict.get("change_pct")
        detail = ""
        if change is not None:
            detail = f" ({change:+.0f}%" + (
                f", 95% CI {ci[0]:+.0f}% to {ci[1]:+.0f}%)" if ci else ", no interval)"
            )
        lines.append(
            f"- Runner-up against the pick ({verdict.get('figure')}, paired over the race's "
            f"{verdict.get('pairs')} rounds): {verdict.get('word')}{detail}."
        )
    if tune.get("tie_break"):
        lines.append(f"- Tie broken: {tune['tie_break']}.")
    pick = tune.get("pick")
    if pick and not pick.get("meets_p99_budget_every_repeat", True):
        line = over_budget_line(pick)
        lines.append(f"- {line[0].upper()}{line[1:]}.")
    lines += [
        f"- Why the search stopped: {tune.get('stop_reason') or 'it was interrupted'}.",
        "- The pick's `config.pbtxt`, ready to deploy: `pick/<model>/config.pbtxt`.",
        "",
        "The path: each step's single measurement steers the search (ramp: concurrency "
        "doubled while throughput rose more than the noise margin; move: a neighbour the "
        "figures argue for; race: interleaved repeats of the close contenders, which decide "
        "the pick).",
        "",
        "| # | phase | configuration | conc. | repeat | infer/s | p99 ms | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, step in enumerate(tune.get("steps") or [], 1):
        rate = step.get("throughput_infer_per_s")
        rate_text = "failed" if rate is None else f"{rate:,.0f}"
        stored = " (stored)" if step.get("reused") else ""
        lines.append(
            f"| {i} | {step['phase']} | {_configuration(step)} | {step.get('concurrency')} | "
            f"{step.get('repeat')}{stored} | {rate_text} | {_ms(step.get('latency_p99_us'))} | "
            f"{step['reason']} |"
        )
    lines.append("")
    return lines


def over_budget_line(pick: dict[str, Any]) -> str:
    """What the log and the command say of a pick whose p99 went over the budget in a repeat
    (a point is within the budget when the median of its repeats is: analysis/search.py)."""
    over = pick.get("p99_over_budget_repeats")
    median_us = (pick.get("latency_p99_us") or {}).get("median")
    if over is None or median_us is None:  # a tune.json from before the median rule
        return "no configuration met the p99 budget in every repeat"
    return (
        f"the pick's p99 was over the budget in {over} of its {pick.get('repeats')} repeats; "
        f"their median, {median_us / 1000:.2f} ms, is within it"
    )
