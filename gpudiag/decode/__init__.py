"""The decode step explained: bytes a decode or verify step reads on each GPU (from config.json alone), its
collectives on the host's interconnect, the roofline of each measured bucket, and the economics of speculation.

Pure arithmetic, standard library only, one module per concern (docs/decode-model.md gives every formula with its
source): `quant` (bytes per weight), `model_bytes` (a model's shape and checkpoint bytes), `step_bytes` (weights,
experts touched and KV one step reads), `config_fields` (config.json read defensively), `hardware` (datasheet peaks
and interconnect defaults, each with its source), `collectives` (nccl-tests bus bandwidth, per-step collective bytes
and time), `roofline` (step time, achieved bandwidth and compute, verdict per bucket), `speculation` (draft + verify
cost, fitted overhead, predicted speedup, break-even). Every figure leaving this package is a `sourced.fig` — a
value with where it came from (measured, config, datasheet, assumed), its sources joined by `sourced.mix` — so the
report can say which numbers were measured and which assumed. This package reads no probe data itself:
gpudiag/findings/decode_view.py and its parts (decode_server.py) feed it one server at a time.
"""
