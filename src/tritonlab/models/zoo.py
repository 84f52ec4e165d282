"""The built-in models ``tritonlab demo --model NAME`` can export: a registry and two exporters.

Three models, from cheap to heavy, all float32, random weights from a fixed seed, exported with
PyTorch's TorchScript exporter (ONNX opset 17) and checked against onnxruntime:

``simple_mlp``
    The original demo MLP (see :mod:`tritonlab.models.demo`), unchanged.
``resnet18_cnn``
    A ResNet-18-shaped CNN written by hand in ``torch.nn`` (no torchvision): a 7x7/2 stem
    convolution and 3x3/2 max-pool, BasicBlocks [2, 2, 2, 2] at 64-128-256-512 channels with
    BatchNorm, global average pooling and a 1000-way linear layer. Input ``image`` float32
    [batch, 3, 224, 224], output ``logits`` [batch, 1000]; only the batch axis is dynamic.
``bert_encoder``
    A BERT-style encoder in the shape of MiniLM-L6-H384 (as in the widely served
    all-MiniLM-L6-v2 sentence encoder): 6 post-LayerNorm layers, hidden 384, 12 heads of 32,
    feed-forward 1536, exact-erf GELU, BERT's full 30522-token WordPiece vocabulary, 512
    positions and 2 token types. Inputs ``input_ids``, ``attention_mask`` and ``token_type_ids``,
    int64 [batch, sequence], both axes dynamic ("batch", "sequence"); outputs
    ``last_hidden_state`` [batch, sequence, 384] and ``pooler_output`` [batch, 384] (tanh of a
    dense layer on the first token), two outputs on purpose. Sequences longer than 512 fail in
    ORT's position Gather. The size was chosen so that one sample at sequence 128 costs about
    as much as one CNN image in onnxruntime on one thread (~30 ms on a 2-core AMD EPYC VM).

Weights
    Every weight comes from ``torch.manual_seed(seed)`` and PyTorch's CPU generator, never from
    data or from a forward pass, so two exports with the same seed are bit-identical files.
    BatchNorm with arbitrary statistics lets activations grow block after block (each residual
    add roughly doubles the variance), so the CNN keeps BatchNorm's running statistics near the
    identity (mean ~ N(0, 0.1²), variance ~ U(0.8, 1.2)), its affine parameters near (1, 0)
    (std 0.1), and the last BatchNorm of each residual branch scaled to gamma ~ 0.2 (a softer
    torchvision ``zero_init_residual``): logits stay O(1) (std ~0.2, max ~0.7 for
    standard-normal images). The encoder uses BERT's normal(0, 0.02) for weights and
    embeddings, but random biases (std 0.02) and LayerNorm parameters (1 and 0, std 0.02)
    instead of BERT's zeros and ones: identical initializers would be merged by the exporter
    into ``Identity`` nodes. Its LayerNorms keep the hidden states O(1) (max |value| ~4-6).

The encoder's int64 inputs, as exported (what a graph analysis finds)
    Each lookup is an ``torch.nn.Embedding``, written as ``Gather(data=table, indices)`` with
    ``axis`` 0 and ``data`` a graph initializer read directly (no Identity or Cast on it):

    * ``input_ids`` -> ``Gather`` directly (no Cast, no Unsqueeze), table
      ``word_embeddings.weight`` [30522, 384]. ``input_ids`` also feeds two ``Shape`` nodes,
      which give the batch and sequence sizes for the attention Reshapes and position ids.
    * ``token_type_ids`` -> ``Gather`` directly, table ``token_type_embeddings.weight`` [2, 384].
    * position ids are not an input: ``Shape(input_ids) -> Gather(axis 0, index 1) -> Cast
      (int64) -> Range(0, sequence, 1) -> Unsqueeze(axis 0)`` gives [1, sequence], which
      indexes ``position_embeddings.weight`` [512, 384]; the sum broadcasts over the batch.
    * ``attention_mask`` feeds no ``Gather``: ``Unsqueeze -> Unsqueeze -> Cast(float) ->
      Sub(1 - mask) -> Mul(float32 min)`` makes an additive [batch, 1, 1, sequence] bias that
      each layer ``Add``-s to its attention scores before ``Softmax``, so padded keys get
      exactly zero weight (unpadded outputs do not change when padded tokens do).

    The valid ranges of ``input_ids`` and ``token_type_ids`` are thus the row counts of the
    initializers they index (30522 and 2); the mask is 0/1. Other ``Gather`` nodes read
    activations: two on ``Shape`` outputs, and the pooler's (axis 1, index 0) on
    ``last_hidden_state``.

Size and cost (FLOP = 2 x multiply-add, as :mod:`tritonlab.analysis.operators` counts)
    ``resnet18_cnn``: 11.69 M parameters, ~3.63 GFLOP (1.81 GMAC) per image, a 46.7 MB file;
    ~33 ms per image in onnxruntime on one thread, ~17 ms on two (batch 1 or 4).
    ``bert_encoder``: 22.71 M parameters (11.72 M of them the vocabulary table), ~2.87 GFLOP
    (1.43 GMAC: linear layers 1.36, attention 0.08) per sample at sequence 128, a 90.9 MB file;
    ~30 ms per sample on one thread, ~16 ms on two. Its cost grows with the sequence length,
    which the operator profiler, counting symbolic dims as 1, takes as 1: it reports one
    token's work (~0.02 GFLOP) for this model.

PyTorch is imported lazily: it is only needed to export these models, not to serve or measure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tritonlab.errors import ModelError
from tritonlab.models.demo import DEMO_MODEL_NAME, ExportCheck, export_simple_mlp

if TYPE_CHECKING:
    import torch

ZOO_SEED = 0
ONNX_OPSET = 17

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

ENCODER_NAME = "bert_encoder"
ENCODER_VOCAB_SIZE = 30522
ENCODER_MAX_POSITIONS = 512
ENCODER_TOKEN_TYPES = 2
ENCODER_LAYERS = 6
ENCODER_HIDDEN = 384
ENCODER_HEADS = 12
ENCODER_INTERMEDIATE = 1536
ENCODER_LAYER_NORM_EPS = 1e-12
ENCODER_INIT_STD = 0.02
# (batch, sequence, padded tokens at the end of each row) checked against PyTorch.
ENCODER_CHECK_SHAPES = ((1, 128, (16,)), (2, 32, (0, 11)))
# Matmuls with 384- and 1536-long reductions, erf, softmax and LayerNorm, in another order in
# ORT; the hidden states are LayerNorm outputs up to ~5: relative to the largest |output|.
ENCODER_TOLERANCE_REL = 1e-4

DEFAULT_MODEL = DEMO_MODEL_NAME


@dataclass(frozen=True)
class BuiltinModel:
    """A model ``tritonlab demo`` can export: its name, a one-line summary and its exporter."""

    name: str
    summary: str
    export: Callable[[Path], ExportCheck]


@dataclass(frozen=True)
class EncoderShape:
    """The size of the BERT-style encoder (the defaults are what ``bert_encoder`` exports)."""

    layers: int = ENCODER_LAYERS
    hidden: int = ENCODER_HIDDEN
    heads: int = ENCODER_HEADS
    intermediate: int = ENCODER_INTERMEDIATE
    vocab_size: int = ENCODER_VOCAB_SIZE
    max_positions: int = ENCODER_MAX_POSITIONS
    token_types: int = ENCODER_TOKEN_TYPES

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ModelError(f"encoder hidden {self.hidden} must be a multiple of heads")

    @property
    def parameters(self) -> int:
        """Trainable parameters: embeddings, layers and the pooler."""
        h, i = self.hidden, self.intermediate
        embeddings = (self.vocab_size + self.max_positions + self.token_types + 2) * h
        per_layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
        return embeddings + self.layers * per_layer + h * h + h

    def macs_per_sample(self, sequence: int) -> int:
        """Multiply-adds of one sample of ``sequence`` tokens (matmuls only)."""
        h, s = self.hidden, sequence
        per_layer = 4 * s * h * h + 2 * s * h * self.intermediate + 2 * s * s * h
        return self.layers * per_layer + h * h  # + the pooler on the first token


@dataclass(frozen=True)
class VerifyCase:
    """One verification input: the feeds, and per output a boolean mask of what to compare.

    Outputs without a mask are compared everywhere; a mask broadcasts to the output's shape.
    """

    feeds: Mapping[str, np.ndarray[Any, Any]]
    compare: Mapping[str, np.ndarray[Any, Any]] = field(default_factory=dict)


def _require_torch() -> None:
    """Raise ``ModelError`` with the install hint if PyTorch is missing."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError(
            "PyTorch is needed to export the built-in models: pip install 'tritonlab[demo]'"
        ) from exc


