"""`harness ui`: runs and approvals in a browser, over whichever store holds the runs.

Owns the web pages (Starlette, served by uvicorn; server-rendered HTML with a few lines of
plain script for live updates), the decisions made there, and the read-only view of the exits
kit's report folders. May import the harness core, starlette and uvicorn. Nothing in the core
imports this package: `harness.cli` loads it only for the `ui` command, so `import harness`
never pulls in a web stack (a test pins it). This file imports nothing for the same reason.

    harness [--store URL] ui [--port 8765] [--host HOST] [--resume] [--kit-reports DIR]

See docs/ui.md.
"""
