"""The fault suite: `make faults` (full) or `python -m faults --short`; see README "Reliability"."""
