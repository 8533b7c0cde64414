"""One client connection to one broker of the front door: what the server and the handlers share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass
class Connection:
    """One client connection to one broker."""

    number: int
    broker: str
    peer: str
    writer: asyncio.StreamWriter
    reader: asyncio.StreamReader
    client_id: str | None = None  # from the last request's header
    closed_reason: str | None = None
    requests: int = 0
