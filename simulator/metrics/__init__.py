"""What a run measures: the recorder of requests and steps (``recorder``), time-weighted
levels (``monitor``), the result tables and run folder (``results``), their assembly from
what the engines measured (``tables``) and the summary metrics as `vllm bench serve`
defines them (``summary``)."""
