"""Layer 1, what DisastIR is: its vocabulary, the published files, the 48 mteb tasks and their statistics.

``taxonomy`` names intents, categories and files; ``layout`` finds the published files and
``data`` reads them into mteb's split data; ``tasks`` builds the task classes and benchmarks;
``registration`` puts them into mteb; ``statistics`` describes them; ``sample`` writes a synthetic
dataset in the published layout; ``export`` writes the tasks as BEIR or mteb-native datasets.

May import: :mod:`disastir_mteb.util`.
"""
