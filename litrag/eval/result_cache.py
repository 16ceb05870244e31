"""Finished results kept on disk: answers and judge verdicts, keyed by everything they depend on."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any


def digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()


class ResultCache:
    """JSON values in SQLite keyed by a kind and the hash of a JSON key; committed per put, so an
    interrupted run keeps everything it finished."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=120)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS results (kind TEXT, key TEXT, value TEXT, "
            "PRIMARY KEY (kind, key))"
        )
        self._db.commit()

    def get(self, kind: str, key: dict[str, Any]) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT value FROM results WHERE kind=? AND key=?", (kind, digest(key))
        ).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, kind: str, key: dict[str, Any], value: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?)",
            (kind, digest(key), json.dumps(value, ensure_ascii=False)),
        )
        self._db.commit()

    def close(self) -> None:
        self._db.close()
