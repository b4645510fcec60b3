"""Exceptions raised by pyhybrid, keyed by SQLSTATE where they come from the server.

PyhybridError
 +-- InvalidParameterError   (22023 and the rest of class 22, 23502, 23514, and bad arguments caught
 |    |                       before any round trip)
 |    +-- EmbedderMismatchError (a corpus was embedded by another embedder than the one a call uses)
 +-- EmbedderError           (an embedder failed: an endpoint's error or silence, a model missing)
 +-- TenantError             (42501: no tenant, another tenant's row, insufficient privilege)
 +-- RetrievalError          (a retrieval could not be done: every source failed, a stale index,
 |                            fusion misuse; 55000 and errors raised by pyhybrid's SQL, class P0)
 +-- ExtensionMissingError   (0A000 / 58P01: vector, age or pg_textsearch missing)
 +-- SchemaError             (3F000, 42883, 42P01: the hybrid schema is missing or out of date)
 +-- ServerError             (class 08, the embedded server or the DSN)
 +-- DatabaseError           (anything else the server raised; sqlstate tells what)
      +-- QueryCanceledError (class 57: statement_timeout, a cancel request, an admin shutdown)
      +-- ConflictError      (class 40 and 55P03: deadlock, serialization failure, lock timeout;
      |                       retrying the whole transaction may succeed)
      +-- ResourceError      (class 53: out of memory, disk full, too many connections)

An exact SQLSTATE is looked up first, then its two-character class. Errors mapped from the server
chain the psycopg error as __cause__ and keep its SQLSTATE.
"""

from __future__ import annotations


class PyhybridError(Exception):
    """Base of every pyhybrid error."""

    sqlstate: str | None = None

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        if sqlstate is not None:
            self.sqlstate = sqlstate


class InvalidParameterError(PyhybridError, ValueError):
    """An argument broke a rule; the message names the parameter and the rule."""

    sqlstate = "22023"


class EmbedderMismatchError(InvalidParameterError):
    """A query or write uses another embedder than the one a corpus records; the message names both."""


class EmbedderError(PyhybridError):
    """An embedder failed: an endpoint answered with an error or not at all, a model or its package is missing."""


class TenantError(PyhybridError, PermissionError):
    """No tenant context, or a row or role outside the tenant the caller acts for."""

    sqlstate = "42501"


class RetrievalError(PyhybridError):
    """A retrieval could not be carried out (for example every source failed)."""


class ExtensionMissingError(PyhybridError):
    """A PostgreSQL extension that the call needs is not installed."""

    sqlstate = "0A000"


class SchemaError(PyhybridError):
    """The hybrid schema is missing or out of date."""


class ServerError(PyhybridError):
    """The embedded server could not be started or reached, or the DSN is unusable."""


class DatabaseError(PyhybridError):
    """An error from the server that no more specific class describes (see sqlstate)."""


class QueryCanceledError(DatabaseError):
    """The statement was canceled: statement_timeout, a cancel request, or an admin shutdown."""

    sqlstate = "57014"


class ConflictError(DatabaseError):
    """A deadlock, serialization failure or lock timeout: retrying the transaction may succeed."""


class ResourceError(DatabaseError):
    """The server ran out of a resource (memory, disk, connections)."""


_BY_SQLSTATE: dict[str, type[PyhybridError]] = {
    "22023": InvalidParameterError, "23502": InvalidParameterError, "23514": InvalidParameterError,
    "42501": TenantError,
    "0A000": ExtensionMissingError, "58P01": ExtensionMissingError,
    "3F000": SchemaError, "42883": SchemaError, "42P01": SchemaError,
    "55000": RetrievalError, "55P03": ConflictError,
}
_BY_CLASS: dict[str, type[PyhybridError]] = {
    "22": InvalidParameterError, "08": ServerError, "P0": RetrievalError,
    "57": QueryCanceledError, "40": ConflictError, "53": ResourceError,
}


def error_class(sqlstate: str | None) -> type[PyhybridError]:
    """The pyhybrid exception for a SQLSTATE: by the exact code, else by its class, else DatabaseError."""
    if sqlstate is None:
        return DatabaseError
    return _BY_SQLSTATE.get(sqlstate) or _BY_CLASS.get(sqlstate[:2]) or DatabaseError


def from_psycopg(exc: BaseException) -> PyhybridError:
    """Map a psycopg error to the pyhybrid exception for its SQLSTATE (the caller chains it)."""
    sqlstate = getattr(exc, "sqlstate", None)
    diag = getattr(exc, "diag", None)
    message = getattr(diag, "message_primary", None) or str(exc).strip()
    hint = getattr(diag, "message_hint", None)
    if hint:
        message = f"{message} (hint: {hint})"
    if sqlstate == "53200" and "shared memory" in message:  # the lock table: a lock a tenant's partition and index
        message += "; with thousands of tenants, see docs/tenancy.md, 'Many tenants and the lock table'"
    cls = error_class(sqlstate)
    if cls is SchemaError:
        message = f"{message} (is the hybrid schema installed? run: pyhybrid migrate)"
    if sqlstate is None and isinstance(exc, psycopg_operational_errors()):
        cls = ServerError
    return cls(message, sqlstate=sqlstate)


def psycopg_operational_errors() -> tuple[type[BaseException], ...]:
    """psycopg's errors raised without a SQLSTATE when the connection itself fails."""
    import psycopg

    return (psycopg.OperationalError, psycopg.InterfaceError)
