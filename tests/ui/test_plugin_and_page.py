"""The plugin as Airflow loads it (entry point, navigation entry, mounted app) and the page's HTML: escaping,
the charts, a connection's error in its own section."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_tablestore.client.model import ChannelInfo, ChannelStatus, TunnelInfo, TunnelStage, TunnelType
from airflow_tablestore.ui import render
from airflow_tablestore.ui.instances import InstanceView, TunnelView
from airflow_tablestore.ui.metadata import RunPoint
from airflow_tablestore.ui.overview import ChannelRow, DagHistory, InstanceRow, Overview, TunnelRow
from airflow_tablestore.ui.plugin import TablestorePlugin

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_airflow_loads_the_plugin_from_the_installed_package() -> None:
    from airflow import plugins_manager

    plugins, errors = plugins_manager._get_plugins()
    # Run from a source checkout's root, the package's metadata is on sys.path twice (the editable install's and
    # the build's egg-info in the root, as "."): Airflow loads the first and skips the copy with this message.
    copies = {"Plugin 'tablestore' already registered, skipping"}
    assert not {source: error for source, error in errors.items() if error not in copies}
    assert [type(p) for p in plugins if p.name == "tablestore"] == [TablestorePlugin]
    views, _ = plugins_manager._get_ui_plugins()
    [view] = [v for v in views if v["name"] == "Tablestore"]
    assert (view["url_route"], view["href"], view["destination"], view["category"]) == (
        "tablestore", "/tablestore/", "nav", "browse")
    assert view["icon"].startswith("data:image/svg+xml;base64,")  # no route of its own to protect
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert [a["url_prefix"] for a in apps if a["name"] == "Tablestore"] == ["/tablestore"]


def overview() -> Overview:
    info = TunnelInfo("tid", "<b>tunnel</b>", "orders", "inst", TunnelType.BASE_AND_STREAM,
                      TunnelStage.PROCESS_STREAM, "sid", create_time_ns=1)
    stuck = ChannelInfo("c1", "Stream", ChannelStatus.OPEN, "<script>alert(1)</script>", 1, 5)
    tunnel = TunnelRow(TunnelView(info, (stuck,), 1), (ChannelRow(stuck, 60.0, "held by <i>x</i>"),),
                       ("dag&1",), 60.0)
    good = InstanceRow(InstanceView("tablestore_default", "inst", "http://h"), (tunnel,))
    bad = InstanceRow(InstanceView("tablestore_bad", error="OTSAuthFailed: signature mismatch"), ())
    runs = tuple(RunPoint(f"r{i}", state, NOW - timedelta(minutes=10 * i + 5), NOW - timedelta(minutes=10 * i),
                          records, None) for i, (state, records) in enumerate([("success", 10), ("failed", None)]))
    return Overview(NOW, [bad, good], [DagHistory("dag&1", (("tablestore_default", "orders", "t"),), runs)])


def test_the_page_escapes_what_it_shows_and_draws_one_bar_per_recorded_run() -> None:
    html = render.page(overview(), base="/airflow")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>tunnel</b>" not in html and "held by &lt;i&gt;x&lt;/i&gt;" in html
    assert 'href="/airflow/dags/dag%261"' in html  # DAG links go to Airflow's own DAG page
    assert html.count('<svg class="chart"') == 3
    # records: one bar (the failed run recorded none: a gap); duration: two bars; lag: none recorded
    assert html.count('class="bar"') == 1 + 2 and html.count('class="gap"') == 1 + 2
    assert 'class="error"><strong>This connection failed:</strong> OTSAuthFailed' in html
    assert 'data-card="stuck channels"' in html and "<script" not in html
