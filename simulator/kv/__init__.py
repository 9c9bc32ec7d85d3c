"""The KV cache of one engine: the ``KvPool`` Protocol (``pool``) and its pools, counted
blocks (``blocks``) and prefix caching (``prefix_cache``); swap space in host memory
(``host``); and how many blocks a replica's memory leaves (``memory``)."""
