"""pyhybrid: hybrid retrieval (dense + lexical + graph, fused by convex, RRF or DBSF fusion) inside PostgreSQL."""

from . import server
from ._base import AbstainedWarning, LexicalFallbackWarning, SourceFailedWarning
from .aio import AsyncHybridClient, AsyncTenantSession, connect_async
from .client import HybridClient, TenantSession, connect
from .errors import (
    ConflictError,
    DatabaseError,
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

__all__ = [
    "AsyncHybridClient",
    "AsyncTenantSession",
    "Chunk",
    "ChunkRef",
    "ConflictError",
    "DatabaseError",
    "Edge",
    "EdgeResult",
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
