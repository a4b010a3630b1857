"""DisastIR results checked and filed for the MTEB results repository (:mod:`.submit`, :mod:`.checks`)."""
