"""Vectors on the wire: the one-pass ``vector[]`` parameter and the embedders' array form."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg import sql

from timestone import FactInput, HashEmbedder, Memory, WordLlamaEmbedder
from timestone._arrays import TextArray
from timestone._tokenizing import SERIAL_TOKENIZE_CHARS
from timestone._vectors import (
    MAX_DIMENSION,
    VectorArray,
    half_indexed,
    index_opclass,
    keyed,
    register_vector_array,
)
from timestone.embedders import aembed_rows, check_rows, embed_rows
from timestone.errors import EmbedderError, InvalidInput

REF = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def conn(memory: Memory) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(memory.dsn) as conn:  # the memory created the extensions
        register_vector(conn)
        register_vector_array(conn)
        yield conn


def test_text_array_reads_back_as_given_through_a_raw_cursor(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    """The binary form has none of the text form's quoting: commas, braces, quotes,
    backslashes, the word NULL and the empty string come back as they went."""
    given = ["mira", "o'brien & co.", "a,b", "{x}", '"q"', "back\\slash", "NULL", "", "château"]
    wire = TextArray(given)
    row = conn.execute("SELECT %s::text[], cardinality(%s::text[])", [wire, wire]).fetchone()
    assert row == (given, len(given))
    raw = psycopg.RawCursor(conn)  # as a search sends it: numbered placeholders
    assert raw.execute("SELECT $1::text[], cardinality($1)", [wire]).fetchone() == row
    empty = conn.execute("SELECT %s::text[] = '{}'::text[]", [TextArray(())]).fetchone()
    assert empty == (True,)
    assert wire.wire() is wire.wire()  # encoded once, however many statements send it


def test_vector_array_reads_back_as_each_vector_dumped_alone(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    rows = np.array(
        [[0.5, -1.25, 3.0e38, 1e-30, 0.0], [1.0, 2.0, 3.0, 4.0, 5.0], [-0.1, 0.2, -0.3, 0.4, -0.5]],
        dtype=np.float32,
    )
    with conn:
        got = conn.execute(
            "SELECT ord, v::vector(5) FROM unnest(%b) WITH ORDINALITY AS x(v, ord) ORDER BY ord",
            (VectorArray(list(rows), 5),),
        ).fetchall()
        one_by_one = conn.execute(
            "SELECT v FROM unnest(%b::vector[]) AS v", ([Vector(r) for r in rows],)
        ).fetchall()
    assert [r[0] for r in got] == [1, 2, 3]
    read = np.stack([cast(Vector, v).to_numpy() for _, v in got])
    assert read.dtype == np.float32
    np.testing.assert_array_equal(read, rows)  # bit for bit: float32 both ways
    assert [v for _, v in got] == [v for (v,) in one_by_one]


def test_an_empty_vector_array_is_an_empty_array(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    with conn:
        row = conn.execute(
            "SELECT cardinality(%b), pg_typeof(%b)::text", (VectorArray([], 7),) * 2
        ).fetchone()
    assert row == (0, "vector[]")


def test_a_vector_of_another_dimension_is_refused_by_the_column(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    with conn, pytest.raises(psycopg.errors.DataException, match="expected 3 dimensions"):
        conn.execute(
            "SELECT v::vector(3) FROM unnest(%b) AS v",
            (VectorArray([np.ones(4, dtype=np.float32)], 4),),
        )


def test_wordllama_array_form_is_its_list_form() -> None:
    embedder = WordLlamaEmbedder()
    texts = ["Mira works at Acme.", "!", "x" * 600, "Where does Mira work?"]
    array = embedder.embed_array(texts)
    assert array.shape == (4, 256)
    assert array.dtype == np.float32
    assert array.tolist() == embedder.embed(texts)
    assert embedder.embed_array([]).shape == (0, 256)


def test_wordllama_vectors_are_the_models_own_bit_for_bit() -> None:
    """The batch is tokenized once and summed a chunk at a time: each vector must be
    what WordLlama computes for its text alone."""
    import wordllama

    embedder = WordLlamaEmbedder()
    texts = [
        *(
            f"Person {i:07d} works at Company {i % 97:05d} since {1990 + i % 30}"
            for i in range(150)
        ),
        "Mira Sołtys moved to Łódź",
        "Ørsted",
        "東京に住んでいる",
        "!",
        "a b c " * 300,
        "x" * 600,
        "y" * (embedder.max_chars + 500),
        "Where does Mira work?",
    ]
    model: Any = wordllama.WordLlama.load(
        cache_dir=Path(wordllama.__file__).parent, disable_download=True, trunc_dim=256
    )
    alone: npt.NDArray[np.float32] = np.stack(
        [model.embed([t[: embedder.max_chars]], norm=True, batch_size=1)[0] for t in texts]
    )
    assert sum(len(t[: embedder.max_chars]) for t in texts) >= SERIAL_TOKENIZE_CHARS
    np.testing.assert_array_equal(embedder.embed_array(texts), alone)
    np.testing.assert_array_equal(embedder.embed_array(texts[::-1]), alone[::-1])
    few = [*range(10), *range(150, 154), 157]  # an add_facts call's: tokenized one by one
    assert sum(len(texts[i]) for i in few) < SERIAL_TOKENIZE_CHARS
    np.testing.assert_array_equal(embedder.embed_array([texts[i] for i in few]), alone[few])
    for text, vector in zip(texts, alone, strict=True):  # one text: a search's question
        np.testing.assert_array_equal(embedder.embed_array([text])[0], vector)


@pytest.mark.parametrize("dimension", [64, 128, 256])
def test_wordllama_read_from_its_files_is_the_model_it_loads(dimension: int) -> None:
    """The tokenizer and the token vectors are read from the wheel's files without the
    package's loader: at each dimension, the vectors are those of the model it loads."""
    import wordllama

    embedder = WordLlamaEmbedder(dimension)
    texts = ["Mira works at Acme.", "Mira Sołtys moved to Łódź", "東京に住んでいる", "!"]
    model: Any = wordllama.WordLlama.load(
        cache_dir=Path(wordllama.__file__).parent, disable_download=True, trunc_dim=dimension
    )
    alone = np.stack([model.embed([t], norm=True, batch_size=1)[0] for t in texts])
    assert alone.shape == (len(texts), dimension)
    np.testing.assert_array_equal(embedder.embed_array(texts), alone)


