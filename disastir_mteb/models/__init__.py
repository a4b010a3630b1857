"""Layer 2, what encodes: instructions, the adapter that applies them, and the models the plugin knows.

- ``instructions``: the per-intent instruction sets and templates (data); ``adapter``:
  ``with_instructions`` and ``as_mteb_encoder``, which put them in front of any embedder.
- ``loading``: a model name, ``"bundled"``, a local folder or an object -> an mteb encoder.
- ``dmretriever`` (the authors' models, with ``registration`` into mteb; ``bidirectional_qwen3``:
  the Qwen3 backbone of its 596M, 4B and 7.6B sizes with causal masking off, imported by the loader,
  never at package import), ``bundled`` (the packaged MiniLM), ``hashing_encoder`` (model-free, for tests and overhead
  benchmarks).

May import: :mod:`disastir_mteb.util`, :mod:`disastir_mteb.benchmark`.
"""
