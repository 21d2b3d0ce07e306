"""Embedding vectors: a deterministic function of the text, the same on every surface.

    vector(text, dimensions) = normalise(Σ weight(f) · sign(f) · e[index(f)])  over the features f of text

The features of a text (after `str.lower()`): each word (a run of `\\w` characters) with weight 1,
each pair of adjacent words with weight 1/2, and each three-character slice of each word padded
with a space on both sides (`" timeout "` → `" ti"`, `"tim"`, … `"ut "`) with weight 1/4, so texts
sharing words, word order or word stems land close. A feature's index (`h mod dimensions`) and
sign (the top bit of `h`) come from `h`, the first 8 bytes of its BLAKE2b digest: no seed, no
process state, so the same text gives the same vector in every process, format and server. The
sum is scaled to unit length and each component rounded to float32, as the real APIs send them
(JSON and base64 then carry the very same numbers). A text with no word (`""`, `"!?"`) has one
feature, itself. `dimensions` is the vector's length: a vector asked at 256 is built at 256
directly, not cut from the full-length one, so its features collide more and it is still unit
length.

`KNOWN` holds the embedding models a client names by their real names, with the length each
gives by default and the longest input it takes.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

_WORD = re.compile(r"\w+")
WORD, PAIR, SLICE = 1.0, 0.5, 0.25
"""The weights of a word, a pair of adjacent words and a three-character slice of a word."""


@dataclass(frozen=True, kw_only=True)
class EmbeddingModel:
    """A real embedding model's shape, as far as a client can see it."""

    dimensions: int
    """The vector's length when the request asks none."""
    max_tokens: int
    """The longest input it embeds, in tokens."""
    max_dimensions: int | None = None
    """The longest vector a request may ask for (`dimensions`); None: it asks none."""


KNOWN: dict[str, EmbeddingModel] = {
    "text-embedding-3-small": EmbeddingModel(dimensions=1536, max_tokens=8192, max_dimensions=1536),
    "text-embedding-3-large": EmbeddingModel(dimensions=3072, max_tokens=8192, max_dimensions=3072),
    "text-embedding-ada-002": EmbeddingModel(dimensions=1536, max_tokens=8192),
    "text-embedding-004": EmbeddingModel(dimensions=768, max_tokens=2048, max_dimensions=768),
    "text-embedding-005": EmbeddingModel(dimensions=768, max_tokens=2048, max_dimensions=768),
    "text-multilingual-embedding-002": EmbeddingModel(dimensions=768, max_tokens=2048, max_dimensions=768),
    "gemini-embedding-001": EmbeddingModel(dimensions=3072, max_tokens=2048, max_dimensions=3072),
    "nomic-embed-text": EmbeddingModel(dimensions=768, max_tokens=8192, max_dimensions=768),
    "mxbai-embed-large": EmbeddingModel(dimensions=1024, max_tokens=512, max_dimensions=1024),
    "all-minilm": EmbeddingModel(dimensions=384, max_tokens=256, max_dimensions=384),
    "amazon.titan-embed-text-v2:0": EmbeddingModel(dimensions=1024, max_tokens=8192, max_dimensions=1024),
    "amazon.titan-embed-text-v1": EmbeddingModel(dimensions=1536, max_tokens=8192),
}


def known(model: str) -> EmbeddingModel | None:
    """The real embedding model `model` names (an Ollama `:tag` or a `models/` prefix allowed), if any."""
    name = model.removeprefix("models/").partition("+")[0]
    found = KNOWN.get(name)
    if found is None and ":" in name:
        found = KNOWN.get(name.partition(":")[0])
    return found


@lru_cache(maxsize=1 << 16)
def _hash(feature: str) -> int:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def features(text: str) -> Counter[str]:
    """The weighted features of `text` (see the module's docstring)."""
    words = _WORD.findall(text.lower())
    found: Counter[str] = Counter()
    for word in words:
        found["w " + word] += WORD
        padded = f" {word} "
        for i in range(len(padded) - 2):
            found["s " + padded[i : i + 3]] += SLICE
    for a, b in zip(words, words[1:], strict=False):
        found[f"p {a} {b}"] += PAIR
    return found or Counter({"t " + text: 1.0})


def vector(text: str, dimensions: int) -> list[float]:
    """`text`'s unit vector of `dimensions` float32 components (`dimensions` ≥ 1)."""
    if dimensions < 1:
        raise ValueError(f"dimensions must be at least 1, not {dimensions}")
    sums = [0.0] * dimensions
    for feature, weight in features(text).items():
        h = _hash(feature)
        sums[h % dimensions] += weight if h >> 63 else -weight
    norm = math.sqrt(math.fsum(x * x for x in sums))
    if norm == 0.0:  # every feature cancelled out: rare, and still a unit vector
        sums, norm = [0.0] * dimensions, 1.0
        sums[_hash("t " + text) % dimensions] = 1.0
    return _float32([x / norm for x in sums])


def _float32(values: list[float]) -> list[float]:
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def to_base64(values: list[float]) -> str:
    """The vector as OpenAI's `encoding_format: "base64"` sends it: little-endian float32, base64."""
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")


def similarity(a: list[float], b: list[float]) -> float:
    """The cosine similarity of two unit vectors of one length (their dot product)."""
    return math.fsum(x * y for x, y in zip(a, b, strict=True))
