"""Rollouts: one graded run of one task on one node, idempotent on (run, node, cache key); O(1) counts and cost."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import MISSING, fields
from typing import Any

from evodag import codec
from evodag.base import StoreBase
from evodag.connection import chunks, insert
from evodag.errors import EvoDAGError
from evodag.models import DISPOSITIONS, SPLITS, RolloutRow

_ROLLOUT_REQUIRED = ("run_id", "node_id", "task_id", "split", "seed", "repetition", "score", "passed", "disposition")
_ROLLOUT_DEFAULTS = {
    f.name: f.default for f in fields(RolloutRow) if f.default is not MISSING and f.name not in ("id", "created_at")
}


class RolloutsMixin(StoreBase):
    """Rollout rows and the per-run counters kept by `run_stats` triggers."""

    # rollouts -----------------------------------------------------------------------------------
    def _rollout_values(self, given: dict[str, Any]) -> dict[str, Any]:
        codec.check_fields(RolloutRow, given, forbidden=("id", "created_at"))
        missing = [k for k in _ROLLOUT_REQUIRED if k not in given]
        if missing:
            raise EvoDAGError(f"add_rollout needs {', '.join(missing)}")
        codec.check_choice("split", given["split"], SPLITS)
        codec.check_choice("disposition", given["disposition"], DISPOSITIONS)
        values = {**_ROLLOUT_DEFAULTS, **given, "created_at": self.clock()}
        return codec.encode("rollouts", values)

    def add_rollout(self, **fields: Any) -> RolloutRow:
        """Insert one rollout (fields = RolloutRow minus id/created_at). Idempotent on
        (run_id, node_id, cache_key): a second insert returns the existing row."""
        values = self._rollout_values(fields)
        with self.transaction():
            self._require_node(values["node_id"])
            row_id = insert(self.conn, "rollouts", values, or_ignore=True)
            if row_id is None:
                where = "run_id = ? AND node_id = ? AND cache_key = ? AND cache_key != ''"
                existing = self._one(RolloutRow, where, (values["run_id"], values["node_id"], values["cache_key"]))
                assert existing is not None
                return existing
        row = self._one(RolloutRow, "id = ?", (row_id,))
        assert row is not None
        return row

    def add_rollouts(self, rows: Iterable[dict[str, Any]]) -> int:
        """Bulk insert (one transaction, same rules as `add_rollout`); returns how many rows were new."""
        encoded = [self._rollout_values(r) for r in rows]
        if not encoded:
            return 0
        cols = list(encoded[0])
        sql = f"INSERT OR IGNORE INTO rollouts ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
        with self.transaction():
            before = self.conn.total_changes
            self.conn.executemany(sql, [tuple(v[c] for c in cols) for v in encoded])
            return (self.conn.total_changes - before) // 2  # each insert also updates run_stats (trigger)

    def rollouts(
        self,
        run_id: int | None = None,
        node_id: int | None = None,
        split: str | None = None,
        task_id: str | None = None,
    ) -> list[RolloutRow]:
        """Rollouts matching every given filter, ordered by id."""
        return self._many(RolloutRow, {"run_id": run_id, "node_id": node_id, "split": split, "task_id": task_id})

    def find_rollout(self, cache_key: str) -> RolloutRow | None:
        """Any stored rollout with this cache key (any node, any run in this DB)."""
        if not cache_key:
            return None
        return self._one(RolloutRow, "cache_key = ? AND cache_key != '' ORDER BY id", (cache_key,))  # partial index

    def find_rollouts(self, cache_keys: Iterable[str]) -> dict[str, RolloutRow]:
        """`find_rollout` of many keys at once: key -> its earliest stored rollout; keys found nowhere are absent."""
        found: dict[str, RolloutRow] = {}
        decode = codec.decoder(RolloutRow)
        for chunk in chunks(sorted({k for k in cache_keys if k})):
            marks = ", ".join("?" for _ in chunk)
            where = f"cache_key IN ({marks}) AND cache_key != ''"  # the second term lets SQLite use the partial index
            sql = f"SELECT {codec.select_list(RolloutRow)} FROM rollouts WHERE {where} ORDER BY id"
            for raw in self.conn.execute(sql, chunk):
                row = decode(raw)
                found.setdefault(row.cache_key, row)
        return found

    def _stat(self, column: str, run_id: int | None) -> Any:
        if run_id is None:
            return self.conn.execute(f"SELECT coalesce(sum({column}), 0) FROM run_stats").fetchone()[0]
        row = self.conn.execute(f"SELECT {column} FROM run_stats WHERE run_id = ?", (run_id,)).fetchone()
        return 0 if row is None else row[0]

    def disposition_counts(self, run_id: int) -> dict[str, int]:
        """Rollouts of `run_id` by disposition (success, task_failure, infra_error, timeout); absent ones omitted."""
        query = "SELECT disposition, count(*) FROM rollouts WHERE run_id = ? GROUP BY disposition"
        return {str(d): int(n) for d, n in self.conn.execute(query, (run_id,))}

    def count_rollouts(self, run_id: int | None = None) -> int:
        """Rollouts stored for `run_id` (all runs when None); O(1) from `run_stats`."""
        return int(self._stat("rollouts", run_id))

    def last_rollout_id(self) -> int:
        """The id of the newest rollout row of the file (0 when there is none); ids only grow."""
        row = self.conn.execute("SELECT max(id) FROM rollouts").fetchone()
        return int(row[0] or 0)

    def rollout_cost(self, run_id: int | None = None) -> float:
        return float(self._stat("rollout_cost", run_id))

    def session_cost(self, run_id: int | None = None) -> float:
        return float(self._stat("session_cost", run_id))

    def count_sessions(self, run_id: int | None = None) -> int:
        return int(self._stat("sessions", run_id))
