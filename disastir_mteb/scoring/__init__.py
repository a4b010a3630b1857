"""The authors' metrics of a ranking against graded judgements, outside mteb (:mod:`.authors`)."""
