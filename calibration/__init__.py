"""The torch calibration harness and the engines validation runs against.

The only package that imports torch, always lazily (inside functions), so that servesim
installs and runs without it. It writes profiles in the simulator's format
(``simulator.cost.profile``) and compares the simulator with a real engine run.
"""

HARNESS_VERSION = "1.0"
