"""Fleet integration: requirement gates, node specs (baselines) and snapshot diffs.

Everything here is pure: it reads ``Facts`` and returns findings or differences, so the probe,
``check --spec``, ``diff`` and the Slurm health check share one implementation.
"""
