"""Exceptions raised by pyhybrid, keyed by SQLSTATE where they come from the server.

PyhybridError
 +-- InvalidParameterError   (22023, and bad arguments caught before any round trip)
 +-- TenantError             (42501: no tenant, another tenant's row, insufficient privilege)
 +-- RetrievalError          (a retrieval could not be done: every source failed, fusion misuse)
 +-- ExtensionMissingError   (0A000 / 58P01: vector, age or pg_textsearch missing)
 +-- SchemaError             (the hybrid schema is missing or out of date: run pyhybrid migrate)
 +-- ServerError             (the embedded server or the DSN)

Errors mapped from the server chain the psycopg error as __cause__ and keep its SQLSTATE.
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


def from_psycopg(exc: BaseException) -> PyhybridError:
    """Map a psycopg error to the pyhybrid exception for its SQLSTATE (the caller chains it)."""
    sqlstate = getattr(exc, "sqlstate", None)
    diag = getattr(exc, "diag", None)
    message = getattr(diag, "message_primary", None) or str(exc).strip()
    hint = getattr(diag, "message_hint", None)
    if hint:
        message = f"{message} (hint: {hint})"
    cls: type[PyhybridError]
    if sqlstate in ("22023", "22P02", "22000", "22004", "2200N", "22021", "23502", "23514"):
        cls = InvalidParameterError
    elif sqlstate == "42501":
        cls = TenantError
    elif sqlstate in ("0A000", "58P01"):
        cls = ExtensionMissingError
    elif sqlstate in ("3F000", "42883", "42P01"):
        cls = SchemaError
        message = f"{message} (is the hybrid schema installed? run: pyhybrid migrate)"
    elif sqlstate is not None and sqlstate.startswith("08"):
        cls = ServerError
    else:
        cls = RetrievalError
    return cls(message, sqlstate=sqlstate)