def export_verified(
    model: torch.nn.Module,
    onnx_path: Path,
    example: Mapping[str, np.ndarray[Any, Any]],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
    cases: Sequence[VerifyCase],
    tolerance_rel: float,
    batch_sizes: tuple[int, ...],
) -> ExportCheck:
    """Export ``model`` (eval mode) to ``onnx_path`` and compare ORT with PyTorch on ``cases``.

    Inputs are passed positionally in ``example``'s order. The tolerance is relative to the
    largest |PyTorch output| over all cases (at least 1), and ``ExportCheck.tolerance_abs``
    holds the resulting absolute bound. The file is written to ``.onnx.tmp`` and replaced, so a
    failed export leaves no half-written model. Raises ``ModelError`` on a mismatch.
    """
    _require_torch()
    import onnxruntime as ort
    import torch

    onnx_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = onnx_path.with_suffix(".onnx.tmp")
    input_names = list(example)
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(torch.from_numpy(example[name]) for name in input_names),
            str(tmp_path),
            input_names=input_names,
            output_names=list(output_names),
            dynamic_axes={name: dict(axes) for name, axes in dynamic_axes.items()},
            opset_version=ONNX_OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    tmp_path.replace(onnx_path)

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    max_diff, scale = 0.0, 1.0
    for case in cases:
        with torch.no_grad():
            expected = model(*(torch.from_numpy(case.feeds[name]) for name in input_names))
        if isinstance(expected, torch.Tensor):
            expected = (expected,)
        actual = session.run(list(output_names), dict(case.feeds))
        for name, want, got in zip(output_names, expected, actual, strict=True):
            want_np = want.numpy()
            where = case.compare.get(name, np.ones(want_np.shape, dtype=bool))
            where = np.broadcast_to(where, want_np.shape)
            scale = max(scale, float(np.max(np.abs(want_np[where]))))
            max_diff = max(max_diff, float(np.max(np.abs(got[where] - want_np[where]))))
    tolerance = tolerance_rel * scale
    if not max_diff <= tolerance:  # also catches NaN
        raise ModelError(
            f"exported {onnx_path.name} differs from PyTorch by {max_diff:.3g} "
            f"(tolerance {tolerance:.3g}); re-export with a different opset"
        )
    return ExportCheck(onnx_path, batch_sizes, max_diff, tolerance)