def test_loading_wordllama_does_not_import_its_package() -> None:
    """The model is loaded without importing ``wordllama`` (its import cost as much as the
    load: a command that embeds pays for it at every start)."""
    probe = (
        "import sys; from timestone import WordLlamaEmbedder; e = WordLlamaEmbedder(); "
        "e.warm(); v = e.embed(['Mira works at Acme.']); "
        "print(len(v[0]), 'wordllama' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.split() == ["256", "False"]


@pytest.mark.parametrize("texts", [[""], ["Mira works at Acme.", ""]])
def test_wordllama_refuses_an_empty_text_by_its_place(texts: list[str]) -> None:
    embedder = WordLlamaEmbedder()
    with pytest.raises(
        InvalidInput, match=f"empty text \\(text {len(texts) - 1} of {len(texts)}\\)"
    ):
        embedder.embed_array(texts)
    with pytest.raises(InvalidInput, match="empty text"):
        embedder.embed(texts)


async def test_rows_take_the_array_form_when_the_embedder_has_it() -> None:
    class ArrayOnly(WordLlamaEmbedder):
        def embed(self, texts: object) -> list[list[float]]:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
            raise AssertionError("the list form was used")

        async def aembed(self, texts: object) -> list[list[float]]:  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
            raise AssertionError("the list form was used")

    embedder = ArrayOnly()
    texts = [f"fact number {i}" for i in range(100)]
    expected = WordLlamaEmbedder().embed_array(texts)
    np.testing.assert_array_equal(embed_rows(embedder, texts), expected)
    np.testing.assert_array_equal(await aembed_rows(embedder, texts), expected)


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        (np.zeros((2, 256)), "2 vectors for 1 texts"),
        (np.zeros((1, 255)), "dimension 255"),
        (np.full((1, 256), np.inf), "NaN, infinity"),
        ({"not": "vectors"}, "returned dict, not a list of vectors"),
        ([[1e300] * 256], "beyond a 4-byte float"),
        ([["0.5"] * 255 + ["half"]], "not numbers"),
        ([[None] * 256], "NaN"),  # numpy reads None as NaN: refused as such
        (np.zeros((1, 1, 256)), "returned ndarray, not a list of vectors"),
        ([0.5] * 256, "returned list, not a list of vectors"),
    ],
)
def test_check_rows_names_what_is_wrong(vectors: object, message: str) -> None:
    with pytest.raises(EmbedderError, match=message):
        check_rows(WordLlamaEmbedder(), ["one text"], vectors)


class _Mine:
    """A user's embedder of 4 dimensions that returns what it is given to return."""

    name = "my-embedder"
    dimension = 4

    def __init__(self) -> None:
        self.answer: Callable[[int], object] = lambda n: [[0.5, 0.5, 0.5, 0.5]] * n

    def embed(self, texts: object) -> list[list[float]]:
        return cast(list[list[float]], self.answer(len(cast(list[str], texts))))

    async def aembed(self, texts: object) -> list[list[float]]:
        return self.embed(texts)


