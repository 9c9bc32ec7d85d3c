"""Many engines serving one workload: replicas (``replica``) behind routers, and the
simulation that sends arrivals, sessions and KV transfers through them (``simulation``)."""
