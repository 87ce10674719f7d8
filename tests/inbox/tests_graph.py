"""The review rig's stage graph (explore → implement → verify) for the inbox tests."""

from rig import graph

__all__ = ["graph"]
