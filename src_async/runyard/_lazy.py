"""Facades that import their classes on first use.

A part's package (``runyard.redis``) holds both its public names and its non-I/O modules, which
the I/O modules import; importing the classes eagerly in the package would make a cycle, so the
facade resolves them on first attribute access (PEP 562).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    facade: str, names: Mapping[str, str], extra: str | None = None
) -> Callable[[str], object]:
    """Return a module ``__getattr__`` for ``facade`` that imports ``names[name]`` on first use.

    Classes report the facade as their module, so internal layout never leaks into reprs. When the
    import fails for want of an optional driver, the ImportError names the ``extra`` to install.
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
        if isinstance(value, type):
            value.__module__ = facade
        setattr(sys.modules[facade], name, value)
        return value

    return __getattr__
