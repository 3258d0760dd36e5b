"""The bottom layer below every other package: seeds and random streams, process rank, the run-log reader.

Nothing here imports another ``contrastext`` package except :mod:`contrastext.errors`.
"""
