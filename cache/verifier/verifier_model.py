"""The pair verifier's model, as train_verifier.py trains it and the C++ runtime
(encoder/src/pair_verifier.cc) runs it: the input encoding and the cross-encoder itself, written
out layer by layer so the C++ port has one obvious reference."""
import math
import os

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file
from tokenizers import Tokenizer

HIDDEN, HEADS = 384, 12  # MiniLM-L6: hidden width, attention heads


class PairTokenizer:
    def __init__(self, model_dir, max_tokens):
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.no_truncation()
        self.tok.no_padding()
        self.cls = self.tok.token_to_id("[CLS]")
        self.sep = self.tok.token_to_id("[SEP]")
        self.max_tokens = max_tokens

    def pieces(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def pair(self, a, b):
        a, b = list(a), list(b)
        budget = self.max_tokens - 3
        while len(a) + len(b) > budget:
            if len(a) > len(b):
                a.pop()
            else:
                b.pop()
        ids = [self.cls] + a + [self.sep] + b + [self.sep]
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        return ids, types


class CrossEncoder(torch.nn.Module):
    """BERT layers as MiniLM has them (post-LayerNorm, GELU), written out so the C++ port has
    one obvious reference."""

    def __init__(self, weights, layers):
        super().__init__()
        self.layers = layers
        self.word = torch.nn.Parameter(weights["embeddings.word_embeddings.weight"], requires_grad=False)
        self.pos = torch.nn.Parameter(weights["embeddings.position_embeddings.weight"], requires_grad=False)
        self.p = torch.nn.ParameterDict()
        for name, t in weights.items():
            keep = name.startswith("embeddings.token_type") or name.startswith("embeddings.LayerNorm")
            keep |= any(name.startswith(f"encoder.layer.{i}.") for i in range(layers))
            if keep:
                self.p[name.replace(".", "__")] = torch.nn.Parameter(t.clone())
        self.p["classifier__weight"] = torch.nn.Parameter(torch.zeros(1, HIDDEN))
        self.p["classifier__bias"] = torch.nn.Parameter(torch.zeros(1))

    def w(self, name):
        return self.p[name.replace(".", "__")]

    def lin(self, x, name):
        return F.linear(x, self.w(name + ".weight"), self.w(name + ".bias"))

    def ln(self, x, name):
        return F.layer_norm(x, (HIDDEN,), self.w(name + ".weight"), self.w(name + ".bias"), eps=1e-12)

    def forward(self, ids, types, mask):
        n, t = ids.shape
        x = self.word[ids] + self.pos[:t].unsqueeze(0) + self.w("embeddings.token_type_embeddings.weight")[types]
        x = self.ln(x, "embeddings.LayerNorm")
        bias = (1.0 - mask[:, None, None, :].float()) * -1e9
        d = HIDDEN // HEADS
        for i in range(self.layers):
            pre = f"encoder.layer.{i}."
            q = self.lin(x, pre + "attention.self.query").view(n, t, HEADS, d).transpose(1, 2)
            k = self.lin(x, pre + "attention.self.key").view(n, t, HEADS, d).transpose(1, 2)
            v = self.lin(x, pre + "attention.self.value").view(n, t, HEADS, d).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + bias, dim=-1)
            ctx = (att @ v).transpose(1, 2).reshape(n, t, HIDDEN)
            x = self.ln(x + self.lin(ctx, pre + "attention.output.dense"), pre + "attention.output.LayerNorm")
            h = F.gelu(self.lin(x, pre + "intermediate.dense"))
            x = self.ln(x + self.lin(h, pre + "output.dense"), pre + "output.LayerNorm")
        return self.lin(x[:, 0], "classifier").squeeze(-1)

    def exported(self):
        out = {}
        for key, t in self.p.items():
            out[key.replace("__", ".")] = t.detach().to(torch.bfloat16).contiguous()
        return out


def load_verifier(model, path):
    """Overwrites model's verifier tensors with those of a verifier.safetensors (--init, --teacher)."""
    for k, v in load_file(path).items():
        model.p[k.replace(".", "__")].data.copy_(v.float())
    return model


def load_teacher(minilm_weights, folder):
    path = os.path.join(folder, "verifier.safetensors")
    with safe_open(path, "pt") as f:
        layers = int(f.metadata()["layers"])
    print(f"teacher: {path}, {layers} layers", flush=True)
    return load_verifier(CrossEncoder(minilm_weights, layers), path)
