"""What encodes: the adapter that puts instructions in front of a model, and the models the plugin knows.

mteb is imported first, here: its import registers the plugin (the autoload hook), and registration reads
:mod:`~disastir_mteb.models.dmretriever`, which must then not be half-executed.
"""

import mteb  # noqa: F401  (first: see above)
