"""The page as server-rendered HTML (inline CSS and SVG, no JavaScript), in the look of Airflow's own UI."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from airflow_tablestore.client.epoch import ns_to_datetime
from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.ui.charts import bar_chart
from airflow_tablestore.ui.health import human_duration
from airflow_tablestore.ui.overview import DagHistory, InstanceRow, Overview, TunnelRow

STATUS_CLASS = {ChannelStatus.OPEN: "ok", ChannelStatus.CLOSING: "warn", ChannelStatus.WAIT: "muted",
                ChannelStatus.CLOSE: "muted", ChannelStatus.TERMINATED: "done"}

CSS = """
:root { color-scheme: light; --fg: #1a202c; --muted: #64748b; --line: #e2e8f0; --bg: #ffffff; --panel: #f8fafc;
  --brand: #017cee; --ok: #16a34a; --warn: #d97706; --bad: #dc2626; }
* { box-sizing: border-box; }
body { margin: 0; padding: 20px 24px 40px; font: 14px/1.45 Inter, "Segoe UI", system-ui, -apple-system, sans-serif;
  color: var(--fg); background: var(--bg); }
h1 { font-size: 24px; font-weight: 600; margin: 0 0 4px; }
h2 { font-size: 18px; font-weight: 600; margin: 0; }
h3 { font-size: 15px; font-weight: 600; margin: 18px 0 8px; }
a { color: var(--brand); text-decoration: none; } a:hover { text-decoration: underline; }
.sub { color: var(--muted); margin: 0 0 16px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 0 0 20px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 150px;
  background: var(--bg); }
.card .n { font-size: 22px; font-weight: 600; } .card .l { color: var(--muted); font-size: 12px; }
.card.alert { border-color: #fecaca; background: #fef2f2; } .card.alert .n { color: var(--bad); }
section.conn, section.dag { border: 1px solid var(--line); border-radius: 8px; margin: 0 0 18px; overflow: hidden; }
.head { display: flex; align-items: baseline; gap: 12px; flex-wrap: wrap; padding: 12px 16px; background: var(--panel);
  border-bottom: 1px solid var(--line); }
.head .meta { color: var(--muted); font-size: 13px; }
.body { padding: 4px 16px 14px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: .03em; padding: 8px 10px; border-bottom: 1px solid var(--line); }
td { padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
tr.tunnel td { background: #fcfdff; font-weight: 500; border-top: 2px solid var(--line); }
tr.channel td:first-child { padding-left: 28px; color: var(--muted); }
tr.stuck td { background: #fef2f2; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 500;
  background: #f1f5f9; color: #334155; white-space: nowrap; }
.badge.ok { background: #dcfce7; color: #166534; } .badge.warn { background: #fef3c7; color: #92400e; }
.badge.bad { background: #fee2e2; color: #991b1b; } .badge.done { background: #e0e7ff; color: #3730a3; }
.badge.muted { background: #f1f5f9; color: #64748b; }
.error { border: 1px solid #fecaca; background: #fef2f2; color: #991b1b; border-radius: 6px; padding: 8px 12px;
  margin: 10px 0; }
.note { color: var(--muted); font-size: 12px; margin: 8px 0 0; }
.chips span { display: inline-block; margin: 0 6px 6px 0; }
.charts { display: flex; gap: 16px; flex-wrap: wrap; padding: 8px 0 4px; }
.charts figure { margin: 0; } .charts figcaption { font-size: 12px; color: var(--muted); margin: 0 0 2px; }
svg.chart .axis { stroke: #94a3b8; stroke-width: 1; } svg.chart .grid { stroke: #e2e8f0; stroke-dasharray: 3 3; }
svg.chart .tick { font-size: 10px; fill: #64748b; } svg.chart rect.gap { fill: #cbd5e1; }
.legend { font-size: 12px; color: var(--muted); } .legend i { display: inline-block; width: 10px; height: 10px;
  border-radius: 2px; margin: 0 4px 0 10px; vertical-align: -1px; }
.why { color: var(--bad); font-size: 12px; font-weight: 500; }
"""


def _when(ns: int) -> str:
    moment = ns_to_datetime(ns) if ns else None
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def _dag_links(dag_ids: tuple[str, ...], base: str) -> str:
    if not dag_ids:
        return '<span class="badge muted">none in Airflow</span>'
    return ", ".join(f'<a target="_top" href="{escape(base)}/dags/{quote(d, safe="")}">{escape(d)}</a>'
                     for d in dag_ids)


def _tunnel_rows(row: TunnelRow, base: str) -> str:
    info = row.view.info
    flags = []
    if info.expired:
        flags.append('<span class="badge bad">expired</span>')
    if row.stuck:
        flags.append(f'<span class="badge bad">{row.stuck} stuck</span>')
    html = [
        f'<tr class="tunnel" data-tunnel="{escape(info.tunnel_name)}"><td>{escape(info.table_name)}</td>'
        f'<td>{escape(info.tunnel_name)} {" ".join(flags)}</td><td>{escape(str(info.tunnel_type))}</td>'
        f'<td>{escape(str(info.stage))}</td><td>{_when(info.create_time_ns)}</td>'
        f'<td>{_when(row.view.consume_point_ns)}</td><td>{human_duration(row.lag_s)}</td>'
        f'<td>{_dag_links(row.dag_ids, base)}</td></tr>'
    ]
    if row.view.error:
        html.append(f'<tr><td></td><td colspan="7"><div class="error">DescribeTunnel: {escape(row.view.error)}'
                    '</div></td></tr>')
    for ch in row.channels:
        c = ch.channel
        status = f'<span class="badge {STATUS_CLASS.get(c.status, "muted")}">{escape(str(c.status))}</span>'
        stuck = (f' <span class="badge bad">stuck</span><div class="why">{escape(ch.stuck)}</div>'
                 if ch.stuck else "")
        html.append(
            f'<tr class="channel{" stuck" if ch.stuck else ""}" data-channel="{escape(c.channel_id)}">'
            f'<td>channel</td><td class="mono">{escape(c.channel_id)}</td><td>{escape(c.channel_type)}</td>'
            f'<td>{status}{stuck}</td><td class="mono">{escape(c.client_id or "-")}</td>'
            f'<td>{_when(c.consume_point_ns)}</td><td>{human_duration(ch.lag_s)}</td>'
            f'<td>{c.row_count} records synced</td></tr>')
    return "".join(html)


def _instance(row: InstanceRow, base: str) -> str:
    view = row.view
    meta = " · ".join(escape(x) for x in (view.instance_name or "", view.endpoint or "") if x)
    parts = [f'<section class="conn" data-conn="{escape(view.conn_id)}"><div class="head"><h2>'
             f'{escape(view.conn_id)}</h2><span class="meta">{meta}</span>'
             f'<span class="meta">{view.requests} Tablestore requests</span></div><div class="body">']
    if view.error:
        parts.append(f'<div class="error"><strong>This connection failed:</strong> {escape(view.error)}</div>')
    if view.stream_tables or not view.error:
        chips = "".join(f'<span class="badge">{escape(t)}</span>' for t in view.stream_tables) or \
            '<span class="meta">none</span>'
        parts.append(f'<h3>Tables with a stream</h3><div class="chips">{chips}</div>')
    if row.tunnels:
        parts.append('<h3>Tunnels and their channels</h3><table><thead><tr><th>Table / channel</th><th>Tunnel / id'
                     '</th><th>Type</th><th>Stage / status</th><th>Created / owner</th><th>Consume point</th>'
                     '<th>Lag</th><th>Consumed by</th></tr></thead><tbody>')
        parts.extend(_tunnel_rows(t, base) for t in row.tunnels)
        parts.append("</tbody></table>")
    elif not view.error:
        parts.append('<p class="note">No tunnels.</p>')
    parts.extend(f'<p class="note">{escape(n)}</p>' for n in view.notes)
    parts.append("</div></section>")
    return "".join(parts)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _history(history: DagHistory, base: str) -> str:
    runs = history.runs
    tunnels = ", ".join(f"{escape(t)} on {escape(tb)} ({escape(c)})" for c, tb, t in history.tunnels)
    charts = [
        ("Lag at run end", bar_chart(f"{history.dag_id}: lag at run end", runs, lambda r: r.lag_s, human_duration)),
        ("Records per run", bar_chart(f"{history.dag_id}: records per run", runs,
                                      lambda r: None if r.records is None else float(r.records), _number)),
        ("Run duration", bar_chart(f"{history.dag_id}: run duration", runs, lambda r: r.duration_s,
                                   human_duration)),
    ]
    figures = "".join(f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>" for caption, svg in charts)
    if not runs:
        figures = '<p class="note">No finished runs yet.</p>'
    return (f'<section class="dag" data-dag="{escape(history.dag_id)}"><div class="head"><h2><a target="_top" '
            f'href="{escape(base)}/dags/{quote(history.dag_id, safe="")}">{escape(history.dag_id)}</a></h2>'
            f'<span class="meta">consumes {tunnels} · last {len(runs)} finished runs</span>'
            f'<span class="legend"><i style="background:#16a34a"></i>success<i style="background:#dc2626"></i>'
            f'failed<i style="background:#64748b"></i>other</span></div><div class="body"><div class="charts">'
            f'{figures}</div></div></section>')


def page(overview: Overview, base: str = "") -> str:
    """The whole page; ``base`` is Airflow's own path prefix (links to DAG pages)."""
    tunnels = [t for row in overview.instances for t in row.tunnels]
    channels = sum(len(t.channels) for t in tunnels)
    stuck = sum(t.stuck for t in tunnels)
    failed = sum(1 for row in overview.instances if row.view.error)
    cards = [("connections", len(overview.instances), failed > 0, f"{failed} failed" if failed else ""),
             ("tunnels", len(tunnels), False, ""), ("channels", channels, False, ""),
             ("stuck channels", stuck, stuck > 0, "")]
    card_html = "".join(f'<div class="card{" alert" if alert else ""}" data-card="{escape(label)}"><div class="n">'
                        f'{n}</div><div class="l">{escape(label)}{" · " + escape(extra) if extra else ""}</div></div>'
                        for label, n, alert, extra in cards)
    body = "".join(_instance(row, base) for row in overview.instances) or \
        '<p class="note">No Tablestore connection you may read.</p>'
    history = "".join(_history(h, base) for h in overview.histories) or \
        '<p class="note">No DAG you may read consumes these tunnels.</p>'
    generated = overview.now.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Tablestore</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head><body>'
        '<h1>Tablestore</h1>'
        f'<p class="sub">Tunnels, channels and replication history of your Tablestore connections · generated '
        f'{generated} in {overview.seconds:.2f} s with {overview.requests} Tablestore requests · '
        '<a href="">Refresh</a></p>'
        f'<div class="cards">{card_html}</div>{body}<h2 style="margin:26px 0 12px">Replication history</h2>'
        f'{history}</body></html>'
    )
