"""The step models of the built-in pipeline (:mod:`tritonlab.models.pipeline_example`).

Each module here is copied unchanged into a model folder as ``1/model.py`` and runs in Triton's
Python backend; ``preprocess`` and ``postprocess`` are also imported in-process, so the reference
answer is computed by the very code the server runs. They import only numpy and the standard
library at module level (``triton_python_backend_utils`` exists only inside the backend's stub,
so it is imported where the Triton model needs it).
"""

from pathlib import Path

STEPS_DIR = Path(__file__).parent
