"""The base of runyard's settings classes: every refused field raises ConfigurationError."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from runyard.errors import ConfigurationError

__all__ = ["RunyardSettings", "settings_error"]


def settings_error(owner: str, exc: ValidationError) -> ConfigurationError:
    """One ConfigurationError naming every refused field of ``owner`` and why.

    The reasons are pydantic's messages, which never quote the input (settings classes set
    ``hide_input_in_errors``), so a secret given to the wrong field is not shown either.
    """
    reasons: list[str] = []
    names: list[str] = []
    for error in exc.errors(include_input=False, include_url=False):
        name = ".".join(str(part) for part in error["loc"]) or "(settings)"
        if name not in names:
            names.append(name)
        message = str(error["msg"]).removeprefix("Value error, ")
        reasons.append(f"{name}: {message}")
    return ConfigurationError(
        f"{owner} refused {len(names)} field(s): " + "; ".join(reasons), fields=tuple(names)
    )


class RunyardSettings(BaseSettings):
    """Settings whose construction raises ConfigurationError (never pydantic's
    ValidationError) for any bad field, naming each; inputs are never in the message."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise settings_error(type(self).__name__, exc) from None
