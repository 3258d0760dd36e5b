"""Runs: everything that turns a recipe into trainings.

The method registry (:mod:`~contrastext.runs.registry`), each method's ``build`` and multi-stage protocol
(``runs/<method>.py``), data loading (:mod:`~contrastext.runs.data`), encoders
(:mod:`~contrastext.runs.encoders`), evaluators (:mod:`~contrastext.runs.evaluation`), the shared stage
helpers (:mod:`~contrastext.runs.stages`) and the recipes shipped with the package
(:mod:`~contrastext.runs.recipes`). The ``nn.Module``s themselves live in :mod:`contrastext.methods`.
"""
