"""Test doubles served over real sockets: the mock model server."""
