"""End-to-end harness: real Hermes CLI against a scripted fake LLM in a private network namespace."""