def _build_resnet18(seed: int) -> torch.nn.Module:
    """ResNet-18 (BasicBlocks [2, 2, 2, 2]): seeded weights, BatchNorm near the identity."""
    _require_torch()
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
    """Export the ResNet-18-shaped CNN with a dynamic batch axis and verify it with ORT.

    Compared with PyTorch at batch sizes 1 and 2 on standard-normal images, within
    ``RESNET18_TOLERANCE_REL`` of the largest |logit|. Raises ``ModelError`` on a mismatch.
    """
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


def _build_encoder(shape: EncoderShape, seed: int) -> torch.nn.Module:
    """A post-LayerNorm BERT encoder with a pooler, seeded with BERT's initialisation."""
    _require_torch()
    import torch

    head_dim = shape.hidden // shape.heads

    class EncoderLayer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query = torch.nn.Linear(shape.hidden, shape.hidden)
            self.key = torch.nn.Linear(shape.hidden, shape.hidden)
            self.value = torch.nn.Linear(shape.hidden, shape.hidden)
            self.attention_out = torch.nn.Linear(shape.hidden, shape.hidden)
            self.attention_norm = torch.nn.LayerNorm(shape.hidden, eps=ENCODER_LAYER_NORM_EPS)
            self.intermediate = torch.nn.Linear(shape.hidden, shape.intermediate)
            self.gelu = torch.nn.GELU()
            self.output = torch.nn.Linear(shape.intermediate, shape.hidden)
            self.output_norm = torch.nn.LayerNorm(shape.hidden, eps=ENCODER_LAYER_NORM_EPS)

        def forward(
            self, x: torch.Tensor, mask_bias: torch.Tensor, batch: int, sequence: int
        ) -> torch.Tensor:
            # [batch, sequence, hidden] -> [batch, heads, sequence, head_dim]; the sizes come
            # from the encoder's input once, so the graph reads Shape(input_ids) only once
            split = (batch, sequence, shape.heads, head_dim)
            query = self.query(x) * (1.0 / math.sqrt(head_dim))
            query = query.reshape(split).transpose(1, 2)
            key = self.key(x).reshape(split).transpose(1, 2)
            value = self.value(x).reshape(split).transpose(1, 2)
            scores = torch.matmul(query, key.transpose(-1, -2)) + mask_bias
            context = torch.matmul(torch.softmax(scores, dim=-1), value)
            context = context.transpose(1, 2).reshape(batch, sequence, shape.hidden)
            x = self.attention_norm(x + self.attention_out(context))
            x = self.output_norm(x + self.output(self.gelu(self.intermediate(x))))
            return x

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word_embeddings = torch.nn.Embedding(shape.vocab_size, shape.hidden)
            self.position_embeddings = torch.nn.Embedding(shape.max_positions, shape.hidden)
            self.token_type_embeddings = torch.nn.Embedding(shape.token_types, shape.hidden)
            self.embedding_norm = torch.nn.LayerNorm(shape.hidden, eps=ENCODER_LAYER_NORM_EPS)
            self.layers = torch.nn.ModuleList(EncoderLayer() for _ in range(shape.layers))
            self.pooler = torch.nn.Linear(shape.hidden, shape.hidden)

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            batch, sequence = input_ids.shape
            positions = torch.arange(sequence, dtype=torch.int64).unsqueeze(0)
            x = (
                self.word_embeddings(input_ids)
                + self.position_embeddings(positions)
                + self.token_type_embeddings(token_type_ids)
            )
            x = self.embedding_norm(x)
            # 1 = attend, 0 = padding: padded keys get the most negative float32 added
            keep = attention_mask[:, None, None, :].to(x.dtype)
            mask_bias = (1.0 - keep) * torch.finfo(torch.float32).min
            for layer in self.layers:
                x = layer(x, mask_bias, batch, sequence)
            pooled = torch.tanh(self.pooler(x[:, 0]))
            return x, pooled

    torch.manual_seed(seed)
    model = Encoder()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(module.weight, std=ENCODER_INIT_STD)
            if isinstance(module, (torch.nn.Linear, torch.nn.LayerNorm)):
                # not BERT's zeros and ones: distinct values, so the exporter cannot merge
                # identical initializers into Identity nodes and ORT checks every bias
                torch.nn.init.normal_(module.bias, std=ENCODER_INIT_STD)
            if isinstance(module, torch.nn.LayerNorm):
                torch.nn.init.normal_(module.weight, mean=1.0, std=ENCODER_INIT_STD)
    return model.eval()


