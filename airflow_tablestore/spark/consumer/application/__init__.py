"""The file ``spark-submit`` runs as the consumer's application, alone in this directory.

Python puts a script's directory first on ``sys.path``: here that directory holds nothing another import could
mistake for a top-level module (next to :mod:`airflow_tablestore.spark`'s own modules, ``settings`` or
``options`` could shadow one), so the launcher imports the installed package as any program would.
"""
