"""The iCORE evaluation harnesses (icore Sec. 5; design.md 4.5; I/O layer).

Module map:

=================  =============================================================
``_evaluate``      ``icore bench icore``: conditions on matched instances, presets
``_loop``          the loop-level representation ablation (claim 1)
``_repr``          representation sufficiency: which defects G, Q or X detect
``_stats``         paired bootstrap, Wilcoxon, the Prop. 4 check, tables
``_report``        CSV, JSON, PNG and markdown outputs
``_attribution``   the failure-attribution protocol on real traces (Who&When)
=================  =============================================================

The entry points are the ``icore bench icore`` / ``icore bench attribution`` commands;
the modules are imported where used (numpy and friends only when a bench runs).
"""