def encoder_inputs(
    rng: np.random.Generator, batch: int, sequence: int, padding: Sequence[int], vocab: int
) -> dict[str, np.ndarray[Any, Any]]:
    """Random ``input_ids``/``token_type_ids`` and a mask with ``padding[i]`` zeros at the end.

    Like a tokenizer's output: a padded position has token id 0, type 0 and mask 0; the token
    type switches from 0 to 1 half way through the unpadded part (a sentence pair).
    """
    ids = rng.integers(1, vocab, size=(batch, sequence), dtype=np.int64)
    mask = np.ones((batch, sequence), dtype=np.int64)
    types = np.zeros((batch, sequence), dtype=np.int64)
    for row, pad in enumerate(padding):
        length = sequence - pad
        mask[row, length:] = 0
        ids[row, length:] = 0
        types[row, length // 2 : length] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def export_bert_encoder(
    onnx_path: Path, seed: int = ZOO_SEED, shape: EncoderShape | None = None
) -> ExportCheck:
    """Export the BERT-style encoder with dynamic batch and sequence axes; verify it with ORT.

    Compared with PyTorch at (batch 1, sequence 128) and (batch 2, sequence 32) with padded
    attention masks, on the unpadded positions of ``last_hidden_state`` (a padded position's
    state is meaningless) and on all of ``pooler_output``, within ``ENCODER_TOLERANCE_REL`` of
    the largest |output|. Raises ``ModelError`` on a mismatch.
    """
    shape = shape or EncoderShape()
    model = _build_encoder(shape, seed)
    rng = np.random.default_rng(seed)
    cases = []
    for batch, sequence, padding in ENCODER_CHECK_SHAPES:
        feeds = encoder_inputs(rng, batch, sequence, padding, shape.vocab_size)
        unpadded = feeds["attention_mask"].astype(bool)[:, :, None]
        cases.append(VerifyCase(feeds, {"last_hidden_state": unpadded}))
    example = encoder_inputs(rng, 1, 8, (0,), shape.vocab_size)
    dynamic = {0: "batch", 1: "sequence"}
    return export_verified(
        model,
        onnx_path,
        example,
        ["last_hidden_state", "pooler_output"],
        {
            "input_ids": dynamic,
            "attention_mask": dynamic,
            "token_type_ids": dynamic,
            "last_hidden_state": dynamic,
            "pooler_output": {0: "batch"},
        },
        cases,
        ENCODER_TOLERANCE_REL,
        tuple(batch for batch, _, _ in ENCODER_CHECK_SHAPES),
    )