_NOT_ROWS: list[tuple[Callable[[int], object], str]] = [
    # a numpy FFT left unconverted: the cast to float32 dropped the imaginary part
    (
        lambda n: np.array([[1 + 2j, 1j, 3j, 0.5]] * n, dtype=np.complex64),
        "embedder 'my-embedder' returned vectors of complex64; a vector holds real numbers",
    ),
    (
        lambda n: [[np.complex128(1 + 2j), 1.0, 0.0, 0.5]] * n,
        "embedder 'my-embedder' returned vectors of complex128; a vector holds real numbers",
    ),
    (
        lambda n: [[np.complex64(1 + 2j), None, 0.0, 0.5]] * n,  # an array of objects
        "embedder 'my-embedder' returned complex values; a vector holds real numbers",
    ),
    # a model's output not squeezed: each vector a (dimension, 1) column
    (
        lambda n: [np.full((4, 1), 0.5, dtype=np.float32)] * n,
        "embedder 'my-embedder' returned a vector of shape (4, 1) for text 0; a vector is "
        "one row of numbers",
    ),
    (
        lambda n: [[[0.5]] * 4] * n,
        "embedder 'my-embedder' returned vectors of shape (4, 1); a vector is one row of 4 numbers",
    ),
    (
        lambda n: [np.array(0.5)] * n,
        "embedder 'my-embedder' returned a vector of shape () for text 0; a vector is one "
        "row of numbers",
    ),
]


@pytest.mark.parametrize(("answer", "message"), _NOT_ROWS)
def test_check_rows_refuses_complex_values_and_vectors_of_another_shape(
    answer: Callable[[int], object], message: str
) -> None:
    with pytest.raises(EmbedderError) as caught:
        check_rows(_Mine(), ["one", "two"], answer(2))
    assert str(caught.value) == message


def _held(dsn: str) -> tuple[object, ...] | None:
    """What the database holds: episodes, entities, facts and items, all groups."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM timestone.episodes),"
            " (SELECT count(*) FROM timestone.entities),"
            " (SELECT count(*) FROM timestone.facts),"
            " (SELECT count(*) FROM timestone.items)"
        ).fetchone()


def test_a_user_embedders_complex_or_column_vectors_write_nothing(fresh_dsn: str) -> None:
    """The complex vectors were stored without their imaginary parts; the columns failed
    in the vector adapter with "expected ndim to be 1"."""
    mine = _Mine()
    with Memory.open(fresh_dsn, embedder=mine) as mem:
        for answer, message in _NOT_ROWS:
            mine.answer = answer
            with pytest.raises(EmbedderError) as caught:
                mem.add_facts("g", [FactInput("Ann", "WORKS_AT", "Acme")], reference_time=REF)
            assert str(caught.value) == message
            with pytest.raises(EmbedderError) as caught:
                mem.search("g", "Ann")
            assert str(caught.value) == message
        assert _held(fresh_dsn) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("dimension", "kind", "opclass"),
    [
        (256, "::vector(264)", "vector_cosine_ops"),
        (1992, "::vector(2000)", "vector_cosine_ops"),
        (1993, "::halfvec(2001)", "halfvec_cosine_ops"),
        (3072, "::halfvec(3080)", "halfvec_cosine_ops"),
        (MAX_DIMENSION, "::halfvec(4000)", "halfvec_cosine_ops"),
    ],
)
def test_the_index_holds_full_precision_up_to_pgvectors_2000_dimensions(
    dimension: int, kind: str, opclass: str
) -> None:
    expression = keyed(sql.SQL("embedding"), sql.SQL("group_id"), dimension).as_string()
    assert expression.endswith(kind)
    assert index_opclass(dimension).as_string() == opclass
    assert half_indexed(dimension) == (opclass == "halfvec_cosine_ops")


class _Declared:
    """An embedder as a user may write one, declaring what it is given."""

    def __init__(self, name: object, dimension: object) -> None:
        self.name = name
        self.dimension = dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("a refused embedder is never called")

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("a refused embedder is never called")


class _NoAsync:
    name = "blocking only"
    dimension = 8

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("a refused embedder is never called")


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        ("openai:text-embedding-3-small", r"got str without embed, aembed"),
        (_NoAsync(), r"got _NoAsync without aembed"),
        (_Declared("", 8), r"without a name \(a non-empty string\)"),
        (_Declared(None, 8), r"without a name"),
        (_Declared("mine", "256"), r"embedder 'mine' declares dimension '256'"),
        (_Declared("mine", 0), r"declares dimension 0; a positive integer"),
        (_Declared("mine", True), r"declares dimension True"),
        (HashEmbedder(dimension=MAX_DIMENSION + 1), r"declares 3,993 dimensions; .* at most 3,992"),
    ],
)
def test_an_embedder_the_indexes_cannot_hold_is_refused_before_the_database_is_touched(
    fresh_dsn: str, embedder: object, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        Memory.open(fresh_dsn, embedder=embedder)  # pyright: ignore[reportArgumentType]
    with psycopg.connect(fresh_dsn) as conn:
        row = conn.execute("SELECT to_regclass('timestone.meta')").fetchone()
    assert row == (None,)  # not even migrated


class _Warming(HashEmbedder):
    """A HashEmbedder with a model to load: counts its loads, and may fail them."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(dimension=16)
        self.loads = 0
        self.fail = fail

    def warm(self) -> None:
        self.loads += 1
        if self.fail:
            raise RuntimeError("weights not found")


