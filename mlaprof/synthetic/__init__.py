"""Synthetic runs written with RunWriter, with real split numbers where they matter: for the
tests and the benchmarks (``bench/`` never imports ``tests/``). ``figures``: runs for the
figure/HTML/PNG tests and the figures benchmark; ``dashboard``: runs for the TUI tests and
benchmark."""
