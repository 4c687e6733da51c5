"""The replica verifier: a table and its replica compared cell for cell, streamed in primary-key order.

``compare`` holds :func:`~airflow_tablestore.client.verify.compare.verify_replica` (both tables read page by
page with GetRange and merged, never held in memory), ``report`` the :class:`VerifyReport` it returns, and
``__main__`` the command ``python -m airflow_tablestore.client.verify``. The Airflow task is
``airflow_tablestore.operators.verify.TablestoreVerifyReplicaOperator``.
"""
