"""Test doubles (fake LLM server)."""
