"""The session log: events, stores, the DSH reader, the surface and the projections."""
