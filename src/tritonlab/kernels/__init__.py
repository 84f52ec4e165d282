"""OpenAI Triton kernels for the models' hot operators (an optional extra: ``tritonlab[kernel]``).

Nothing in tritonlab's serving path imports this package; it is the kernel-level side of the
"two Tritons" link, tested for correctness on CPU in Triton's interpreter
(``TRITON_INTERPRET=1``) and benchmarked on a GPU host (``benchmarks/triton_kernel_gpu.py``).
"""
