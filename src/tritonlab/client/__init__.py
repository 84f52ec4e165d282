"""Inference client: one validated request over HTTP or gRPC, checked against onnxruntime."""
