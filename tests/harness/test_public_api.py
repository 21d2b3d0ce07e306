import harness

PUBLIC = {
    "Cancel", "FileStore", "JsonlTrace", "Limits", "MemoryStore", "MemoryTrace", "ModelClient",
    "Pricing", "RunOptions", "RunState", "StateFileError", "Tool", "ToolContext", "approve",
    "default_tools", "make_sandbox", "new_run", "pending", "reject", "run", "summary_line",
}


def test_public_api_is_small_and_pinned():
    assert set(harness.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(harness, name) is not None
