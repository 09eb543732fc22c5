"""The street map of report.html: the published hexagons over an OpenStreetMap basemap, drawn with
Leaflet (vendored under ``static/vendor/leaflet``, BSD-2-Clause, inlined into the page).

Only the basemap tiles come from the network. When they load, the hexagons sit on the streets;
when they cannot (offline, a blocked host, ``tiles=None``) the same map shows a plain background
with a latitude/longitude grid, the pointer's coordinates and a scale bar, and says why: the page
never fails offline. The map opens on the extent of the cells at the finest published resolution
(coarse nodes that cover a whole region do not set the zoom). Colour is the published mean (the
value panel's scale), or at the reader's choice the half-width of its interval (the uncertainty
panel's scale); by mean, a hexagon's fill fades, and its outline turns dashed, as the half-width grows; hovering gives "mean ± half-width". The time control of the page
(``dpopt-step`` events) picks which nodes are drawn, with the rule of the SVG panels; a click on a
row of the table (``dpopt-focus``) zooms to that row's hexagon and opens its tooltip.

Like the rest of the page this reads only published data; every string from the data is set as
text (never as HTML).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

__all__ = ["DEFAULT_TILES", "OSM_ATTRIBUTION", "leaflet_assets", "street_map_html", "STREET_JS"]

#: OpenStreetMap's standard tile layer (https://operations.osmfoundation.org/policies/tiles/)
DEFAULT_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
#: the attribution OpenStreetMap's licence asks for (HTML: a constant, never data)
OSM_ATTRIBUTION = '© <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors'


@lru_cache(maxsize=1)
def leaflet_assets() -> tuple[str, str]:
    """(leaflet.css, leaflet.js) of the vendored Leaflet, ready to inline (no source-map line)."""
    base = resources.files("dpopt.writers") / "static" / "vendor" / "leaflet"
    css = (base / "leaflet.css").read_text(encoding="utf-8")
    js = (base / "leaflet.js").read_text(encoding="utf-8")
    js = "\n".join(line for line in js.splitlines() if not line.startswith("//# sourceMappingURL"))
    return css, js


def _safe_json(data: Any) -> str:
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def street_map_html(nodes: list[dict[str, Any]], focus: list[np.ndarray], *, tiles: str | None,
                    attribution: str = OSM_ATTRIBUTION) -> str:
    """The map's container, its status line and its data (JSON).

    Parameters
    ----------
    nodes : one dict per published node in drawing order: ``ring`` ([lat, lng] rows), ``fill``
        and ``ufill`` (colours by mean and by half-width), ``opacity`` (fill opacity), ``dashed`` (bool), ``tip`` (plain text), ``i`` (row),
        ``t0``, ``t1``, ``c``, ``u`` (epoch seconds: span, cycle and end of a recurring window, whose
        ``t0``, ``t1``, ``u`` are on the release zone's wall clock as the time control's ``w``; 0 if none).
    focus : the rings ([lat, lng] rows) whose extent the map opens on.
    tiles : tile URL template with ``{z}``, ``{x}``, ``{y}`` (e.g. :data:`DEFAULT_TILES`), or None
        for no street map.
    attribution : HTML shown in the map's corner for the tiles (a constant of the caller).
    """
    pts = np.concatenate(focus) if focus else np.zeros((1, 2))
    data = {"nodes": nodes, "tiles": tiles, "attribution": attribution if tiles else "",
            "focus": [[float(pts[:, 0].min()), float(pts[:, 1].min())],
                      [float(pts[:, 0].max()), float(pts[:, 1].max())]]}
    return ('<div id="street-map" class="plain" role="region" aria-label="street map of the published cells">'
            '</div><p class="note" id="street-status">Loading the street map…</p>'
            f'<script type="application/json" id="street-data">{_safe_json(data)}</script>')


#: the map's script: Leaflet map, hexagons, plain-background fallback, time control listener
STREET_JS = r"""
(function(){'use strict';
var host=document.getElementById('street-map');if(!host||!window.L){return;}
var d=JSON.parse(document.getElementById('street-data').textContent);
var status=document.getElementById('street-status');
var map=L.map(host,{zoomSnap:0.25,maxZoom:18});
map.fitBounds(d.focus,{padding:[16,16],maxZoom:15});
L.control.scale({imperial:false,maxWidth:160}).addTo(map);
var Coords=L.Control.extend({options:{position:'bottomleft'},onAdd:function(){
 var el=L.DomUtil.create('div','coords');el.textContent='pointer: move over the map for its coordinates';return el;}});
var coords=new Coords().addTo(map);
function deg(v,pos,neg,dec){return Math.abs(v).toFixed(dec)+'° '+(v>=0?pos:neg);}
map.on('mousemove',function(e){coords.getContainer().textContent='pointer: '+deg(e.latlng.lat,'N','S',4)+', '+deg(e.latlng.lng,'E','W',4);});
var grid=L.layerGroup();
function step(span){var r=span/6,m=Math.pow(10,Math.floor(Math.log10(r))),s=[1,2,2.5,5,10];
 for(var i=0;i<s.length;i++){if(s[i]*m>=r){return s[i]*m;}}return 10*m;}
function drawGrid(){grid.clearLayers();var b=map.getBounds(),s=step(b.getEast()-b.getWest());
 var dec=Math.max(0,-Math.floor(Math.log10(s))+1),w=b.getWest(),e=b.getEast(),so=b.getSouth(),n=b.getNorth();
 for(var x=Math.ceil(w/s)*s;x<=e;x+=s){L.polyline([[so,x],[n,x]],{color:'#8a8a8a',weight:0.7,interactive:false}).addTo(grid);
  L.marker([n,x],{interactive:false,keyboard:false,icon:L.divIcon({className:'grat',html:deg(x,'E','W',dec),iconSize:null,iconAnchor:[-3,-2]})}).addTo(grid);}
 for(var y=Math.ceil(so/s)*s;y<=n;y+=s){L.polyline([[y,w],[y,e]],{color:'#8a8a8a',weight:0.7,interactive:false}).addTo(grid);
  L.marker([y,e],{interactive:false,keyboard:false,icon:L.divIcon({className:'grat grat-lat',html:'<span>'+deg(y,'N','S',dec)+'</span>',iconSize:[0,0],iconAnchor:[0,14]})}).addTo(grid);}}
var online=false;
function plain(msg){if(online){return;}host.classList.add('plain');grid.addTo(map);drawGrid();status.textContent=msg;}
map.on('moveend',function(){if(!online){drawGrid();}});
if(d.tiles){var layer=L.tileLayer(d.tiles,{maxZoom:19,attribution:d.attribution});
 layer.on('tileload',function(){if(online){return;}online=true;host.classList.remove('plain');host.classList.add('online');
  map.removeLayer(grid);status.textContent='Street map: OpenStreetMap tiles (loaded over the network when the page is viewed; the release itself sends nothing).';});
 layer.on('tileerror',function(){plain('No street map: its tiles could not be loaded (offline, or the tile server is blocked). The hexagons are drawn on a plain background with latitude/longitude lines; the scale bar is at the bottom left.');});
 layer.addTo(map);plain('Loading the street map… (until it loads: a plain background with latitude/longitude lines)');
}else{plain('Street map turned off: the hexagons are drawn on a plain background with latitude/longitude lines; the scale bar is at the bottom left.');}
var shapes=d.nodes.map(function(n){var p=L.polygon(n.ring,{color:n.dashed?'#555':'#333',weight:n.dashed?1.2:0.8,
  dashArray:n.dashed?'4 3':null,fillColor:n.fill,fillOpacity:n.opacity});
 var tip=document.createElement('div');tip.className='street-tip';tip.textContent=n.tip;
 p.bindTooltip(tip,{sticky:true});p.on('add',function(){var el=p.getElement();if(el){el.setAttribute('data-i',String(n.i));el.classList.add('street-node');}});
 return p;});
var shown=L.layerGroup().addTo(map);
function on(n,t,w){return n.c?(n.t0<=w&&w<n.u&&((w-n.t0)%n.c)<n.t1-n.t0):(n.t0<=t&&t<n.t1);}
document.addEventListener('dpopt-step',function(e){var t=e.detail.t,w=e.detail.w;shown.clearLayers();
 d.nodes.forEach(function(n,j){if(on(n,t,w)){shown.addLayer(shapes[j]);}});});
document.addEventListener('dpopt-focus',function(e){d.nodes.forEach(function(n,j){if(n.i===e.detail){
 map.fitBounds(shapes[j].getBounds(),{padding:[60,60],maxZoom:14,animate:false});shapes[j].openTooltip();}});});
var Colour=L.Control.extend({options:{position:'topright'},onAdd:function(){
 var el=L.DomUtil.create('form','colour-by');L.DomEvent.disableClickPropagation(el);
 el.innerHTML='<b>Colour</b><label><input type="radio" name="colour-by" value="mean" checked> mean</label>'+
  '<label><input type="radio" name="colour-by" value="bound"> ± half-width</label>';
 el.addEventListener('change',function(e){var by=e.target.value;
  shapes.forEach(function(p,j){var n=d.nodes[j];p.setStyle({fillColor:by==='bound'?n.ufill:n.fill,fillOpacity:by==='bound'?0.8:n.opacity});});
  document.querySelectorAll('.street-legend').forEach(function(g){g.hidden=g.dataset.show!==by;});});
 return el;}});
new Colour().addTo(map);
window.dpoptStreetMap=map;
})();
"""
