"""``BaseAPIClass``: the name and description every model object carries."""

from __future__ import annotations

from typing import Any


def _text(value: Any, what: str, default: str) -> str:
    """``value`` as the text of ``what``: None gives ``default``; anything but a str is a
    TypeError."""
    if value is None:
        return default
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str or None; got {type(value).__name__}")
    return value


class BaseAPIClass:
    """An object with a ``name`` and a ``description`` (both text).

    Parameters
    ----------
    name : optional str; None gives the class's default (``"__unnamed__"`` here,
        e.g. ``"Unnamed Bath"`` for a :class:`~nonmarkov.Bath`).
    description : optional str; None gives an empty description.

    Setting either to None, or deleting it, restores the default; any other
    value that is not a str is a TypeError.
    """

    _default_name = "__unnamed__"
    _default_description = ""

    def __init__(self, name: str | None = None, description: str | None = None) -> None:
        self.name = name
        self.description = description

    @property
    def name(self) -> str:
        """The object's name (text)."""
        return self._name

    @name.setter
    def name(self, value: str | None) -> None:
        self._name = _text(value, "name", self._default_name)

    @name.deleter
    def name(self) -> None:
        self._name = self._default_name

    @property
    def description(self) -> str:
        """A longer description of the object (text)."""
        return self._description

    @description.setter
    def description(self, value: str | None) -> None:
        self._description = _text(value, "description", self._default_description)

    @description.deleter
    def description(self) -> None:
        self._description = self._default_description

    def __str__(self) -> str:
        text = f"{type(self).__name__} {self.name!r}"
        return f"{text}: {self.description}" if self.description else text
