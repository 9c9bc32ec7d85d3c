"""The router registry: name -> (router class, its pydantic parameter model)."""

from policies.registry import Registry

ROUTERS: Registry = Registry("router")
