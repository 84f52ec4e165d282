"""``bert_encoder``: a BERT-style encoder in the shape of MiniLM-L6-H384 (all-MiniLM-L6-v2).

6 post-LayerNorm layers, hidden 384, 12 heads, feed-forward 1536, exact-erf GELU, BERT's 30522-token
vocabulary, 512 positions, 2 token types. Inputs ``input_ids``, ``attention_mask`` and
``token_type_ids``, int64 [batch, sequence] (both axes dynamic); outputs ``last_hidden_state``
[batch, sequence, 384] and ``pooler_output`` [batch, 384], two outputs on purpose. One sample at
sequence 128 costs about one CNN image (~30 ms on one thread of a 2-core AMD EPYC VM).

Weights are BERT's normal(0, 0.02) from ``torch.manual_seed(seed)``, but biases and LayerNorm
parameters are random too: identical initializers would be merged into ``Identity`` nodes.

As exported, ``input_ids`` and ``token_type_ids`` each feed a ``Gather`` (axis 0) of an
initializer table ([30522, 384] and [2, 384]: their valid ranges); position ids come from
``Shape(input_ids)`` through ``Range``; ``attention_mask`` (0/1) feeds no ``Gather`` but an
additive bias on the attention scores, so padded keys get exactly zero weight. Other ``Gather``
nodes read activations (two on ``Shape`` outputs, the pooler's on ``last_hidden_state``).

22.71 M parameters, ~2.87 GFLOP per sample at sequence 128; the operator profiler counts
symbolic dims as 1, so it reports one token's work (~0.02 GFLOP) for this model.
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
    """Tokenizer-like inputs: row ``i`` ends in ``padding[i]`` padded positions (id, type and
    mask 0); the token type switches to 1 half way through the unpadded part (a sentence pair)."""
    ids = rng.integers(1, vocab, size=(batch, sequence), dtype=np.int64)
    mask = np.ones((batch, sequence), dtype=np.int64)
    types = np.zeros((batch, sequence), dtype=np.int64)
    for row, pad in enumerate(padding):
        length = sequence - pad
        mask[row, length:] = 0
        ids[row, length:] = 0
        types[row, length // 2 : length] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def export_bert_encoder(onnx_path: Path, seed: int = ZOO_SEED) -> ExportCheck:
    """Export the encoder with dynamic batch and sequence axes; verify it with ORT against
    PyTorch (padded positions of ``last_hidden_state`` are meaningless and not compared)."""
    shape = EncoderShape()
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
