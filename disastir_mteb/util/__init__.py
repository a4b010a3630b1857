"""Plumbing every folder shares: nothing here knows about DisastIR or its models.

``atomic`` (write-then-rename, with the writer's pid in temporary names),
``cache_dir`` (the one cache root), ``digest`` (the short digest of cache names and keys, a file's content digest),
``checked_file`` (files read back whole or refused: sections, a JSON header, a checksum of every byte),
``patching`` (the names of other libraries' internals a patch uses, checked one way), ``timings`` (the phases
of a run and the clock every layer marks them with), ``progress`` (every progress bar: live on a terminal, a few
lines in a log), ``install_hint`` (the one ``pip install`` command an error
gives for a missing package), ``mteb_internals`` (the one door to mteb's, datasets' and sentence-transformers'
private names).
"""
