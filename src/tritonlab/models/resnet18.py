"""``resnet18_cnn``: a ResNet-18-shaped CNN written by hand in ``torch.nn`` (no torchvision).

A 7x7/2 stem convolution and 3x3/2 max-pool, BasicBlocks [2, 2, 2, 2] at 64-128-256-512 channels
with BatchNorm, global average pooling and a 1000-way linear layer. Input ``image`` float32
[batch, 3, 224, 224], output ``logits`` [batch, 1000]; only the batch axis is dynamic.

Seeded BatchNorm with arbitrary statistics would let activations grow block after block, so its
statistics and affine parameters stay near the identity and the last BatchNorm of each residual
branch is scaled to gamma 0.2: logits stay O(1). 11.69 M parameters, ~3.63 GFLOP per image,
~33 ms per image in onnxruntime on one thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tritonlab.models.demo import ExportCheck
from tritonlab.models.torch_export import ZOO_SEED, VerifyCase, export_verified, require_torch

if TYPE_CHECKING:
    import torch

RESNET18_NAME = "resnet18_cnn"
RESNET18_IMAGE_CHANNELS = 3
RESNET18_IMAGE_PIXELS = 224
RESNET18_STAGE_CHANNELS = (64, 128, 256, 512)
RESNET18_STAGE_BLOCKS = (2, 2, 2, 2)
RESNET18_CLASSES = 1000
# gamma of the last BatchNorm of each residual branch: keeps the residual sum O(1) (see above).
RESNET18_RESIDUAL_GAMMA = 0.2
RESNET18_CHECK_BATCH_SIZES = (1, 2)
# Convolutions with up to 4608-long reductions, summed in another order by ORT (and with
# BatchNorm folded into the convolutions): relative to the largest |logit|.
RESNET18_TOLERANCE_REL = 1e-4


def _build_resnet18(seed: int) -> torch.nn.Module:
    """ResNet-18 (BasicBlocks [2, 2, 2, 2]): seeded weights, BatchNorm near the identity."""
    require_torch()
    import torch

    class BasicBlock(torch.nn.Module):
        def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(out_channels)
            self.conv2 = torch.nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(out_channels)
            self.relu = torch.nn.ReLU()
            self.downsample: torch.nn.Module | None = None
            if stride != 1 or in_channels != out_channels:
                self.downsample = torch.nn.Sequential(
                    torch.nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                    torch.nn.BatchNorm2d(out_channels),
                )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + identity)

    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = [
        torch.nn.Conv2d(RESNET18_IMAGE_CHANNELS, RESNET18_STAGE_CHANNELS[0], 7, 2, 3, bias=False),
        torch.nn.BatchNorm2d(RESNET18_STAGE_CHANNELS[0]),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
    ]
    in_channels = RESNET18_STAGE_CHANNELS[0]
    for stage, (channels, blocks) in enumerate(
        zip(RESNET18_STAGE_CHANNELS, RESNET18_STAGE_BLOCKS, strict=True)
    ):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(BasicBlock(in_channels, channels, stride))
            in_channels = channels
    layers += [
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(in_channels, RESNET18_CLASSES),
    ]
    model = torch.nn.Sequential(*layers)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, torch.nn.BatchNorm2d):
                channels = module.num_features
                module.weight.copy_(1.0 + 0.1 * torch.randn(channels))
                module.bias.copy_(0.1 * torch.randn(channels))
                running_mean, running_var = module.running_mean, module.running_var
                if running_mean is not None and running_var is not None:  # tracked: always
                    running_mean.copy_(0.1 * torch.randn(channels))
                    running_var.copy_(0.8 + 0.4 * torch.rand(channels))
        for module in model.modules():
            if isinstance(module, BasicBlock):
                module.bn2.weight.mul_(RESNET18_RESIDUAL_GAMMA)
    return model.eval()


def export_resnet18_cnn(onnx_path: Path, seed: int = ZOO_SEED) -> ExportCheck:
    """Export the CNN with a dynamic batch axis; verify it with ORT against PyTorch on
    standard-normal images (``ModelError`` on a mismatch)."""
    model = _build_resnet18(seed)
    rng = np.random.default_rng(seed)
    image_shape = (RESNET18_IMAGE_CHANNELS, RESNET18_IMAGE_PIXELS, RESNET18_IMAGE_PIXELS)
    cases = [
        VerifyCase({"image": rng.standard_normal((batch, *image_shape), dtype=np.float32)})
        for batch in RESNET18_CHECK_BATCH_SIZES
    ]
    return export_verified(
        model,
        onnx_path,
        {"image": np.zeros((1, *image_shape), dtype=np.float32)},
        ["logits"],
        {"image": {0: "batch"}, "logits": {0: "batch"}},
        cases,
        RESNET18_TOLERANCE_REL,
        RESNET18_CHECK_BATCH_SIZES,
    )


def resnet18_summary() -> str:
    """The registry's one-line summary: layout, input and output, GFLOP per image, parameters."""
    return (
        "ResNet-18-shaped CNN (BasicBlocks [2,2,2,2], 64-512 channels, BatchNorm), "
        f"image float32 [batch,3,224,224] -> logits [batch,{RESNET18_CLASSES}]; "
        "~3.6 GFLOP (1.8 GMAC) per image, 11.7 M parameters"
    )
