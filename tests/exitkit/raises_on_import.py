"""An adapter module that fails as it imports, as one does without its API key."""

raise RuntimeError("OPENAI_API_KEY is not set")
