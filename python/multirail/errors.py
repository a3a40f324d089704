"""multirail.Error and its subclasses, one per MR_ERR_* code of capi/multirail.h.

Error subclasses RuntimeError, so code that catches RuntimeError (as torch
users do) catches these too. e.code is the library's negative code.
"""

OK = 0
ERR_INVALID = -1
ERR_CONFIG = -2
ERR_BOOTSTRAP = -3
ERR_PEER = -4
ERR_CLOSED = -5
ERR_ABORTED = -6
ERR_TIMEOUT = -7
ERR_TRUNCATED = -8
ERR_FORK = -9
ERR_PANIC = -10
ERR_INTERNAL = -11


class Error(RuntimeError):
    """An error of the multirail library: .code (negative MR_ERR_* code), .message."""

    code = ERR_INTERNAL

    def __init__(self, code=None, message=""):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(message or f"multirail error {self.code}")


class InvalidError(Error, ValueError):
    code = ERR_INVALID


class ConfigError(Error):
    code = ERR_CONFIG


class BootstrapError(Error):
    code = ERR_BOOTSTRAP


class PeerError(Error):
    code = ERR_PEER


class ClosedError(Error):
    code = ERR_CLOSED


class AbortedError(Error):
    code = ERR_ABORTED


class TimeoutError(Error, TimeoutError):  # noqa: A001 (shadows the builtin on purpose: it subclasses it)
    code = ERR_TIMEOUT


class TruncatedError(Error):
    code = ERR_TRUNCATED


class ForkError(Error):
    code = ERR_FORK


class PanicError(Error):
    code = ERR_PANIC


class InternalError(Error):
    code = ERR_INTERNAL


_BY_CODE = {
    c.code: c
    for c in (
        InvalidError,
        ConfigError,
        BootstrapError,
        PeerError,
        ClosedError,
        AbortedError,
        TimeoutError,
        TruncatedError,
        ForkError,
        PanicError,
        InternalError,
    )
}


def error_for(code, message):
    """The Error subclass instance for a negative code."""
    return _BY_CODE.get(code, Error)(code, message)
