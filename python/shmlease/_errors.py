"""The exception classes: one per library code under Error, their numbers,
C names and messages taken from the library's error table at import."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Tuple, Type

from . import _shmlease

if TYPE_CHECKING:
    from ._records import LeaseInfo



class Error(Exception):
    """A shmlease error. Subclasses, one per library code, carry .code (the
    negative SHL_E* value) and .name ("SHL_EBUSY"), taken at import from the
    library's error table (shmlease.errors())."""

    code: int = 0
    name: str = "SHL_UNKNOWN"


# The codes' Python names and bases are chosen here; their numbers, C names and
# messages come from the library (_bind_errors below). A code the library adds
# later gets a class too, made at import, without an edit here.


class NotAcquired(Error):
    """The lease was not acquired: Busy (one try) or TimedOut (a wait ran
    out). Catch this one where either means "someone else has it", as
    filelock's Timeout is caught."""


class Busy(NotAcquired):
    """Held by another owner and unexpired. .holder is the holder seen at the
    refusal (a LeaseInfo; also .owner, .token, .remaining)."""

    name = "SHL_EBUSY"
    holder: Optional["LeaseInfo"] = None  # set by the extension at the refusal

    @property
    def owner(self) -> Optional[str]:
        return self.holder.owner if self.holder else None

    @property
    def token(self) -> Optional[int]:
        return self.holder.token if self.holder else None

    @property
    def remaining(self) -> Optional[float]:
        """Seconds the holder had left at the refusal."""
        return self.holder.remaining if self.holder else None


class Lost(Error):
    name = "SHL_ELOST"


class InvalidArgument(Error, ValueError):
    name = "SHL_EINVAL"


class ClockBackwards(Error, ValueError):
    name = "SHL_ECLOCK"


class NotFound(Error):
    name = "SHL_ENOENT"


class Full(Error):
    name = "SHL_EFULL"


class Corrupt(Error):
    name = "SHL_ECORRUPT"


class VersionMismatch(Error):
    name = "SHL_EVERSION"


class PermissionDenied(Error):
    name = "SHL_EPERM"


class Exists(Error):
    name = "SHL_EEXIST"


class TooBig(Error, ValueError):
    name = "SHL_E2BIG"


class NoSpace(Error):
    name = "SHL_ENOSPC"


class OutOfMemory(Error, MemoryError):
    name = "SHL_ENOMEM"


class SystemFailure(Error):
    name = "SHL_ESYS"


class TimeNamespace(Error):
    name = "SHL_ETIMENS"


class Broken(Error):
    name = "SHL_EBROKEN"


class UsedAfterFork(Error):
    name = "SHL_EFORK"


class TimedOut(NotAcquired, TimeoutError):
    name = "SHL_ETIMEDOUT"


class Mismatch(Error):
    name = "SHL_EMISMATCH"


class Canceled(Error):
    name = "SHL_ECANCELED"


class Stale(Error):
    name = "SHL_ESTALE"


class TokensExhausted(Error):
    name = "SHL_ETOKENS"


class NotSupported(Error):
    """The call has no meaning on this kind of table (on an etcd table: a
    manual clock, guard, clock_set, repair), or the library was built
    without etcd support and the name is an etcd:// one."""
    name = "SHL_ENOTSUP"


class Unavailable(Error):
    """The etcd cluster did not answer within the deadline (5 s): the change
    may or may not have happened."""
    name = "SHL_EUNAVAIL"


class Removed(Error):
    """The table was removed under this handle (shmlease rm, shl_unlink, or
    its name deleted or given to a new table): open it again. A new table
    under the name does not continue this one's tokens unless it was created
    with a token state file."""
    name = "SHL_EREMOVED"


# Aliases a Python user would look for.
Timeout = TimedOut
ForkError = UsedAfterFork

# A code the library gains later is named after its C name (SHL_EXYZ -> EXYZ).

_BY_CODE: Dict[int, Type[Error]] = {}
generated: Dict[str, Type[Error]] = {}  # classes made for codes not named here
bound: List[str] = []  # the names of every class bound to a code


def _error_classes(base: Type[Error]) -> Iterator[Type[Error]]:
    for c in base.__subclasses__():
        yield c
        yield from _error_classes(c)


def _bind_errors() -> None:
    # Every class below Error that names a code (NotAcquired names none).
    static = {c.name: c for c in _error_classes(Error) if "name" in c.__dict__}
    for code, cname, message in _shmlease.errors():
        if code == 0:
            continue
        cls = static.pop(cname, None)
        if cls is None:
            pyname = cname[len("SHL_"):]
            cls = type(pyname, (Error,), {"__module__": "shmlease", "name": cname})
            generated[pyname] = cls
        cls.code = code
        cls.__doc__ = "%s (%d): %s.%s" % (cname, code, message,
                                           "\n\n" + inspect.cleandoc(cls.__doc__)
                                           if cls.__doc__ else "")
        _BY_CODE[code] = cls
        bound.append(cls.__name__)
    if static:  # the package was built against another library
        raise ImportError("shmlease: the library has no code %s" % ", ".join(sorted(static)))


_bind_errors()
for _c in _error_classes(Error):
    _c.__module__ = "shmlease"  # where users find them
Error.__module__ = "shmlease"


def error_class(code: int) -> Type[Error]:
    """The exception class of a library return code (Error for an unknown one)."""
    return _BY_CODE.get(code, Error)


def errors() -> List[Tuple[int, str, str]]:
    """The library's error table: (code, name, message) for every code."""
    return _shmlease.errors()
