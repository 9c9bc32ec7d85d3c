"""A strict name -> implementation registry.

The registry key is also the config tag (``kind``) and the label in reports, so one
name is used everywhere. Duplicate names raise; unknown names raise and list the known
ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One registered implementation: its factory and the pydantic model of its parameters."""

    name: str
    factory: T
    params: Any  # a pydantic model class with a ``kind: Literal[name]`` field, or None


class Registry(Generic[T]):
    """Maps names to implementations of one role (batch policy, router, cost model, ...)."""

    def __init__(self, role: str) -> None:
        self.role = role
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, params: Any = None) -> Callable[[T], T]:
        """Class decorator: register ``factory`` under ``name``.

        Raises ValueError if the name is already taken.
        """

        def decorate(factory: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.role} {name!r} is already registered")
            self._entries[name] = Entry(name, factory, params)
            return factory

        return decorate

    def entry(self, name: str) -> Entry[T]:
        """The entry registered as ``name``; ValueError naming the known ones if none."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise ValueError(f"unknown {self.role} {name!r}; known: {known}") from None

    def get(self, name: str) -> T:
        """The factory registered as ``name``."""
        return self.entry(name).factory

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)
