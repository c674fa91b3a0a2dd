"""kiln.Error: the one exception the package raises for failed libkiln calls and bad arguments."""
from __future__ import annotations


class Error(RuntimeError):
    """A failed kiln call: str(error) is the message (libkiln's own, for C failures) and
    `status` the name of its kiln_status ("KILN_ERROR_IO", "KILN_ERROR_INVALID_ARGUMENT", ...)."""

    status: str

    def __init__(self, message: str, status: str = "KILN_ERROR") -> None:
        super().__init__(message)
        self.status = status
