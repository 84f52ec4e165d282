"""Benchmark (GPU host only): the demo MLP's fused linear + bias + ReLU as an OpenAI Triton
kernel (``tritonlab.kernels.fused_linear``) against torch (cuBLAS + a ReLU), across batch sizes,
placed on the GPU's own roofline.

    python benchmarks/triton_kernel_gpu.py --out benchmarks/results      # needs CUDA

What it measures, on the first CUDA device:
- the GPU's ceilings: memory bandwidth (a device-to-device copy of 1 GiB, 2 bytes moved per
  byte copied) and the fp32 and tf32 GEMM rates (torch.matmul of 8192² matrices);
- for the MLP's first layer (K=256 -> N=1024, the model's own weights) at batch 1 .. 4096: the
  Triton kernel (exact fp32 and tf32) and torch's ``relu(linear(x))`` (cuBLAS; fp32 and tf32),
  each timed with ``triton.testing.do_bench`` (median of its repeats, in ms), checked against
  the fp32 torch result before it is timed;
- each point's arithmetic intensity (graph arithmetic: weights once, activations per sample)
  and achieved FLOP/s, and the ceiling that binds it.

Writes ``triton_kernel_gpu.{json,md}`` and ``triton_kernel_gpu_roofline.png`` under ``--out``,
with the device named. Without a CUDA device it says so in one line and writes nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

BATCHES = (1, 8, 64, 256, 1024, 4096)
DEMO_ONNX = ROOT / "examples" / "simple_mlp" / "simple_mlp.onnx"


def _bench(fn: Any) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100))  # ms, median


def ceilings(torch: Any) -> dict[str, float]:
    n = 1 << 28  # fp32 elements: 1 GiB
    a = torch.empty(n, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)
    copy_ms = _bench(lambda: b.copy_(a))
    size = 8192
    x = torch.randn((size, size), device="cuda", dtype=torch.float32)
    y = torch.randn((size, size), device="cuda", dtype=torch.float32)
    rates = {}
    for label, tf32 in (("fp32", False), ("tf32", True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ms = _bench(lambda: torch.matmul(x, y))
        rates[f"gemm_{label}_flop_per_s"] = 2 * size**3 / (ms * 1e-3)
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"bandwidth_bytes_per_s": 2 * a.nbytes / (copy_ms * 1e-3), **rates}


def run(out: Path) -> int:
    try:
        import torch
    except ImportError:
        print(
            "benchmarks/triton_kernel_gpu.py: needs torch and triton (pip install "
            "'tritonlab[kernel]') and a CUDA GPU; nothing was measured"
        )
        return 2
    if not torch.cuda.is_available():
        print(
            "benchmarks/triton_kernel_gpu.py: no CUDA device here; GPU figures were not "
            "measured (run it on a GPU host)"
        )
        return 2
    from tritonlab.kernels.fused_linear import linear_bias_relu, linear_layers

    device = torch.cuda.get_device_name(0)
    machine = ceilings(torch)
    weight_np, bias_np, _ = linear_layers(DEMO_ONNX)[0]
    w = torch.from_numpy(weight_np.copy()).cuda()
    b = torch.from_numpy(bias_np.copy()).cuda()
    n, k = w.shape
    rows = []
    for m in BATCHES:
        x = torch.randn((m, k), device="cuda", dtype=torch.float32)
        torch.backends.cuda.matmul.allow_tf32 = False
        reference = torch.relu(torch.nn.functional.linear(x, w, b))
        flops = 2 * m * n * k
        moved = 4 * (n * k + n + m * k + m * n)
        variants = {
            "triton fp32": lambda x=x: linear_bias_relu(x, w, b, input_precision="ieee"),
            "triton tf32": lambda x=x: linear_bias_relu(x, w, b, input_precision="tf32"),
            "torch fp32": lambda x=x: torch.relu(torch.nn.functional.linear(x, w, b)),
        }
        for name, fn in variants.items():
            got = fn()
            tolerance = 1e-4 if "fp32" in name else 5e-2
            error = float((got - reference).abs().max())
            if error > tolerance * max(1.0, float(reference.abs().max())):
                raise SystemExit(f"{name} at batch {m}: max abs error {error:.3g} vs torch fp32")
            ms = _bench(fn)
            rows.append(
                {
                    "kernel": name,
                    "batch": m,
                    "ms": ms,
                    "max_abs_error": error,
                    "flop_per_s": flops / (ms * 1e-3),
                    "intensity_flop_per_byte": flops / moved,
                }
            )
        torch.backends.cuda.matmul.allow_tf32 = True
        ms = _bench(lambda x=x: torch.relu(torch.nn.functional.linear(x, w, b)))
        rows.append(
            {
                "kernel": "torch tf32",
                "batch": m,
                "ms": ms,
                "max_abs_error": None,
                "flop_per_s": flops / (ms * 1e-3),
                "intensity_flop_per_byte": flops / moved,
            }
        )
        torch.backends.cuda.matmul.allow_tf32 = False
    for row in rows:
        peak = machine[
            "gemm_tf32_flop_per_s" if "tf32" in row["kernel"] else "gemm_fp32_flop_per_s"
        ]
        attainable = min(peak, machine["bandwidth_bytes_per_s"] * row["intensity_flop_per_byte"])
        row["attainable_flop_per_s"] = attainable
        row["binding"] = (
            "memory bandwidth"
            if machine["bandwidth_bytes_per_s"] * row["intensity_flop_per_byte"] < peak
            else "compute"
        )
    record = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "device": device,
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "layer": {"in": k, "out": n, "source": "examples/simple_mlp/simple_mlp.onnx, first Gemm"},
        "ceilings": machine,
        "rows": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "triton_kernel_gpu.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        "# The fused linear + bias + ReLU kernel on a GPU",
        "",
        f"Measured {record['date_utc']} UTC on {device} (torch {record['torch']}, triton "
        f"{record['triton']}); layer {k} -> {n} of the demo MLP; `do_bench` medians. Ceilings: "
        f"{machine['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s (copy), GEMM "
        f"{machine['gemm_fp32_flop_per_s'] / 1e12:,.1f} TFLOP/s fp32, "
        f"{machine['gemm_tf32_flop_per_s'] / 1e12:,.1f} TFLOP/s tf32.",
        "",
        "| kernel | batch | µs | GFLOP/s | FLOP/byte | binding | share of attainable |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['batch']} | {r['ms'] * 1e3:,.1f} | {r['flop_per_s'] / 1e9:,.0f} "
            f"| {r['intensity_flop_per_byte']:.1f} | {r['binding']} | "
            f"{r['flop_per_s'] / r['attainable_flop_per_s']:.0%} |"
        )
    (out / "triton_kernel_gpu.md").write_text("\n".join(lines) + "\n")
    _plot(record, out / "triton_kernel_gpu_roofline.png")
    print("\n".join(lines))
    return 0


def _plot(record: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = record["ceilings"]
    xs = sorted(r["intensity_flop_per_byte"] for r in record["rows"])
    lo, hi = xs[0] / 4, xs[-1] * 4
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, style in (("gemm_fp32_flop_per_s", "-"), ("gemm_tf32_flop_per_s", "--")):
        ridge = c[key] / c["bandwidth_bytes_per_s"]
        ax.plot(
            [lo, ridge, hi],
            [c["bandwidth_bytes_per_s"] * lo / 1e9, c[key] / 1e9, c[key] / 1e9],
            "k" + style,
            label=f"ceiling ({key.split('_')[1]})",
        )
    for kernel in dict.fromkeys(r["kernel"] for r in record["rows"]):
        rows = [r for r in record["rows"] if r["kernel"] == kernel]
        ax.plot(
            [r["intensity_flop_per_byte"] for r in rows],
            [r["flop_per_s"] / 1e9 for r in rows],
            "o-",
            label=kernel,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP per byte (batch 1 .. 4096)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Fused linear + bias + ReLU on {record['device']}")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    raise SystemExit(run(parser.parse_args().out))


if __name__ == "__main__":
    main()
