"""The embedding vector: a pure function of the text, unit length, near for near texts."""

from __future__ import annotations

import base64
import json
import math
import struct
import subprocess
import sys

import pytest

from mockprovider.replies.embedding import known, similarity, to_base64, vector

TIMEOUT = "worker 7 timed out after 30000 ms"


def test_the_same_text_gives_the_same_vector_in_another_process():
    code = ("import json; from mockprovider.replies.embedding import vector; "
            f"print(json.dumps(vector({TIMEOUT!r}, 64)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == vector(TIMEOUT, 64)


@pytest.mark.parametrize("text", ["", "!?", "x", TIMEOUT, "Ünïcødé wörds ✓ " * 50])
@pytest.mark.parametrize("dimensions", [1, 2, 256, 1536])
def test_every_vector_is_unit_length_and_float32(text, dimensions):
    v = vector(text, dimensions)
    assert len(v) == dimensions
    assert math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-5)
    assert v == list(struct.unpack(f"<{dimensions}f", struct.pack(f"<{dimensions}f", *v)))


def test_texts_sharing_words_are_closer_than_unrelated_texts():
    near = similarity(vector(TIMEOUT, 1536), vector("worker 7 timed out after 3000 ms", 1536))
    related = similarity(vector(TIMEOUT, 1536), vector("the worker timed out", 1536))
    unrelated = similarity(vector(TIMEOUT, 1536), vector("Remember to rotate your logs.", 1536))
    assert near > related > unrelated
    assert unrelated < 0.2 < related


def test_case_is_ignored_but_word_order_counts():
    assert vector("Worker Timed Out", 128) == vector("worker timed out", 128)
    assert vector("out timed worker", 128) != vector("worker timed out", 128)


def test_base64_is_little_endian_float32_of_the_same_numbers():
    v = vector(TIMEOUT, 8)
    raw = base64.b64decode(to_base64(v))
    assert len(raw) == 32 and list(struct.unpack("<8f", raw)) == v


def test_known_models_are_found_by_their_real_names_tags_and_prefixes():
    assert known("text-embedding-3-large").dimensions == 3072
    assert known("nomic-embed-text:latest").dimensions == 768
    assert known("models/text-embedding-004").dimensions == 768
    assert known("text-embedding-3-small+latency=10").dimensions == 1536
    assert known("plan") is None


def test_a_length_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        vector("x", 0)
