"""The tunnel consumer: a ``spark-submit`` application that replicates a tunnel into a sink (docs/spark.md).

:mod:`.job` is the command line, its entry point and exit codes (``application_path()`` names the launcher file
``spark-submit`` runs), :mod:`.driver` runs the phases and rounds, :mod:`.reader` reads channels on executors,
:mod:`.options` parses the arguments, :mod:`.round_result` is what a task reports to the driver.
"""
