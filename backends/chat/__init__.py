"""Chat: messages to prompt, and output text to content, reasoning and tool calls."""