def test_open_loads_the_embedders_model_beside_its_start(fresh_dsn: str) -> None:
    warming = _Warming()
    with Memory.open(fresh_dsn, embedder=warming):
        assert warming.loads == 1  # done before open returned
    cold = _Warming()
    with Memory.open(fresh_dsn, embedder=cold, warm=False):
        assert cold.loads == 0
    failing = _Warming(fail=True)
    with Memory.open(fresh_dsn, embedder=failing) as mem:  # left for the first use to raise
        assert failing.loads == 1
        assert mem.search("g", "anything").facts == []
    with pytest.raises(InvalidInput, match="warm must be True or False, got str"):
        Memory.open(fresh_dsn, embedder=_Warming(), warm="yes")  # pyright: ignore[reportArgumentType]


async def test_async_open_loads_the_model_too(fresh_dsn: str) -> None:
    from timestone import AsyncMemory

    warming = _Warming()
    mem = await AsyncMemory.open(fresh_dsn, embedder=warming)
    try:
        assert warming.loads == 1
    finally:
        await mem.close()


class _Unreachable(OSError):
    """What a user's embedder behind a network raises when its server is down."""


def _refused(n: int) -> object:
    raise _Unreachable(111, "Connection refused")


class _Spans(_Mine):
    """A user's embedder with token-level output, late chunking on."""

    late_chunking = True

    def embed_spans(self, text: str, spans: object) -> object:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_a_user_embedder_that_raises_is_an_embedder_error_and_writes_nothing(
    fresh_dsn: str,
) -> None:
    """Each way in (a write, a search, an item, a document's late chunking) raises
    ``EmbedderError`` naming the embedder and what it raised, the original as its cause,
    and nothing is written."""
    mine = _Mine()
    mine.answer = _refused
    message = "embedder 'my-embedder' failed: _Unreachable: [Errno 111] Connection refused"
    calls: list[Callable[[Memory], object]] = [
        lambda m: m.add_facts("g", [FactInput("Ann", "WORKS_AT", "Acme")], reference_time=REF),
        lambda m: m.search("g", "Ann"),
        lambda m: m.put_item("g", ("prefs",), "k", {"colour": "green"}),
        lambda m: m.search_items("g", ("prefs",), query="colour"),
    ]
    with Memory.open(fresh_dsn, embedder=mine) as mem:
        for call in calls:
            with pytest.raises(EmbedderError) as caught:
                call(mem)
            assert str(caught.value) == message
            assert isinstance(caught.value.__cause__, _Unreachable)
    with Memory.open(fresh_dsn, embedder=_Spans()) as mem:
        with pytest.raises(EmbedderError) as caught:
            mem.add_document("g", "doc://handbook", "Ann works at Acme. " * 40, reference_time=REF)
        assert str(caught.value) == (
            "embedder 'my-embedder' failed: RuntimeError: CUDA out of memory. Tried to "
            "allocate 2.00 GiB"
        )
    assert _held(fresh_dsn) == (0, 0, 0, 0)


async def test_an_async_user_embedder_that_raises_is_an_embedder_error(fresh_dsn: str) -> None:
    from timestone import AsyncMemory

    mine = _Mine()
    mine.answer = _refused
    async with await AsyncMemory.open(fresh_dsn, embedder=mine) as amem:
        with pytest.raises(EmbedderError, match="failed: _Unreachable") as caught:
            await amem.add_facts("g", [FactInput("Ann", "WORKS_AT", "Acme")], reference_time=REF)
        assert isinstance(caught.value.__cause__, _Unreachable)
