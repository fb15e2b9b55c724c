"""Measurement protocols shared by every system under test (cold start: cold.py)."""
