"""pyhybrid: hybrid retrieval (dense + lexical + graph, fused by convex, RRF or DBSF fusion) inside PostgreSQL."""

from typing import TYPE_CHECKING, Any

# What `from pyhybrid import X` gives, and the module it lives in: imported on first use (PEP 562), so that
# `pyhybrid search` through the search daemon (pyhybrid._launch) starts without psycopg or numpy.
_EXPORTS = {
    "server": "", "AbstainedWarning": "._base", "LexicalFallbackWarning": "._base", "SourceFailedWarning": "._base",
    "AsyncHybridClient": ".aio", "AsyncTenantSession": ".aio", "connect_async": ".aio",
    "HybridClient": ".client", "TenantSession": ".client", "connect": ".client",
    **dict.fromkeys(["ConflictError", "DatabaseError", "EmbedderError", "EmbedderMismatchError",
                     "ExtensionMissingError", "InvalidParameterError",
                     "PyhybridError", "QueryCanceledError", "ResourceError", "RetrievalError", "SchemaError",
                     "ServerError", "TenantError"], ".errors"),
    "fuse": ".fusion", "rrf_fuse": ".fusion", "RetrieveQuery": ".query", "retrieve": ".simple",
    **dict.fromkeys(["Chunk", "ChunkRef", "Edge", "EdgeResult", "HybridWeights", "IngestResult"], ".types"),
}

if TYPE_CHECKING:
    from . import server
    from ._base import AbstainedWarning, LexicalFallbackWarning, SourceFailedWarning
    from .aio import AsyncHybridClient, AsyncTenantSession, connect_async
    from .client import HybridClient, TenantSession, connect
    from .errors import (
        ConflictError,
        DatabaseError,
        EmbedderError,
        EmbedderMismatchError,
        ExtensionMissingError,
        InvalidParameterError,
        PyhybridError,
        QueryCanceledError,
        ResourceError,
        RetrievalError,
        SchemaError,
        ServerError,
        TenantError,
    )
    from .fusion import fuse, rrf_fuse
    from .query import RetrieveQuery
    from .simple import retrieve
    from .types import Chunk, ChunkRef, Edge, EdgeResult, HybridWeights, IngestResult


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pyhybrid' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(_EXPORTS[name] or f".{name}", __name__)
    value = module if not _EXPORTS[name] else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "AsyncHybridClient",
    "AsyncTenantSession",
    "Chunk",
    "ChunkRef",
    "ConflictError",
    "DatabaseError",
    "Edge",
    "EdgeResult",
    "EmbedderError",
    "EmbedderMismatchError",
    "ExtensionMissingError",
    "HybridClient",
    "HybridWeights",
    "IngestResult",
    "LexicalFallbackWarning",
    "AbstainedWarning",
    "InvalidParameterError",
    "PyhybridError",
    "QueryCanceledError",
    "ResourceError",
    "RetrievalError",
    "RetrieveQuery",
    "SchemaError",
    "ServerError",
    "SourceFailedWarning",
    "TenantError",
    "TenantSession",
    "connect",
    "connect_async",
    "retrieve",
    "server",
    "fuse",
    "rrf_fuse",
]
__version__ = "0.3.0"
