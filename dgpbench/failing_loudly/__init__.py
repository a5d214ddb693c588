"""Rabanser et al.'s "Failing loudly" grid: :mod:`~dgpbench.failing_loudly.grid` (cells and
draws), :mod:`~dgpbench.failing_loudly.toolbox` (its door to the detectors and representations)
and :mod:`~dgpbench.failing_loudly.reporting` (its tables and figures).
"""
