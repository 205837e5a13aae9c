"""A blocking facade over finsy's asyncio Switch, for PTF tests.

PTF tests are synchronous; finsy is asyncio. One event loop runs in a daemon
thread and every call is a coroutine submitted to it with a timeout, so a
hung switch fails a test instead of hanging the run.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import finsy as fy

CALL_TIMEOUT_S = 30.0


class SyncSwitch:
    def __init__(self, address: str, p4info: Path, p4blob: Path, device_id: int = 1):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="p4rt-loop", daemon=True)
        self._thread.start()
        options = fy.SwitchOptions(p4info=p4info, p4blob=p4blob, p4force=True, device_id=device_id)
        self.switch = fy.Switch("jumbogate", address, options)
        self._digests: queue.Queue[Any] = queue.Queue()
        self._digest_task: asyncio.Future[Any] | None = None
        self._idle: queue.Queue[Any] = queue.Queue()
        self._idle_task: asyncio.Future[Any] | None = None
        self.call(self.switch.__aenter__(), timeout=60.0)

    def call(self, coro, timeout: float = CALL_TIMEOUT_S):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def insert(self, entities: Iterable[Any]) -> None:
        self.call(self.switch.insert(list(entities)))

    def modify(self, entities: Iterable[Any]) -> None:
        self.call(self.switch.modify(list(entities)))

    def delete(self, entities: Iterable[Any]) -> None:
        self.call(self.switch.delete(list(entities)))

    def read(self, entities: Iterable[Any]) -> list[Any]:
        async def collect():
            return [entity async for entity in self.switch.read(list(entities))]

        return self.call(collect())

    def delete_all(self) -> None:
        self.call(self.switch.delete_all())

    @property
    def p4info(self) -> fy.P4Schema:
        return self.switch.p4info

    # -- stream messages: digests and idle timeouts --------------------------

    def start_digests(self, digest_name: str) -> None:
        """Collect digest lists (acknowledged at once) into a queue."""
        if self._digest_task is not None:
            return

        async def pump():
            async for digest_list in self.switch.read_digests(digest_name):
                await self.switch.write([digest_list.ack()])
                for item in digest_list:
                    self._digests.put(item)

        self._digest_task = asyncio.run_coroutine_threadsafe(pump(), self._loop)

    def drain_digests(self, wait_s: float) -> list[Any]:
        """Every digest item received within `wait_s` seconds from now."""
        items = []
        try:
            items.append(self._digests.get(timeout=wait_s))
            while True:
                items.append(self._digests.get(timeout=0.3))
        except queue.Empty:
            pass
        return items

    def start_idle_timeouts(self) -> None:
        if self._idle_task is not None:
            return

        async def pump():
            async for notification in self.switch.read_idle_timeouts():
                for entry in notification.table_entry:
                    self._idle.put(entry)

        self._idle_task = asyncio.run_coroutine_threadsafe(pump(), self._loop)

    def next_idle_timeout(self, wait_s: float):
        try:
            return self._idle.get(timeout=wait_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        for task in (self._digest_task, self._idle_task):
            if task is not None:
                task.cancel()
        try:
            self.call(self.switch.__aexit__(None, None, None), timeout=10.0)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5.0)
