"""Your own DisastIR: a benchmark built from an organisation's documents the way the DisastIR authors built theirs.

``sources`` reads the documents with their digests and licences, ``pii`` counts and masks personal details, and
``passages`` cleans, deduplicates and cuts them into the corpus's passages.
"""
