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
    traits: Any = None  # what the implementation declares about itself (the registry's traits type)


class Registry(Generic[T]):
    """Maps names to implementations of one role (batch policy, router, cost model, ...)."""

    def __init__(
        self,
        role: str,
        default_traits: Any = None,
        check: Callable[[str, T, Any], None] | None = None,
    ) -> None:
        self.role = role
        self._entries: dict[str, Entry[T]] = {}
        self._default_traits = default_traits
        self._check = check

    def register(self, name: str, params: Any = None, traits: Any = None) -> Callable[[T], T]:
        """Class decorator: register ``factory`` under ``name`` with its declared ``traits``.

        Raises ValueError if the name is already taken, or if the registry's check finds
        the factory does not have what its traits declare.
        """

        def decorate(factory: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.role} {name!r} is already registered")
            declared = self._default_traits if traits is None else traits
            if self._check is not None:
                self._check(name, factory, declared, params)
            self._entries[name] = Entry(name, factory, params, declared)
            return factory

        return decorate

    def entry(self, name: str) -> Entry[T]:
        """The entry registered as ``name``; ValueError naming the known ones if none (a ``name`` that is not a
        string, such as a list a scenario file wrote as the kind, included)."""
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "none"
            raise ValueError(f"unknown {self.role} {name!r}; known: {known}")
        return entry

    def entry_of(self, factory: object) -> Entry[T]:
        """The entry whose factory is ``factory`` (a policy's class); ValueError if none."""
        for entry in self._entries.values():
            if entry.factory is factory:
                return entry
        raise ValueError(f"{factory!r} is not a registered {self.role}")

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
