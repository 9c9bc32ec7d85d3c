"""Routers: which replica a request goes to. Importing this package registers the built-ins."""

from policies.routing import routers  # noqa: F401  (registration)
from policies.routing.interface import ReplicaState, Router
from policies.routing.registry import ROUTERS

__all__ = ["ROUTERS", "ReplicaState", "Router"]
