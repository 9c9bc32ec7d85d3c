"""What a user describes: the scenario schema (``schema``), reading scenario files and
overrides (``scenario``), model and hardware specs (``specs``, ``hf_config``, ``presets``),
and the bounded readers and one-line error messages every user file goes through
(``files``, ``errors``); the client path's measured defaults (``client_defaults``)."""
