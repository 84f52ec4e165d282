"""Models: the built-in demo model, ONNX export and ONNX inspection."""
