"""OnnxEmbedder on the packaged all-MiniLM-L6-v2 (int8 ONNX), offline: embedding, late
chunking in add_document, windows past the model's length, and models that do not load."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnxruntime
import pytest
from tokenizers import Tokenizer

import timestone
from timestone._onnx import _packaged_files  # pyright: ignore[reportPrivateUsage]
from timestone.cli._store import embedder_for
from timestone.embedders import PACKAGED_MODEL, OnnxEmbedder, check_embedder
from timestone.errors import EmbedderError, InvalidInput

WHEN = datetime(2024, 5, 8, tzinfo=UTC)

DOCUMENT = (
    "Marie Curie was a physicist and chemist who studied radioactivity in Paris. "
    "She was the first person to win two Nobel prizes. "
    "The prizes came eight years apart."
)


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    return OnnxEmbedder()


def cos(a: Any, b: Any) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def token_rows(text: str, max_tokens: int = 512) -> tuple[np.ndarray[Any, Any], list[Any]]:
    """The model's token vectors for ``text`` in one pass, computed here from the packaged
    files directly (onnxruntime and tokenizers, no Timestone code), and the offsets."""
    onnx_file, tokenizer_file = _packaged_files()
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    enc = tokenizer.encode(text)  # [CLS] ... [SEP]
    assert len(enc.ids) <= max_tokens
    session: Any = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    ids = np.array([enc.ids], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    feeds["token_type_ids"] = np.zeros_like(ids)
    hidden: np.ndarray[Any, Any] = session.run(None, feeds)[0][0]
    return hidden, list(enc.offsets)


def test_the_packaged_model_loads_and_embeds(model: OnnxEmbedder) -> None:
    assert check_embedder(model) is model
    assert (model.name, model.dimension) == (f"onnx/{PACKAGED_MODEL}", 384)
    rows = model.embed_array(
        ["A cat sits on the mat.", "A kitten rests on a rug.", "Stock markets fell today."]
    )
    assert rows.shape == (3, 384)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert cos(rows[0], rows[1]) > 0.5 > 0.2 > cos(rows[0], rows[2])
    assert model.embed(["A cat sits on the mat."])[0] == pytest.approx(rows[0].tolist(), abs=1e-5)


def test_a_short_text_is_the_mean_of_its_tokens_special_ones_included(
    model: OnnxEmbedder,
) -> None:
    text = "Radioactivity was studied in Paris."
    hidden, _ = token_rows(text)
    mean = hidden.mean(axis=0)
    assert np.allclose(model.embed_array([text])[0], mean / np.linalg.norm(mean), atol=1e-4)


def test_late_chunk_vector_pools_the_tokens_of_its_span(model: OnnxEmbedder) -> None:
    start = DOCUMENT.index("She was")
    end = DOCUMENT.index("prizes.") + len("prizes.")
    late = model.embed_spans(DOCUMENT, [(0, start - 1), (start, end)])
    hidden, offsets = token_rows(DOCUMENT)
    inside = [i for i, (s, e) in enumerate(offsets) if (s, e) != (0, 0) and start <= s and e <= end]
    assert len(inside) > 5
    expected = hidden[inside].mean(axis=0)
    assert np.allclose(late[1], expected / np.linalg.norm(expected), atol=1e-4)
    naive = model.embed_array([DOCUMENT[start:end]])[0]
    # "She" alone is anyone; pooled in its document the chunk knows whom it speaks of
    assert cos(late[1], naive) < 0.98
    who = model.embed_array(["Marie Curie, physicist and chemist"])[0]
    assert cos(late[1], who) > cos(naive, who) + 0.05


def test_a_text_longer_than_the_window_is_windowed_not_cut() -> None:
    small = OnnxEmbedder(max_tokens=32, overlap=8)
    head = "The study measured blood pressure in adults over ten years. " * 6
    volcano, piano = head + "It ended with volcanoes.", head + "It ended with pianos."
    assert len(small._encode([volcano])[0].ids) > 64  # pyright: ignore[reportPrivateUsage]
    rows = small.embed_array([volcano, piano])
    assert cos(rows[0], rows[1]) < 0.9999  # the last words, past two windows, count
    first, last = (0, 60), (len(head), len(volcano))
    spans = small.embed_spans(volcano, [first, last])
    assert np.isfinite(spans).all()
    assert cos(spans[1], small.embed_array(["It ended with volcanoes."])[0]) > cos(
        spans[0], small.embed_array(["It ended with volcanoes."])[0]
    )


def test_windows_keep_every_token_once() -> None:
    small = OnnxEmbedder(max_tokens=32, overlap=8)
    for count in (1, 30, 31, 52, 100, 301):
        plan = small._windows(count)  # pyright: ignore[reportPrivateUsage]
        kept = [t for _, _, a, b in plan for t in range(a, b)]
        assert kept == list(range(count))
        assert all(0 < e - s <= 30 and s <= a < b <= e for s, e, a, b in plan)


def stored_vectors(mem: timestone.Memory, group: str) -> list[np.ndarray[Any, Any]]:
    with mem.connection(group) as conn:
        rows = conn.execute(
            "SELECT embedding::real[] AS v FROM timestone.episodes"
            " WHERE group_id = %s ORDER BY chunk_index",
            (group,),
        ).fetchall()
    return [np.array(r["v"], dtype=np.float32) for r in rows]


@pytest.mark.parametrize("late", [True, False])
def test_add_document_embeds_chunks_late_or_alone(fresh_dsn: str, group: str, late: bool) -> None:
    embedder = OnnxEmbedder(max_tokens=48, overlap=8, late_chunking=late)
    content = (DOCUMENT + " ") * 3
    with timestone.Memory.open(fresh_dsn, embedder=embedder) as mem:
        result = mem.add_document(group, "curie", content, reference_time=WHEN, max_chunk_chars=120)
        chunks = [(e.char_start, e.char_end) for e in result.episodes]
        assert len(chunks) >= 4
        stored = stored_vectors(mem, group)
    assert len(stored) == len(chunks)
    assert all(c is not None for pair in chunks for c in pair)
    spans = [(int(s or 0), int(e or 0)) for s, e in chunks]
    alone = embedder.embed_array([content[s:e] for s, e in spans])
    pooled = embedder.embed_spans(content, spans)
    expected, other = (pooled, alone) if late else (alone, pooled)
    for got, want, not_want in zip(stored, expected, other, strict=True):
        assert np.allclose(got, want, atol=1e-5)
        assert not np.allclose(got, not_want, atol=1e-3)


def test_a_missing_model_fails_at_open_naming_the_install() -> None:
    with pytest.raises(EmbedderError, match=r"not a folder.*pip install 'timestone\[onnx\]'"):
        OnnxEmbedder("/no/such/model")
    with pytest.raises(EmbedderError, match="pip install 'timestone\\[onnx\\]'"):
        embedder_for("onnx:/no/such/model", None)


def test_a_folder_without_the_files_names_them(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"model\.onnx .*and tokenizer\.json"):
        OnnxEmbedder(tmp_path)
    onnx_file, tokenizer_file = _packaged_files()
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").symlink_to(onnx_file)
    with pytest.raises(EmbedderError, match=r"has no tokenizer\.json"):
        OnnxEmbedder(tmp_path)
    (tmp_path / "tokenizer.json").symlink_to(tokenizer_file)
    assert OnnxEmbedder(tmp_path).embed_array(["a folder of its own"]).shape == (1, 384)


def test_without_the_packages_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(OnnxEmbedder, "_cache", {})
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EmbedderError, match=r"needs onnxruntime: pip install 'timestone\[onnx\]'"):
        OnnxEmbedder()

    def not_installed(name: str) -> None:
        return None

    monkeypatch.setattr("timestone._onnx._package_dir", not_installed)
    with pytest.raises(EmbedderError, match=r"not installed: pip install 'timestone\[onnx\]'"):
        OnnxEmbedder()


def test_a_model_by_name_goes_through_the_hub_and_fails_offline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(EmbedderError, match="sentence-transformers/all-MiniLM-L6-v2"):
        OnnxEmbedder("sentence-transformers/all-MiniLM-L6-v2")


def test_the_command_line_names_and_rebuilds_it() -> None:
    chosen = embedder_for("onnx", None)
    assert isinstance(chosen, OnnxEmbedder)
    assert chosen.name == f"onnx/{PACKAGED_MODEL}"
    rebuilt = embedder_for(None, {"name": chosen.name, "dimension": 384})
    assert isinstance(rebuilt, OnnxEmbedder)
    assert rebuilt.name == chosen.name


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_tokens": 8}, "max_tokens must be an integer of at least 16, got 8"),
        ({"batch_size": 0}, "batch_size must be an integer of at least 1, got 0"),
        ({"max_tokens": 32, "overlap": 16}, "overlap 16 is more than half the window of 32"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, int], words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        OnnxEmbedder(**cast(dict[str, Any], kwargs))


def test_empty_texts_and_stray_spans_are_refused(model: OnnxEmbedder) -> None:
    with pytest.raises(InvalidInput, match="cannot embed an empty text"):
        model.embed_array(["fine", "  "])
    with pytest.raises(InvalidInput, match=r"span \(5, 99\) is not inside the text of 10"):
        model.embed_spans("0123456789", [(5, 99)])
    with pytest.raises(InvalidInput, match="holds no token"):
        model.embed_spans("word     word", [(5, 8)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"late_chunking": "no"}, "late_chunking must be True or False, got 'no'"),
        (
            {"model": ""},
            "model must be all-MiniLM-L6-v2-int8, a folder or a Hugging Face id, got ''",
        ),
        (
            {"model": "  "},
            "model must be all-MiniLM-L6-v2-int8, a folder or a Hugging Face id, got '  '",
        ),
        ({"model": None}, "model must be a name or a path, got NoneType"),
    ],
)
def test_bad_onnx_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        OnnxEmbedder(**kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize("threads", ["2", 2.5, -1, 0, True, 10**6])
def test_onnx_threads_must_be_a_sane_positive_integer(threads: object) -> None:
    most = 4 * (os.cpu_count() or 1)
    with pytest.raises(InvalidInput) as caught:
        OnnxEmbedder(threads=cast(Any, threads))
    assert str(caught.value) == (
        f"threads must be None or an integer from 1 to {most} (four per CPU), got {threads!r}"
    )
