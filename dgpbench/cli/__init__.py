"""The ``dgpbench`` command: the user's commands and the workflow's steps.

:mod:`~dgpbench.cli.main` (entry point) -> step modules (:mod:`~dgpbench.cli.monitor`: ``fit``,
``score``; :mod:`~dgpbench.cli.paper`, :mod:`~dgpbench.cli.failing_loudly`,
:mod:`~dgpbench.cli.analysis`, :mod:`~dgpbench.cli.compare`, :mod:`~dgpbench.cli.run`) ->
the library. Step modules register in :mod:`~dgpbench.cli.registry`, which imports nothing.
"""
