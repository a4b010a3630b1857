"""What encodes: the adapter that puts instructions in front of a model, and the models the plugin knows.

- ``adapter``: ``with_instructions`` and ``as_mteb_encoder``, which put the instructions of
  :mod:`disastir_mteb.vocabulary.instructions` in front of any embedder.
- ``loading``: a model name, ``"bundled"``, a local folder or an object -> an mteb encoder.
- ``identity``: who computes the vectors (a fingerprint of what the model computes); ``precision``: its torch
  weights found, their dtype and device, a copy cast to fp16/bf16; ``prepared``: the model made ready for a run in
  one call (precision, instructions, mteb's interface) and identified; ``loan``: the caller's model borrowed for a
  call into it (in eval mode meanwhile) and handed back as it came.
- ``dmretriever`` (the authors' models, registered into mteb by :mod:`disastir_mteb.registration`;
  ``bidirectional_qwen3``: the Qwen3 backbone of its 596M, 4B and 7.6B sizes with causal masking off,
  imported by the loader, never at package import), ``bundled`` (the packaged MiniLM),
  ``hashing_encoder`` (model-free, for tests and overhead benchmarks).

mteb is imported first, here: its import registers the plugin (the autoload hook), and registration reads
:mod:`~disastir_mteb.models.dmretriever`, which must then not be half-executed.
"""

import mteb  # noqa: F401  (first: see above)
