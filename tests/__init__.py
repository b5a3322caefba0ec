"""Tests for syncverify (run with ``pytest``)."""
