"""Layer 2, what encodes: instructions, the adapter that applies them, and the models the plugin knows.

``instructions`` holds the per-intent instructions and templates; ``adapter`` wraps any embedder
so that DisastIR queries get them; ``dmretriever`` and ``bundled`` are model definitions;
``registration`` puts the DMRetriever models into mteb; ``hashing_encoder`` is a model-free encoder
for tests and overhead benchmarks.

May import: :mod:`disastir_mteb.util`, :mod:`disastir_mteb.benchmark`.
"""
