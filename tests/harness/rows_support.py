"""Editing a saved run's rows by hand, as a person with a SQL shell would (for damage tests)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from harness.store.rows import APPEND_ONLY


def rows(db: Path, run_id: str) -> tuple[str, list[tuple]]:
    with sqlite3.connect(db) as conn:
        head = conn.execute("SELECT head FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
        items = conn.execute("SELECT field, seq, body FROM run_items WHERE run_id = ? ORDER BY field, seq",
                             (run_id,)).fetchall()
    return head, items


def damage(db: Path, run_id: str, changes: dict[str, Any], *, raw_head: str | None = None) -> None:
    """Set fields of a saved run: head fields in its head row, a list as its item rows."""
    conn = sqlite3.connect(db)
    with conn:
        head = json.loads(conn.execute("SELECT head FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
        for key, value in changes.items():
            if key in APPEND_ONLY:
                conn.execute("DELETE FROM run_items WHERE run_id = ? AND field = ?", (run_id, key))
                items = value if isinstance(value, list) else [value]
                conn.executemany("INSERT INTO run_items VALUES (?, ?, ?, ?)",
                                 [(run_id, key, i, json.dumps(v)) for i, v in enumerate(items)])
            else:
                head[key] = value
        conn.execute("UPDATE runs SET head = ? WHERE run_id = ?",
                     (raw_head if raw_head is not None else json.dumps(head), run_id))
    conn.close()
