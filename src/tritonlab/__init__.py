"""tritonlab: from an ONNX file to a served, measured and explained Triton deployment."""

__version__ = "0.1.0"
