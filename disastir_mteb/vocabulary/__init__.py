"""The names and settings every layer shares: what DisastIR is called, and what a run can be asked for.

- ``taxonomy``: intents, categories, task names, query sets and the file-name alias table.
- ``metadata``: the facts of ``task_metadata/`` (dataset, intents, categories, DevLite, citation).
- ``instructions``: the per-intent instruction sets and templates, and ``InstructionConfig``.
- ``ann_params``: USearch parameters (``AnnParams``, ``PRESETS``), and the ANN label written and parsed.
- ``settings``: the experiment keys a run files its results under, and the run defaults.

Pure data and stdlib: no mteb, no numpy.
"""
