"""``bert_encoder``: a BERT-style encoder in the shape of MiniLM-L6-H384.

As in the widely served all-MiniLM-L6-v2 sentence encoder: 6 post-LayerNorm layers, hidden 384,
12 heads of 32, feed-forward 1536, exact-erf GELU, BERT's full 30522-token WordPiece vocabulary,
512 positions and 2 token types. Inputs ``input_ids``, ``attention_mask`` and ``token_type_ids``,
int64 [batch, sequence], both axes dynamic ("batch", "sequence"); outputs ``last_hidden_state``
[batch, sequence, 384] and ``pooler_output`` [batch, 384] (tanh of a dense layer on the first
token), two outputs on purpose. Sequences longer than 512 fail in ORT's position Gather. The size
was chosen so that one sample at sequence 128 costs about as much as one CNN image in
onnxruntime on one thread (~30 ms on a 2-core AMD EPYC VM).

Weights
    From ``torch.manual_seed(seed)`` (see :mod:`tritonlab.models.zoo`): BERT's normal(0, 0.02)
    for weights and embeddings, but random biases (std 0.02) and LayerNorm parameters (1 and 0,
    std 0.02) instead of BERT's zeros and ones: identical initializers would be merged by the
    exporter into ``Identity`` nodes. Its LayerNorms keep the hidden states O(1) (max |value|
    ~4-6).

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

Size and cost (FLOP = 2 x multiply-add, as :mod:`tritonlab.explanation.operators` counts)
    22.71 M parameters (11.72 M of them the vocabulary table), ~2.87 GFLOP (1.43 GMAC: linear
    layers 1.36, attention 0.08) per sample at sequence 128, a 90.9 MB file; ~30 ms per sample
    on one thread, ~16 ms on two. Its cost grows with the sequence length, which the operator
    profiler, counting symbolic dims as 1, takes as 1: it reports one token's work (~0.02 GFLOP)
    for this model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tritonlab.errors import ModelError
from tritonlab.models.demo import ExportCheck
from tritonlab.models.torch_export import ZOO_SEED, VerifyCase, export_verified, require_torch

if TYPE_CHECKING:
    import torch

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


def _build_encoder(shape: EncoderShape, seed: int) -> torch.nn.Module:
    """A post-LayerNorm BERT encoder with a pooler, seeded with BERT's initialisation."""
    require_torch()
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


def encoder_summary() -> str:
    """The registry's one-line summary: layout, inputs and outputs, GFLOP per sample, parameters."""
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
