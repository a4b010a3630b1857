"""``python -m disastir_mteb.sample``: the same as ``disastir-mteb sample``."""

import sys

from disastir_mteb.sample.generator import main

sys.exit(main())
