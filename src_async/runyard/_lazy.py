"""Facades that import their classes on first use.

A part's package (``runyard.redis``) holds both its public names and its non-I/O modules, which
the I/O modules import; importing the classes eagerly in the package would make a cycle, so the
facade resolves them on first attribute access (PEP 562).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping

__all__ = ["lazy_dir", "lazy_exports", "moved_names"]


def lazy_exports(
    facade: str, names: Mapping[str, str], extra: str | None = None
) -> Callable[[str], object]:
    """Return a module ``__getattr__`` for ``facade`` that imports ``names[name]`` on first use.

    When the import fails for want of an optional driver, the ImportError names the ``extra`` to
    install. (Classes keep their defining module: rewriting ``__module__`` would break
    ``inspect.getsource`` and make it depend on import order.)
    """

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {facade!r} has no attribute {name!r}")
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            if extra is None or (exc.name or "").partition(".")[0] == "runyard":
                raise
            raise ImportError(
                f"{facade}.{name} needs the {extra!r} extra, which is not installed ({exc}); "
                f"install it with: pip install 'runyard[{extra}]'",
                name=exc.name,
            ) from exc
        value = getattr(loaded, name)
        setattr(sys.modules[facade], name, value)
        return value

    return __getattr__


def lazy_dir(
    module_globals: dict[str, object], names: Mapping[str, str]
) -> Callable[[], list[str]]:
    """Return a module ``__dir__`` that lists the lazy names beside the loaded ones."""

    def __dir__() -> list[str]:
        return sorted({*module_globals, *names})

    return __dir__


def moved_names(package: str, moved: Mapping[str, str]) -> Callable[[str], object]:
    """Return a module ``__getattr__`` that serves names that moved to another module, with a
    DeprecationWarning naming where they live now."""

    def __getattr__(name: str) -> object:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} moved: import it from {home} (from {home} import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
