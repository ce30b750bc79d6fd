"""Helpers shared by tests in several rooms, so that no test module imports another."""