def _resnet18_summary() -> str:
    return (
        "ResNet-18-shaped CNN (BasicBlocks [2,2,2,2], 64-512 channels, BatchNorm), "
        f"image float32 [batch,3,224,224] -> logits [batch,{RESNET18_CLASSES}]; "
        "~3.6 GFLOP (1.8 GMAC) per image, 11.7 M parameters"
    )


def _encoder_summary() -> str:
    shape = EncoderShape()
    return (
        f"BERT-style encoder ({shape.layers} layers, hidden {shape.hidden}, {shape.heads} heads, "
        f"FFN {shape.intermediate}, vocab {shape.vocab_size}), input_ids/attention_mask/"
        "token_type_ids int64 [batch,sequence] -> last_hidden_state [batch,sequence,"
        f"{shape.hidden}] + pooler_output [batch,{shape.hidden}]; "
        f"~{2 * shape.macs_per_sample(128) / 1e9:.1f} GFLOP "
        f"({shape.macs_per_sample(128) / 1e9:.2f} GMAC) per sample at sequence 128, "
        f"{shape.parameters / 1e6:.1f} M parameters"
    )


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    model.name: model
    for model in (
        BuiltinModel(
            DEMO_MODEL_NAME,
            "MLP 256 -> 1024 -> ReLU -> 10, input float32 [batch,256] -> output [batch,10]; "
            "~0.54 MFLOP per sample, 274 K parameters",
            export_simple_mlp,
        ),
        BuiltinModel(RESNET18_NAME, _resnet18_summary(), export_resnet18_cnn),
        BuiltinModel(ENCODER_NAME, _encoder_summary(), export_bert_encoder),
    )
}


def builtin_model(name: str) -> BuiltinModel:
    """The built-in model called ``name``; ``ModelError`` naming the valid ones otherwise."""
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        valid = ", ".join(BUILTIN_MODELS)
        raise ModelError(f"unknown built-in model '{name}'; choose one of: {valid}") from None


def export_builtin(name: str, onnx_path: Path) -> ExportCheck:
    """Export the built-in model ``name`` to ``onnx_path`` and verify it with onnxruntime."""
    return builtin_model(name).export(onnx_path)
