"""The frame every page shares: head, style (under the page's nonce), navigation, messages."""

from __future__ import annotations

from harness.ui.markup import Markup, html

STYLE = """
:root { color-scheme: light; --ink:#1d2430; --muted:#5d6776; --line:#d8dde5; --bg:#f6f7f9;
        --ok:#1f7a3a; --warn:#9a5b00; --bad:#b3261e; --accent:#2456c7; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--ink);
       background:var(--bg); }
header.top { background:#1d2430; color:#fff; padding:10px 20px; display:flex; gap:18px; align-items:center; }
header.top a { color:#fff; text-decoration:none; font-weight:600; }
header.top .live { margin-left:auto; font-size:12px; color:#b9c3d3; }
main { max-width:1100px; margin:0 auto; padding:16px 20px 40px; }
h1 { font-size:20px; margin:8px 0 12px; } h2 { font-size:16px; margin:22px 0 8px; }
table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#eef1f5; font-weight:600; font-size:13px; }
td.num, th.num { text-align:right; font-variant-numeric: tabular-nums; }
pre { margin:0; white-space:pre-wrap; word-break:break-word; font:12.5px/1.4 ui-monospace, Menlo, monospace; }
pre.args { background:#fff; border:1px solid #e0b050; border-radius:4px; padding:8px 10px; margin:8px 0 4px; }
.muted { color:var(--muted); }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600;
         background:#e6e9ef; }
.badge.completed { background:#dff3e4; color:var(--ok); }
.badge.failed { background:#fbe3e1; color:var(--bad); }
.badge.interrupted { background:#fff1d6; color:var(--warn); }
.badge.max_turns_exceeded, .badge.budget_exceeded { background:#efe6fb; color:#5b2a9c; }
.badge.running { background:#dde8fb; color:var(--accent); }
.box { background:#fff; border:1px solid var(--line); border-radius:6px; padding:12px 14px; margin:10px 0; }
.box.waiting { border-color:#e0b050; background:#fffaf0; }
.box.notice { border-color:#9bb5ea; background:#f2f6ff; }
.box.error { border-color:#e3a19b; background:#fff4f3; }
.facts { display:flex; flex-wrap:wrap; gap:6px 22px; }
.facts div span { color:var(--muted); margin-right:4px; }
.msg { background:#fff; border:1px solid var(--line); border-radius:6px; margin:8px 0; padding:8px 10px; }
.msg .role { font-size:12px; font-weight:700; text-transform:uppercase; color:var(--muted); }
.msg.assistant { border-left:4px solid var(--accent); } .msg.tool { border-left:4px solid #8a99ad; }
.msg.user { border-left:4px solid var(--ok); } .msg.system { border-left:4px solid #c5ccd6; }
.call { margin-top:6px; padding:6px 8px; background:#f3f5f9; border-radius:4px; }
.ctl { color:var(--bad); background:#fde8e6; border-radius:3px; padding:0 2px;
       font-family:ui-monospace, monospace; }
.box.waiting h2, .box.notice h2 { margin:0 0 8px; }
dl.brief { display:grid; grid-template-columns:100px 1fr; gap:5px 14px; margin:0 0 8px; }
dl.brief dt { color:var(--muted); font-weight:600; font-size:13px; }
dl.brief dd { margin:0; }
dd.task { white-space:pre-wrap; font-weight:600; max-height:6em; overflow:auto; }
.badge.writes { background:#fbe3e1; color:var(--bad); }
.badge.read_only { background:#dff3e4; color:var(--ok); }
.args { background:#fff; border:1px solid #e0b050; border-radius:4px; padding:6px 10px; margin:8px 0 4px;
        font:12.5px/1.5 ui-monospace, Menlo, monospace; max-height:40vh; overflow:auto; }
.args .argshead { font:12px/1.5 system-ui, sans-serif; color:var(--muted); }
.args .arg { white-space:pre-wrap; word-break:break-all; padding:0 4px; border-radius:3px; }
.args .arg.changed { background:#fff0b3; } .args .was { color:var(--warn); font-weight:600; }
.args details { display:inline; } .args summary { display:inline; cursor:pointer; }
.args .size { font:600 12px system-ui, sans-serif; color:var(--warn); }
.args pre.full { max-height:30vh; overflow:auto; border-top:1px dashed var(--line); margin-top:4px; }
p.same { font-weight:600; color:var(--warn); }
.decide-bar { position:fixed; left:0; right:0; bottom:0; z-index:10; background:#fffaf0;
              border-top:2px solid #e0b050; box-shadow:0 -2px 10px rgba(0,0,0,.08); }
.decide-bar .inner { max-width:1100px; margin:0 auto; padding:10px 20px; display:flex; gap:16px;
                     align-items:center; }
.decide-bar form { display:flex; gap:10px; align-items:center; margin:0; }
.decide-bar #reject-form { flex:1; }
.decide-bar textarea { flex:1; height:44px; font:inherit; }
body:has(.decide-bar) main { padding-bottom:110px; }
button { font:inherit; padding:5px 14px; border-radius:5px; border:1px solid #888; cursor:pointer; }
button.approve { background:#1f7a3a; color:#fff; border-color:#1f7a3a; }
button.reject { background:#b3261e; color:#fff; border-color:#b3261e; }
nav.filter { margin:0 0 8px; } nav.filter a { margin-right:10px; }
nav.filter a.on { font-weight:700; text-decoration:none; color:var(--ink); }
svg.chart { background:#fff; border:1px solid var(--line); border-radius:6px; max-width:100%; height:auto; }
svg.chart rect.in { fill:#6f8fd8; } svg.chart rect.out { fill:#e0a040; }
svg.chart polyline.cost { fill:none; stroke:#b3261e; stroke-width:2; }
svg.chart circle.cost { fill:#b3261e; }
svg.chart .axis { stroke:#8a99ad; } svg.chart .tick { font-size:10px; fill:#5d6776; }
svg.chart .tick.cost { fill:#b3261e; }
.legend span { margin-right:14px; }
.legend i { display:inline-block; width:10px; height:10px; margin-right:4px; }
.legend i.in { background:#6f8fd8; } .legend i.out { background:#e0a040; }
.legend i.cost { background:#b3261e; }
img.kit { max-width:100%; background:#fff; border:1px solid var(--line); margin:8px 0; }
"""


def page(title: str, body: Markup, *, nonce: str, script: Markup | None = None) -> Markup:
    tail = html('<script nonce="{}">{}</script>', nonce, script) if script is not None else Markup("")
    return html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        '<title>{}</title><style nonce="{}">{}</style></head><body>'
        '<header class="top"><a href="/">harness · runs</a><a href="/kit">kit reports</a>'
        '<span class="live" id="live"></span></header>'
        '<main>{}</main>{}</body></html>',
        title, nonce, Markup(STYLE), body, tail,
    )


def notice(kind: str, text: object) -> Markup:
    return html('<div class="box {}" role="status">{}</div>', kind, text)


def money(usd: float) -> str:
    return f"${usd:.6f}"
