"""The Tablestore page in Airflow's UI: each connection's tunnels, channels, lag and replication history.

Registered by the installed provider through the ``airflow.plugins`` entry point (:mod:`.plugin`); served by
Airflow's own api-server under ``/tablestore/`` with the REST API's authentication (:mod:`.routes`). The data
comes from the Tablestore connections (:mod:`.instances`) and from Airflow's metadata (:mod:`.metadata`); the
verdicts are :mod:`.health`; the HTML and its SVG charts are :mod:`.render` and :mod:`.charts`.
"""
