"""Layer 4 — writers: the published folder (csv, json, report.md, report.html, figures) and
diagnostics/, written atomically. Nothing is computed here.
"""
